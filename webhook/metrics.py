"""Prometheus metrics, named ``catalog_warden_*`` on a registry of their own.

The latency histogram uses the kube-apiserver's admission bucket edges, so our figures line up
with ``apiserver_admission_webhook_admission_duration_seconds`` on the same dashboard.

Every label value comes from a closed set fixed when the process starts: a request's path and
family are looked up in :data:`PATHS` and the served families, and anything else is counted
under :data:`UNKNOWN`. A label is never copied from the URL, so no client can grow the series
(and the memory, and the size of ``/metrics``) by sending distinct paths.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from policies.families import FAMILIES

APISERVER_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0)

UNKNOWN = "unknown"
"""The one label value for every path or family outside the closed set."""

PATHS = frozenset({"validate", "mutate", "convert"})
"""The ``path`` label values besides :data:`UNKNOWN`."""

CONNECTION_CLOSE_REASONS = (
    "idle_timeout", "header_timeout", "body_timeout", "header_too_large", "over_concurrency", "evicted",
)  # fmt: skip
"""Why the server closed a connection itself (``webhook/bounds.py``): the ``reason`` label values."""

LISTENERS = ("webhook", "probes")
"""The ``listener`` label values: the TLS port and the probe port."""


class Metrics:
    """All metrics of one process. Create one per server (tests create several in one process)."""

    def __init__(self, families: Iterable[str] = FAMILIES) -> None:
        self._families = frozenset(families) | {""}  # "": conversion, which has no family
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
        self.connections_closed = Counter(
            "catalog_warden_connections_closed",
            "Connections the server closed because a client passed a bound (webhook/bounds.py).",
            ["listener", "reason"],
            registry=r,
        )
        for listener in LISTENERS:
            for reason in CONNECTION_CLOSE_REASONS:
                self.connections_closed.labels(listener, reason)

        self._children: dict[tuple[str, ...], tuple[Any, Any]] = {}

    def observe(self, path: str, family: str, operation: str, allowed: str, code: str, *, seconds: float) -> None:
        """Count one answered request and its latency (label children cached: this is the hot path).

        ``path`` and ``family`` outside the closed set are counted as :data:`UNKNOWN`; the other
        labels are an operation enum, a boolean and a status code the server chose.
        """
        if path not in PATHS:
            path = UNKNOWN
        if family not in self._families:
            family = UNKNOWN
        key = (path, family, operation, allowed, code)
        children = self._children.get(key)
        if children is None:
            children = (self.requests.labels(*key), self.latency.labels(path, family, operation))
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
