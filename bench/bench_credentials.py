"""Cost of the credential choice (tenancy) per availability pass, against the pass it rides on.

Run: `python bench/bench_credentials.py [--namespaces N] [--entries-per-namespace K] [--registries R]`.

A catalog of N namespaces with K ComponentVersions each, all on one host, and R Registries for that
host in R other namespaces, each with a ReferenceGrant admitting ComponentVersions of a fifth of
the N namespaces (so a lookup meets own, granted and anonymous cases). It times, side by side:

- `credential_source` once per entry (what the loop would cost without the per-pass memo);
- `RegistryClients.for_namespace` once per entry through the pool, as the availability loop asks
  (the choice is made once per (namespace, host) and pass; Secrets come from a dict, no I/O).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from policies.families import INDEXES
from policies.kinds import REFERENCE_GRANT, REGISTRY
from policies.registry_credentials import credential_source
from policies.view import MemoryView
from webhook.registry.client import RegistryClient
from webhook.sidecar.clients import Endpoint, RegistryClients

SOLAR = "solar.opendefense.cloud"
HOST = "reg.example:5000"


def catalog(namespaces: int, registries: int) -> MemoryView:
    view = MemoryView(INDEXES)
    for i in range(registries):
        ns = f"lender-{i}"
        spec = {"hostname": HOST, "solarSecretRef": {"name": "creds"}}
        view.put(REGISTRY, {"metadata": {"name": "reg", "namespace": ns}, "spec": spec})
        admitted = [f"team-{j}" for j in range(namespaces) if j % 5 == i % 5]
        grant = {
            "from": [{"group": SOLAR, "kind": "ComponentVersion", "namespace": a} for a in admitted],
            "to": [{"group": SOLAR, "kind": "Registry"}],
        }
        view.put(REFERENCE_GRANT, {"metadata": {"name": "g", "namespace": ns}, "spec": grant})
    for j in range(0, namespaces, 7):  # some tenants have a Registry of their own
        own = {"hostname": HOST, "solarSecretRef": {"name": "creds"}}
        view.put(REGISTRY, {"metadata": {"name": "own", "namespace": f"team-{j}"}, "spec": own})
    return view


async def through_pool(view: MemoryView, namespaces: int, per_namespace: int) -> tuple[float, float]:
    data = {"username": base64.b64encode(b"u").decode(), "password": base64.b64encode(b"p").decode()}

    def read(namespace: str, name: str) -> dict[str, Any]:
        return {"data": data}

    def factory(endpoint: Endpoint) -> RegistryClient:
        return RegistryClient(endpoint.hostname, plain_http=endpoint.plain_http, credentials=endpoint.credentials)

    pool = RegistryClients(view, read, factory)
    elapsed: list[float] = []
    for _ in range(2):  # the first pass also builds the clients, which later passes keep
        pool.begin_pass()
        started = time.perf_counter()
        for j in range(namespaces):
            for _ in range(per_namespace):
                await pool.for_namespace(f"team-{j}", HOST)
        elapsed.append(time.perf_counter() - started)
    await pool.aclose()
    return elapsed[0], elapsed[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--namespaces", type=int, default=500)
    parser.add_argument("--entries-per-namespace", type=int, default=20)
    parser.add_argument("--registries", type=int, default=50)
    args = parser.parse_args()
    view = catalog(args.namespaces, args.registries)
    entries = args.namespaces * args.entries_per_namespace

    started = time.perf_counter()
    for j in range(args.namespaces):
        for _ in range(args.entries_per_namespace):
            credential_source(view, f"team-{j}", HOST)
    bare = time.perf_counter() - started
    first, steady = asyncio.run(through_pool(view, args.namespaces, args.entries_per_namespace))
    print(f"{entries} entries in {args.namespaces} namespaces, {args.registries} lending Registries for one host")
    print(f"credential_source per entry: {bare:.3f} s per pass ({bare / entries * 1e6:.0f} us per entry)")
    print(f"through the pool (one choice per namespace and pass): first pass {first:.3f} s, then {steady:.3f} s")


if __name__ == "__main__":
    main()
