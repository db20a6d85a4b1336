"""Structured wire fuzz (issue 11): valid reviews with wrong-typed values put anywhere in them.

A seed is a review as kube-apiserver sends it (an AdmissionReview for each guarded kind, a
ConversionReview of PackageRevisions or HelmClusterAddonCharts); a case replaces one to three
nodes anywhere in it (the envelope, ``userInfo.groups[0]``, ``object.metadata``, a field deep in
the object) with a JSON value of another shape, or with an object nested around the depth bound.
Nested values past what orjson encodes are spliced in as JSON text, so bodies reach 1,000 levels.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import orjson
from hypothesis import strategies as st

from policies.nesting import MAX_DEPTH
from tests.conversion import builders as conv_builders
from tests.policies import test_catalog_support as catalog
from tests.policies import test_charts as charts
from tests.policies import test_packages_support as packages
from tests.server.reviews import review as admission_review

Path = tuple[str | int, ...]

ADMISSION_OBJECTS: list[tuple[dict[str, Any], str]] = [
    (catalog.component(), "catalog"),
    (catalog.component_version(), "catalog"),
    (catalog.release(), "catalog"),
    (catalog.registry(), "catalog"),
    (catalog.target(), "catalog"),
    (catalog.registry_binding("rb"), "catalog"),
    (catalog.release_binding("rb"), "catalog"),
    (catalog.reference_grant("team-a", "Release", "team-b", "ComponentVersion"), "catalog"),
    (packages.revision("Draft"), "packages"),
    (packages.revision("Published", version="v1alpha1"), "packages"),
    (packages.repository(), "packages"),
    (charts.addon("podinfo"), "charts"),
    (charts.repository("podinfo", "https://charts.example.com"), "charts"),
    (charts.chart_object("podinfo-chart-podinfo", [{"version": "1.0.0"}]), "charts"),
]


class Deep:
    """A placeholder for ``{"a": {"a": ... {}}}`` nested ``levels`` deep, spliced in as text."""

    def __init__(self, levels: int) -> None:
        self.levels = levels

    def text(self) -> bytes:
        return b'{"a":' * (self.levels - 1) + b"{}" + b"}" * (self.levels - 1)

    def value(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for _ in range(self.levels - 1):
            out = {"a": out}
        return out


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(["", "CREATE", "Draft", "Published", "a/b", "1.0.0", "v1alpha1", "porch.kpt.dev/v1alpha2"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8,
)
deep_values = st.sampled_from([MAX_DEPTH - 3, MAX_DEPTH, MAX_DEPTH + 1, 250, 300, 1000]).map(Deep)
replacements = st.one_of(json_values, json_values, json_values, deep_values)


def paths(node: Any, prefix: Path = (), depth: int = 12) -> Iterator[Path]:
    """Every node's path in ``node`` down to ``depth`` levels (deep values are not walked), the root included."""
    yield prefix
    if depth == 0:
        return
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths(value, (*prefix, key), depth - 1)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from paths(value, (*prefix, i), depth - 1)


def put(doc: Any, path: Path, value: Any) -> Any:
    if not path:
        return value
    cur = doc
    for key in path[:-1]:
        cur = cur[key]
    cur[path[-1]] = value
    return doc


def encode(doc: Any) -> bytes:
    """``doc`` as JSON, with each :class:`Deep` placeholder spliced in as text."""
    deep: dict[str, Deep] = {}

    def placeholder(value: Any) -> Any:
        if isinstance(value, Deep):
            key = f"__deep_{len(deep)}__"
            deep[key] = value
            return key
        raise TypeError

    body = orjson.dumps(doc, default=placeholder)
    for key, value in deep.items():
        body = body.replace(json.dumps(key).encode(), value.text())
    return body


