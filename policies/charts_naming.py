"""The name catalog-warden gives a HelmClusterAddonChart it creates (standalone mode only).

Used for creation, never for lookup: chart objects are found by their ``repository`` and
``chart`` labels (``policies.charts.find_chart``). operator-helm derives the name from a hash
of the pair and has changed that scheme at least four times (reference B5: ``<repo>-<chart>``,
then ``<repo>-chart-<chart>``, with the hash input and the truncation changing on the way), so a
derived name that misses would silently read as "not indexed yet". When the chart index creates
an object it uses upstream's current scheme (``api/naming/naming.go`` ``HelmClusterAddonChartName``)
so a later switch to operator-helm sees familiar names; golden vectors in the tests pin it.
"""

from __future__ import annotations

import hashlib

PART_LIMIT = 20
"""Bytes kept of the repository and of the chart name before the hash postfix is added."""
HASH_LENGTH = 12
SEPARATOR = "-chart-"


def _truncated(part: bytes) -> tuple[bytes, bool]:
    return (part, False) if len(part) <= PART_LIMIT else (part[:PART_LIMIT], True)


def helm_cluster_addon_chart_name(repo: str, chart: str) -> str:
    """``<repo>-chart-<chart>``, with both parts cut to 20 bytes and a hash postfix when cut.

    ``hash = hex(sha256("<repo>-chart-<chart>"))[:12]``; the postfix ``-<hash>`` is added only
    when something was truncated, after trailing dashes are trimmed (Go ``strings.TrimRight``).
    Lengths are byte lengths as in Go; Kubernetes names are ASCII, so a cut never splits a
    character in practice.
    """
    digest = hashlib.sha256(f"{repo}{SEPARATOR}{chart}".encode()).hexdigest()[:HASH_LENGTH]
    repo_part, repo_cut = _truncated(repo.encode())
    chart_part, chart_cut = _truncated(chart.encode())
    postfix = f"-{digest}" if repo_cut or chart_cut else ""
    result = repo_part + SEPARATOR.encode() + chart_part
    return result.rstrip(b"-").decode(errors="replace") + postfix
