"""Memory of the informer cache per cached object, against DESIGN.md's target (≤ 2 KB overhead per object).

Run: `python bench/bench_cache.py [--objects N]`. Measured with tracemalloc, side by side in one run:

- the objects themselves: N ComponentVersions decoded from the JSON an apiserver sends, held in a list,
  minus `metadata.managedFields` (the cache drops it, so it is not part of what the cache keeps);
- the cache: the same N objects decoded again and fed through `InformerCache.apply` (the code path of
  every watch event) into its MemoryView with every family's indexes.

Overhead per object = (cache - objects) / N: the store's dicts, keys and index entries. The raw size of
an object with its managedFields is printed too, to show what the transform saves.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import client

from policies.kinds import COMPONENT_VERSION
from webhook.kube.cache import InformerCache, slim
from webhook.kube.client import Kube

TARGET_BYTES = 2048


def component_version(i: int) -> dict[str, Any]:
    """A ComponentVersion as the apiserver returns it, with discovery's label and our availability status."""
    ns, component = f"team-{i % 20}", f"app-{i % 500}"
    return {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "ComponentVersion",
        "metadata": {
            "name": f"{component}-v{i}",
            "namespace": ns,
            "uid": f"6f1c2a4e-0000-4000-8000-{i:012d}",
            "resourceVersion": str(100000 + i),
            "generation": 1,
            "creationTimestamp": "2026-11-28T09:15:00Z",
            "labels": {
                "solar.opendefense.cloud/component": component,
                "solar.opendefense.cloud/digest": f"sha256-{i:056x}",  # label values stop at 63 characters
            },
            "managedFields": [
                {
                    "manager": "solar-discovery",
                    "operation": "Update",
                    "apiVersion": "solar.opendefense.cloud/v1alpha1",
                    "time": "2026-11-28T09:15:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:solar.opendefense.cloud/component": {}}},
                                 "f:spec": {".": {}, "f:tag": {}, "f:componentRef": {".": {}, "f:name": {}}}},
                }
            ],
        },
        "spec": {
            "componentRef": {"name": component},
            "tag": f"v1.{i}.0",
            "entrypoint": {"resourceName": "chart", "type": "helm"},
        },
        "status": {
            "conditions": [
                {"type": "Available", "status": "True", "reason": "ArtifactResolved", "message": "",
                 "lastTransitionTime": "2026-11-28T09:16:00Z", "observedGeneration": 1}
            ],
            "availability": {"consecutiveMisses": 0, "lastCheckedAt": "2026-11-29T12:00:00Z",
                             "resolvedDigest": f"sha256:{i:064x}"},
        },
    }  # fmt: skip


def traced(build: Callable[[], Any]) -> tuple[int, Any]:
    """Bytes still allocated after `build()` (what it keeps alive), and its result (kept alive by the caller)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    n = parser.parse_args().objects
    texts = [json.dumps(component_version(i)) for i in range(n)]

    raw_bytes, raw = traced(lambda: [json.loads(t) for t in texts])
    del raw
    object_bytes, objects = traced(lambda: [slim(json.loads(t)) for t in texts])
    kube = Kube(client.ApiClient(client.Configuration(host="http://127.0.0.1:9")))  # never contacted

    def fill() -> InformerCache:
        cache = InformerCache(kube, kinds=[COMPONENT_VERSION])
        for text in texts:
            cache.apply(COMPONENT_VERSION, {"type": "ADDED", "object": json.loads(text)})
        return cache

    cache_bytes, cache = traced(fill)
    assert len(cache.list(COMPONENT_VERSION)) == n
    overhead = (cache_bytes - object_bytes) / n
    print(f"informer cache memory, {n} ComponentVersions (tracemalloc)")
    print(f"  object as sent (with managedFields) {raw_bytes / n:8.0f} B/object")
    print(f"  object as kept (managedFields cut)  {object_bytes / n:8.0f} B/object")
    print(f"  cache total                         {cache_bytes / n:8.0f} B/object")
    print(f"  overhead beyond the object          {overhead:8.0f} B/object")
    print(f"  overhead / object kept              {overhead / (object_bytes / n):8.2f}x")
    print(f"  overhead / target ({TARGET_BYTES} B)          {overhead / TARGET_BYTES:8.2f}x  (≤ 1.00 meets DESIGN.md)")
    del objects


if __name__ == "__main__":
    main()