@st.composite
def broken(draw: st.DrawFn, seed: dict[str, Any], focus: tuple[Path, ...] = ()) -> Any:
    """``seed`` with one to three nodes replaced by values of other shapes.

    Half the cases only touch nodes under one of the ``focus`` paths (the objects), so the rules
    see malformed objects in well-formed envelopes, not only envelopes the framing refuses.
    """
    doc: Any = copy.deepcopy(seed)
    prefixes = [p for p in focus if draw(st.booleans())][:1]
    for _ in range(draw(st.integers(1, 3))):
        candidates = [
            p for p in paths(doc)
            if not _inside_placeholder(doc, p) and (not prefixes or p[: len(prefixes[0])] == prefixes[0])
        ]  # fmt: skip
        doc = put(doc, draw(st.sampled_from(candidates or [()])), draw(replacements))
    return doc


def _inside_placeholder(doc: Any, path: Path) -> bool:
    cur = doc
    for key in path:
        if isinstance(cur, Deep):
            return True
        cur = cur[key]
    return False


OPERATIONS = ["CREATE", "UPDATE", "DELETE", "CONNECT"]


@st.composite
def admission_cases(draw: st.DrawFn) -> tuple[str, bytes, Any]:
    """(path, body, the broken review) for ``/validate/{family}`` or ``/mutate/{family}``."""
    obj, family = draw(st.sampled_from(ADMISSION_OBJECTS))
    group, _, version = obj["apiVersion"].rpartition("/")
    op = draw(st.sampled_from(OPERATIONS))
    new = None if op == "DELETE" else obj
    old = None if op == "CREATE" else obj
    seed = admission_review(op, new, old, group=group, version=version, kind=obj["kind"], uid=draw(uids))
    focus = tuple(("request", key) for key in ("object", "oldObject") if seed["request"][key] is not None)
    doc = draw(broken(seed, focus))
    path = f"/{draw(st.sampled_from(['validate', 'mutate']))}/{family}"
    return path, encode(doc), doc


uids = st.uuids().map(str)
LOCK = {"type": "git", "git": {"repo": "https://git.example.com/blueprints.git", "ref": "v1", "commit": "0a1b2c"}}
CONVERSION_OBJECTS: list[tuple[dict[str, Any], str]] = [
    (
        conv_builders.package_revision(
            "v1alpha1",
            spec={
                "repository": "blueprints",
                "packageName": "nginx",
                "workspaceName": "v1",
                "lifecycle": "Published",
                "revision": 3,
                "tasks": [{"type": "clone", "clone": {"upstreamRef": {"upstreamRef": {"name": "base.nginx.v1"}}}}],
            },
            status={"upstreamLock": LOCK, "publishedBy": "alice", "publishTimestamp": "2026-11-29T12:00:00Z"},
        ),
        "porch.kpt.dev",
    ),
    (
        conv_builders.package_revision(
            "v1alpha2",
            spec={
                "repository": "blueprints",
                "packageName": "nginx",
                "workspaceName": "v2",
                "lifecycle": "Draft",
                "source": {"copyFrom": {"name": "blueprints.nginx.v1"}},
            },
            status={"revision": 0, "upstreamLock": LOCK},
        ),
        "porch.kpt.dev",
    ),
    (
        conv_builders.chart("v1alpha1", status={"versions": [{"version": "1.0.0", "digest": "sha256:00"}]}),
        "helm.deckhouse.io",
    ),
    (
        conv_builders.chart(
            "v1alpha2",
            status={"versions": [{"version": "1.0.0", "mediaType": "application/tar+gzip", "unavailableReason": ""}]},
        ),
        "helm.deckhouse.io",
    ),
]


@st.composite
def conversion_cases(draw: st.DrawFn) -> tuple[bytes, Any]:
    """(body, the broken review) for ``/convert``."""
    obj, group = draw(st.sampled_from(CONVERSION_OBJECTS))
    seed = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": draw(uids),
            "desiredAPIVersion": f"{group}/{draw(st.sampled_from(['v1alpha1', 'v1alpha2']))}",
            "objects": [obj] * draw(st.integers(1, 3)),
        },
    }
    doc = draw(broken(seed, (("request", "objects"),)))
    return encode(doc), doc


def request_uid(doc: Any, header: tuple[str, str]) -> str | None:
    """The uid an answer must echo: set when ``doc`` is the review ``header`` names with a request uid."""
    if not isinstance(doc, dict) or (doc.get("apiVersion"), doc.get("kind")) != header:
        return None
    request = doc.get("request")
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) and uid else None
