"""What fresh truth costs: the referenced set from a paginated list of the apiserver versus from the cache.

Run: `python bench/bench_fresh_set.py [--versions N] [--rounds R] [--page-size P]`.

The sidecar computes the referenced set from a fresh list of Components and ComponentVersions
(`webhook.sidecar.referenced_set.FreshSet`) once per pass and once more per opted-in registry,
instead of reading its informer cache. This measures one such computation against the project's
apiserver double on 127.0.0.1 (N ComponentVersions, N/50 Components, pages of P), wall time,
best and median of R rounds, beside the same set computed from an in-memory view (what the cache
path cost). The double is a Python server, slower per object than kube-apiserver, so the
figure is an upper bound for the list part (its ``continue`` pages cost more the deeper they go,
which etcd's range reads do not: compare ``--page-size 500`` with a page size above N).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from policies.families import INDEXES
from policies.kinds import COMPONENT, COMPONENT_VERSION
from policies.referenced_set import ReferencedSet, compute
from policies.view import MemoryView
from tests.support.apiserver.double import ApiServerDouble
from tests.support.apiserver.fixtures import PROJECT_MANIFESTS
from webhook.kube.client import Kube
from webhook.sidecar.referenced_set import FreshSet

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
PER_COMPONENT = 50
SOLAR = "solar.opendefense.cloud/v1alpha1"


def component(c: int) -> dict[str, Any]:
    return {
        "apiVersion": SOLAR,
        "kind": "Component",
        "metadata": {"name": f"example-com-app{c}", "namespace": f"team-{c % 20}"},
        "spec": {"registry": "reg.example:5000", "repository": f"ocm/example.com/app{c}", "scheme": "https"},
    }


def component_version(i: int) -> dict[str, Any]:
    c = i // PER_COMPONENT
    return {
        "apiVersion": SOLAR,
        "kind": "ComponentVersion",
        "metadata": {"name": f"app{c}-v{i}", "namespace": f"team-{c % 20}"},
        "spec": {"componentRef": {"name": f"example-com-app{c}"}, "tag": f"1.{i % PER_COMPONENT}.0"},
    }


def timed(fn: Any, rounds: int) -> tuple[float, float, Any]:
    times, result = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--page-size", type=int, default=500)
    args = parser.parse_args()
    components = [component(c) for c in range((args.versions + PER_COMPONENT - 1) // PER_COMPONENT)]
    versions = [component_version(i) for i in range(args.versions)]

    with ApiServerDouble(PROJECT_MANIFESTS, webhook_base_url=None) as double:
        for obj in (*components, *versions):
            double.seed(obj)
        kube = Kube(double.admin)
        fresh = FreshSet(kube, MemoryView(synced=True), page_size=args.page_size)
        fresh_best, fresh_median, from_api = timed(lambda: fresh.compute(1, NOW), args.rounds)

    view = MemoryView(INDEXES, synced=True)
    view.replace(COMPONENT, components)
    view.replace(COMPONENT_VERSION, versions)
    cache_best, cache_median, from_cache = timed(lambda: compute(view, 1, NOW), args.rounds)
    assert isinstance(from_api, ReferencedSet) and from_api.same_content(from_cache), "the two paths must agree"

    print(f"referenced set: {args.versions} ComponentVersions, {len(components)} Components, {args.rounds} rounds")
    print(f"  fresh list (double, pages of {args.page_size}): best {fresh_best:.3f} s, median {fresh_median:.3f} s")
    print(f"  from the cache (in-memory view): best {cache_best:.3f} s, median {cache_median:.3f} s")
    print(f"  ratio fresh / cache (median): {fresh_median / cache_median:.1f}")


if __name__ == "__main__":
    main()
