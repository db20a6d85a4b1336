"""CPU time of one retention plan, against DESIGN.md's target (one sweep over 100,000 ComponentVersions < 1 s).

Run: `python bench/bench_janitor.py [--versions N] [--releases M] [--rounds R]`.

The catalog is built to make the plan work hard: 2,000 Components of 50 versions each; half the
entries are red for longer than `minRedAge` (so their Components must be ranked for keep-last),
a tenth of the red ones are red too recently, one in 20 tags is not semver (snapshot tags), one in
50 entries carries the protection finalizer, and M Releases reference entries (one in 10 of them
terminating). Everything sits in a `MemoryView` with every family's indexes, as in the informer
cache. The cap is lifted so every eligible entry becomes a Deletion object.

CPU time (`time.process_time`) of `policies.retention.plan`, best and median of R rounds, is
printed beside the 1 s target as a ratio (below 1.0 meets it).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from policies.families import INDEXES
from policies.kinds import COMPONENT_VERSION, RELEASE
from policies.retention import plan
from policies.sidecar_config import RetentionConfig
from policies.view import MemoryView

TARGET_SECONDS = 1.0
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
PER_COMPONENT = 50


def component_version(i: int) -> dict[str, Any]:
    component = f"app-{i // PER_COMPONENT}"
    ns = f"team-{(i // PER_COMPONENT) % 20}"
    red, recent = i % 2 == 0, i % 20 == 0
    since = NOW - (timedelta(hours=1) if recent else timedelta(days=30))
    tag = f"snapshot-{i}" if i % 20 == 7 else f"{i % 7}.{i % PER_COMPONENT}.{i % 3}"
    return {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "ComponentVersion",
        "metadata": {
            "name": f"{component}-v{i}",
            "namespace": ns,
            "uid": f"6f1c2a4e-0000-4000-8000-{i:012d}",
            "resourceVersion": str(100000 + i),
            "creationTimestamp": f"2026-{1 + i % 11:02d}-{1 + i % 27:02d}T09:15:00Z",
            "labels": {"solar.opendefense.cloud/component": component},
            "finalizers": ["solar.opendefense.cloud/componentversion-ref"] if i % 50 == 2 else [],
        },
        "spec": {"componentRef": {"name": component}, "tag": tag},
        "status": {
            "conditions": [
                {
                    "type": "Available",
                    "status": "False" if red else "True",
                    "reason": "ArtifactMissing" if red else "ArtifactResolved",
                    "message": "m",
                    "lastTransitionTime": since.strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            ]
        },
    }


def release(j: int, versions: int) -> dict[str, Any]:
    target = (j * 7919) % versions
    component = f"app-{target // PER_COMPONENT}"
    meta: dict[str, Any] = {"name": f"rel-{j}", "namespace": f"team-{(target // PER_COMPONENT) % 20}"}
    if j % 10 == 0:
        meta["deletionTimestamp"] = "2026-11-29T11:00:00Z"
    return {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "Release",
        "metadata": meta,
        "spec": {"componentVersionRef": {"name": f"{component}-v{target}"}},
    }


def build(versions: int, releases: int) -> MemoryView:
    view = MemoryView(INDEXES)
    view.replace(COMPONENT_VERSION, (component_version(i) for i in range(versions)))
    view.replace(RELEASE, (release(j, versions) for j in range(releases)))
    return view


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=100_000)
    parser.add_argument("--releases", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    view = build(args.versions, args.releases)
    config = RetentionConfig(enabled=True, maxDeletesPerSweep=args.versions)
    times: list[float] = []
    result = plan(view, NOW, config)  # warm-up (regex compile, first allocations)
    for _ in range(args.rounds):
        gc.collect()
        started = time.process_time()
        result = plan(view, NOW, config)
        times.append(time.process_time() - started)
    best, median = min(times), statistics.median(times)
    print(f"janitor plan: {args.versions} ComponentVersions, {args.releases} Releases, {args.rounds} rounds")
    print(f"  deletions planned: {len(result.deletions)}; kept: {dict(sorted(result.kept_counts().items()))}")
    print(f"  CPU per plan: best {best:.3f} s, median {median:.3f} s")
    print(
        f"  target {TARGET_SECONDS:.1f} s: ratio best {best / TARGET_SECONDS:.2f}, median {median / TARGET_SECONDS:.2f}"
    )


if __name__ == "__main__":
    main()
