"""Conversion cost per object in a 100-object ConversionReview (DESIGN.md section 10).

Runs ``webhook.conversion.convert_review`` in-process (the wire and JSON decoding are the HTTP
layer's and measured by the admission benchmarks) on realistic batches in both directions of
PackageRevision (the only kind served in two versions), and prints the time per object beside two references, as ratios:
  - kube-apiserver's own budget for a conversion webhook, about 4 ms per object
    (apiextensions-apiserver webhook_converter.go logs a trace above 50 ms + 8 ms per object,
    half of which it attributes to the webhook);
  - our target in DESIGN.md, 0.25 ms per object.
A ratio below 1.0 is within the reference. Run: ``python bench/bench_conversion.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from webhook.conversion import convert_review

BATCH = 100
APISERVER_TARGET_MS = 4.0
DESIGN_TARGET_MS = 0.25


def package_revision(i: int, version: str) -> dict[str, Any]:
    meta = {
        "name": f"blueprints.nginx.v{i}",
        "namespace": "default",
        "uid": f"6b1c2c9e-0000-4000-8000-{i:012d}",
        "resourceVersion": str(1000 + i),
        "generation": 2,
        "creationTimestamp": "2026-11-01T10:00:00Z",
        "labels": {"porch.kpt.dev/repository": "blueprints", "app": "nginx"},
        "finalizers": ["porch.kpt.dev/packagerevisions"],
        "ownerReferences": [
            {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "Repository", "name": "blueprints"}
        ],
    }
    spec = {
        "packageName": "nginx",
        "repository": "blueprints",
        "workspaceName": f"v{i}",
        "lifecycle": "Published",
        "readinessGates": [{"conditionType": "Ready"}],
    }
    conditions = [
        {
            "type": "Ready",
            "status": "True",
            "reason": "Ready",
            "message": "",
            "lastTransitionTime": "2026-11-01T10:00:00Z",
        }
    ]
    if version == "v1alpha1":
        meta["labels"]["kpt.dev/latest-revision"] = "true"
        spec |= {
            "revision": i,
            "tasks": [
                {
                    "type": "clone",
                    "clone": {
                        "upstreamRef": {
                            "type": "git",
                            "git": {"repo": "https://example.com/catalog.git", "ref": "main", "directory": "nginx"},
                        }
                    },
                },
                {"type": "render"},
            ],
        }
        status = {"publishedBy": "alice", "publishTimestamp": "2026-11-01T10:00:00Z", "conditions": conditions}
    else:
        meta["labels"]["porch.kpt.dev/latest-revision"] = "true"
        spec["source"] = {
            "cloneFrom": {
                "type": "git",
                "git": {"repo": "https://example.com/catalog.git", "ref": "main", "directory": "nginx"},
            }
        }
        status = {
            "revision": i,
            "publishedBy": "alice",
            "publishedAt": "2026-11-01T10:00:00Z",
            "observedGeneration": 2,
            "creationSource": "clone",
            "conditions": conditions,
        }
    return {
        "apiVersion": f"porch.kpt.dev/{version}",
        "kind": "PackageRevision",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


def review(desired: str, objects: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "bench", "desiredAPIVersion": desired, "objects": objects},
    }


def scenarios() -> dict[str, dict[str, Any]]:
    """A read of stored objects (v1alpha2 -> v1alpha1) and a write (the way back)."""
    pr_stored = [package_revision(i, "v1alpha2") for i in range(BATCH)]
    pr_read = convert_review(review("porch.kpt.dev/v1alpha1", pr_stored))["response"]["convertedObjects"]
    return {
        "PackageRevision v1alpha2->v1alpha1": review("porch.kpt.dev/v1alpha1", pr_stored),
        "PackageRevision v1alpha1->v1alpha2": review("porch.kpt.dev/v1alpha2", pr_read),
        "PackageRevision fresh v1alpha1->v1alpha2": review(
            "porch.kpt.dev/v1alpha2", [package_revision(i, "v1alpha1") for i in range(BATCH)]
        ),
    }


def measure(body: dict[str, Any], rounds: int) -> float:
    """Median milliseconds per object over ``rounds`` whole reviews (after a warm-up)."""
    for _ in range(20):
        convert_review(body)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        answer = convert_review(body)
        samples.append((time.perf_counter() - start) * 1000 / BATCH)
        assert answer["response"]["result"]["status"] == "Success", answer["response"]["result"]
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    print(f"{BATCH} objects per ConversionReview, median of {args.rounds} rounds")
    print(f"{'scenario':<58}{'ms/object':>10}{'vs 4 ms':>10}{'vs 0.25 ms':>12}")
    worst = 0.0
    for name, body in scenarios().items():
        per_object = measure(body, args.rounds)
        worst = max(worst, per_object)
        print(
            f"{name:<58}{per_object:>10.4f}"
            f"{per_object / APISERVER_TARGET_MS:>10.3f}{per_object / DESIGN_TARGET_MS:>12.3f}"
        )
    verdict = "within" if worst <= DESIGN_TARGET_MS else "OVER"
    print(
        f"worst {worst:.4f} ms/object: {verdict} the DESIGN.md target of {DESIGN_TARGET_MS} ms "
        f"({worst / APISERVER_TARGET_MS:.3f}x kube-apiserver's ~{APISERVER_TARGET_MS:.0f} ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
