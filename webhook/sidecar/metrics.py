"""The sidecar's Prometheus metrics (``catalog_warden_*``), on a registry of their own.

How recently each loop ran is a metric, not an API write per entry and pass (docs/sidecar.md):
``catalog_warden_sidecar_last_pass_timestamp_seconds`` is what an alert watches.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

PASS_BUCKETS = (0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0)


class SidecarMetrics:
    """All sidecar metrics of one process (tests create several in one process)."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.passes = Counter("catalog_warden_sidecar_passes", "Loop passes run.", ["loop"], registry=r)
        self.pass_duration = Histogram(
            "catalog_warden_sidecar_pass_duration_seconds",
            "Wall time of one pass.",
            ["loop"],
            buckets=PASS_BUCKETS,
            registry=r,
        )
        self.last_pass = Gauge(
            "catalog_warden_sidecar_last_pass_timestamp_seconds",
            "When the last pass ended (Unix time).",
            ["loop"],
            registry=r,
        )
        self.checks = Counter(
            "catalog_warden_availability_checks", "Manifest lookups by outcome.", ["outcome"], registry=r
        )
        self.status_writes = Counter(
            "catalog_warden_availability_status_writes",
            "ComponentVersion status writes (written, conflict: skipped until next pass, gone, error: left as is).",
            ["result"],
            registry=r,
        )
        self.entries = Gauge(
            "catalog_warden_availability_entries",
            "ComponentVersions by Available status after the last full pass.",
            ["status"],
            registry=r,
        )
        self.rechecks = Counter(
            "catalog_warden_availability_early_rechecks",
            "ComponentVersions re-checked early on a registry event.",
            registry=r,
        )
        self.publications = Counter(
            "catalog_warden_referenced_set_publications",
            "Referenced-set computations (published, unchanged, incomplete, conflict).",
            ["result"],
            registry=r,
        )
        self.generation = Gauge(
            "catalog_warden_referenced_set_generation", "Generation of the last published referenced set.", registry=r
        )
        self.reclaim_actions = Counter(
            "catalog_warden_reclaim_actions",
            "Reclamation actions (removed, dry_run, failed) per registry and mode.",
            ["registry", "mode", "result"],
            registry=r,
        )
        self.reclaim_refusals = Counter(
            "catalog_warden_reclaim_refusals",
            "Registry passes that reclaimed nothing on purpose.",
            ["registry", "why"],
            registry=r,
        )
        self.events = Counter(
            "catalog_warden_registry_events",
            "Registry notifications received (matched, ignored, invalid, unauthorized).",
            ["result"],
            registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
