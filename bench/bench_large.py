"""Large admission requests: a 3 MiB PackageRevision on /mutate/packages against /validate/packages.

kube-apiserver refuses request bodies over 3 MiB, so the largest object a webhook is ever sent is
about 3 MiB (twice that on UPDATE, object and oldObject). The webhook's default timeout is 10 s,
and the server answers on one event loop, so while a large request is evaluated every other
request waits. This runs ``catalog-warden serve --state examples/state`` over real TLS and, for
each shape of object, side by side in one run:

- the client-side time of the same body on /validate/packages and /mutate/packages
  (median and worst of ``--rounds``);
- the worst time a small Release CREATE waited, sent in a loop on another connection while the
  large ones ran (what every other admission request of the cluster sees meanwhile).

    python bench/bench_large.py [--rounds 5] [--mib 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.server.reviews import release, review  # noqa: E402
from tests.support.server import Endpoint, ServerProcess, make_certs  # noqa: E402

HEADERS = {"Content-Type": "application/json"}


def revision(lifecycle: str) -> dict[str, Any]:
    return {
        "apiVersion": "porch.kpt.dev/v1alpha1",
        "kind": "PackageRevision",
        "metadata": {"name": "blueprints.nginx.v1", "namespace": "team-a"},
        "spec": {"repository": "blueprints", "packageName": "nginx", "workspaceName": "v1",
                 "lifecycle": lifecycle, "tasks": [{"type": "init", "init": {"description": "nginx"}}]},
    }  # fmt: skip


def grow(obj: dict[str, Any], size: int, add: Callable[[dict[str, Any], int], None]) -> dict[str, Any]:
    """``obj`` with ``add(obj, i)`` applied until it encodes to just below ``size`` bytes."""
    i, length = 0, len(orjson.dumps(obj))
    while True:
        add(obj, i)
        i += 1
        grown = len(orjson.dumps(obj))
        per_add, length = max(grown - length, 1), grown
        steps = (size - 4096 - length) // (2 * per_add)
        if steps <= 0:
            return obj
        for _ in range(steps):
            add(obj, i)
            i += 1
        length = len(orjson.dumps(obj))


def many_tasks(obj: dict[str, Any], i: int) -> None:
    """Realistic: kpt function eval tasks with their ConfigMap (x-kubernetes-preserve-unknown-fields)."""
    config = {f"key-{j}": f"value-{i}-{j}" for j in range(8)}
    obj["spec"]["tasks"].append({"type": "eval", "eval": {"image": f"gcr.io/kpt-fn/set-labels:v0.{i}",
                                                          "configMap": config}})  # fmt: skip


def tiny_containers(obj: dict[str, Any], i: int) -> None:
    """The worst shape for anything that walks the object: as many containers per byte as JSON allows."""
    obj.setdefault("status", {}).setdefault("upstreamLock", {}).setdefault("x", []).extend([[i], {}] * 16)


def one_string(obj: dict[str, Any], i: int) -> None:
    annotations = obj["metadata"].setdefault("annotations", {})
    annotations["example.com/blob"] = annotations.get("example.com/blob", "") + "x" * 65536


SHAPES = {"eval tasks": many_tasks, "tiny containers": tiny_containers, "one string": one_string}


def body(op: str, obj: dict[str, Any], old: dict[str, Any] | None) -> bytes:
    r = review(op, obj, old, group="porch.kpt.dev", version="v1alpha1", kind="PackageRevision", uid="bench-large")
    return orjson.dumps(r)


def timed(client: httpx.Client, path: str, content: bytes) -> float:
    started = time.perf_counter()
    r = client.post(path, content=content, headers=HEADERS)
    elapsed = time.perf_counter() - started
    answer = r.json()["response"]
    if r.status_code != 200 or not answer["allowed"]:
        raise SystemExit(f"{path}: {r.status_code} {answer}")
    if path.startswith("/mutate/") and "patch" not in answer:
        raise SystemExit(f"{path}: no patch")
    return elapsed


def client_for(server: Endpoint, timeout: float) -> httpx.Client:
    return httpx.Client(base_url=server.url, verify=server.ssl_context(), timeout=timeout)


class SmallRequests:
    """A Release CREATE in a loop on its own connection; records the worst wait while running."""

    def __init__(self, server: Endpoint, timeout: float) -> None:
        self.server = server
        self.timeout = timeout
        self.worst = 0.0
        self.count = 0
        self._stop = threading.Event()
        self._body = orjson.dumps(review("CREATE", release("ocm-demo-v1.2.0")))
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with client_for(self.server, self.timeout) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                client.post("/validate/catalog", content=self._body, headers=HEADERS).raise_for_status()
                self.worst = max(self.worst, time.perf_counter() - started)
                self.count += 1

    def __enter__(self) -> SmallRequests:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mib", type=float, default=3.0, help="object size (kube-apiserver's request limit: 3)")
    ap.add_argument("--timeout", type=float, default=60.0, help="client timeout in seconds")
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES))
    args = ap.parse_args()
    size = int(args.mib * 1024 * 1024)
    tmp = Path(tempfile.mkdtemp(prefix="bench-large-"))
    with ServerProcess(make_certs(tmp / "certs"), ["--state", str(REPO / "examples" / "state")]) as server:
        print(f"{args.mib:g} MiB objects, {args.rounds} rounds each, times in ms (median / worst)")
        print(f"{'shape':<16} {'operation':<7} {'body MiB':>8} | {'/validate':>15} | {'/mutate':>15} | "
              f"{'small request worst wait':>24}")  # fmt: skip
        with client_for(server, args.timeout) as client:
            for name in args.shapes:
                add = SHAPES[name]
                draft = grow(revision("Draft"), size, add)
                proposed = {**draft, "spec": {**draft["spec"], "lifecycle": "Proposed"}}
                published = {**draft, "spec": {**draft["spec"], "lifecycle": "Published"}}
                for op, content in (("CREATE", body("CREATE", draft, None)),
                                    ("UPDATE", body("UPDATE", published, proposed))):  # fmt: skip
                    times: dict[str, list[float]] = {"/validate/packages": [], "/mutate/packages": []}
                    with SmallRequests(server, args.timeout) as small:
                        for _ in range(args.rounds):
                            for path, seen in times.items():
                                seen.append(timed(client, path, content))
                    cells = [f"{statistics.median(t) * 1000:>6.0f} / {max(t) * 1000:>6.0f}" for t in times.values()]
                    print(f"{name:<16} {op:<7} {len(content) / 2**20:>8.2f} | {cells[0]:>15} | {cells[1]:>15} | "
                          f"{small.worst * 1000:>10.0f} ms over {small.count:,}")  # fmt: skip


if __name__ == "__main__":
    main()
