"""Prometheus metrics, named ``catalog_warden_*`` on a registry of their own.

The latency histogram uses the kube-apiserver's admission bucket edges, so our figures line up
with ``apiserver_admission_webhook_admission_duration_seconds`` on the same dashboard.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

APISERVER_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0)


class Metrics:
    """All metrics of one process. Create one per server (tests create several in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "catalog_warden_admission_requests",
            "Admission and conversion requests answered.",
            ["path", "family", "operation", "allowed", "code"],
            registry=r,
        )
        self.latency = Histogram(
            "catalog_warden_admission_duration_seconds",
            "Time from request received to answer encoded, server side.",
            ["path", "family", "operation"],
            buckets=APISERVER_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge("catalog_warden_admission_in_flight", "Requests being evaluated right now.", registry=r)
        self.rule_errors = Counter(
            "catalog_warden_rule_errors", "Rules that raised instead of deciding.", ["rule"], registry=r
        )
        self.cert_reloads = Counter(
            "catalog_warden_certificate_reloads", "Serving certificate pairs loaded after a change.", registry=r
        )
        self.cert_reload_errors = Counter(
            "catalog_warden_certificate_reload_errors",
            "Changed certificate pairs that could not be loaded (the last good pair stays).",
            registry=r,
        )

        self._children: dict[tuple[str, ...], tuple[Any, Any]] = {}

    def observe(self, path: str, family: str, operation: str, allowed: str, code: str, *, seconds: float) -> None:
        """Count one answered request and its latency (label children cached: this is the hot path)."""
        key = (path, family, operation, allowed, code)
        children = self._children.get(key)
        if children is None:
            children = (self.requests.labels(*key), self.latency.labels(path, family, operation))
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
