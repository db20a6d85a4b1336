"""How long a cut watch goes unnoticed, and how long the cache takes to recover, at the configured bounds.

Run: `python bench/bench_watch_cut.py [--watch-timeout 60] [--max-watch-gap 15] [--request-timeout 10]
[--outage 20] [--runs 1]` (the defaults are the production defaults of `informer.*`).

An informer cache (ComponentVersions and Releases) watches the apiserver double through the tests'
TCP proxy. For each fault (`reset`: connections reset, new ones hang; `blackhole`: connections stay
open and carry nothing, new ones hang) it measures, from the moment of the fault:

- *stale after*: until `synced` turns false (the 503s and the unready probe start here). The bound
  is `max_watch_gap` for a reset and `watch_timeout + max_watch_gap` after the last byte for a
  blackhole (the double's bookmarks every second make "last byte" nearly the fault itself);
- *recovered after heal*: from the heal (after `--outage` seconds) until `synced` is true again and an
  object created during the fault is in the cache. It is at most the reflector's current backoff
  (capped at 10 s) plus what is left of a relist hanging in the outage (`request_timeout`).

The figures in docs/operations.md come from this script with the production defaults.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import client

from policies.kinds import COMPONENT_VERSION, NAMESPACE, RELEASE
from tests.kube.tcp_proxy import TcpProxy
from tests.support.apiserver import ApiServerDouble
from tests.support.apiserver.fixtures import PROJECT_MANIFESTS
from webhook.kube.cache import InformerCache
from webhook.kube.client import Kube

WARDEN = "system:serviceaccount:catalog-warden:catalog-warden"
NS = "team-a"


def until(check: Callable[[], bool], timeout: float) -> float:
    """Seconds until ``check`` holds (polling every 10 ms); fails after ``timeout``."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise SystemExit(f"not within {timeout}s")
        time.sleep(0.01)
    return time.monotonic() - started


def one(fault: str, args: argparse.Namespace, number: int) -> tuple[float, float]:
    with ApiServerDouble(PROJECT_MANIFESTS) as double:
        double.admission.hooks.clear()
        admin = Kube(double.admin)
        admin.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        host, port = double.url.removeprefix("http://").split(":")
        with TcpProxy((host, int(port))) as proxy:
            configuration = double.configuration(WARDEN)
            configuration.host = proxy.url
            cache = InformerCache(
                Kube(client.ApiClient(configuration)),
                (COMPONENT_VERSION, RELEASE),
                watch_timeout=args.watch_timeout,
                max_watch_gap=args.max_watch_gap,
                request_timeout=args.request_timeout,
            ).start()
            try:
                assert cache.wait_synced(10)
                until(lambda: all(cache.watches(k) for k in cache.kinds()), 10)
                proxy.cut(reset=True) if fault == "reset" else proxy.blackhole()
                stale = until(lambda: not cache.synced, args.watch_timeout + args.max_watch_gap + 10)
                name = f"during-{fault}-{number}"
                admin.create(
                    COMPONENT_VERSION,
                    {
                        "apiVersion": "solar.opendefense.cloud/v1alpha1",
                        "kind": "ComponentVersion",
                        "metadata": {"name": name, "namespace": NS},
                        "spec": {"tag": "v1"},
                    },
                )
                time.sleep(max(0.0, args.outage - stale))  # the outage lasts --outage seconds in all
                proxy.heal()
                recovered = until(lambda: cache.synced and cache.get(COMPONENT_VERSION, name, NS) is not None, 60)
                return stale, recovered
            finally:
                cache.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watch-timeout", type=int, default=60)
    parser.add_argument("--max-watch-gap", type=float, default=15.0)
    parser.add_argument("--request-timeout", type=float, default=10.0)
    parser.add_argument("--outage", type=float, default=20.0, help="seconds from the fault to the heal (at least)")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    print(
        f"watch_timeout={args.watch_timeout}s max_watch_gap={args.max_watch_gap}s "
        f"request_timeout={args.request_timeout}s outage>={args.outage}s"
    )
    print(f"{'fault':<10} {'stale after':>12} {'recovered after heal':>22}")
    for fault in ("reset", "blackhole"):
        for number in range(args.runs):
            stale, recovered = one(fault, args, number)
            print(f"{fault:<10} {stale:>11.2f}s {recovered:>21.2f}s")


if __name__ == "__main__":
    main()
