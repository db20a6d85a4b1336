"""The CRD schemas of our kinds, and what apiserver-side pruning would remove.

kube-apiserver prunes every custom object against the schema of the version it is in: the body of
a write, the object read from storage, and each object a conversion webhook returns
(apiextensions-apiserver ``schemaCoercingConverter`` -> ``structuralpruning.Prune``). The
apiserver double does not prune, so these helpers say what a real apiserver would have removed:
a field that one version's schema does not declare is lost the moment an object passes through
that version, however lossless the converter is. ``metadata`` is never pruned (annotations carry
the conversion data for exactly that reason).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.support.apiserver.fixtures import PROJECT_MANIFESTS

Schema = Mapping[str, Any]

CRD_FILES: dict[tuple[str, str], Path] = {
    ("porch.kpt.dev", "PackageRevision"): PROJECT_MANIFESTS / "crds" / "packages" / "packagerevisions.yaml",
    ("helm.deckhouse.io", "HelmClusterAddonChart"): PROJECT_MANIFESTS
    / "crds"
    / "charts"
    / "helmclusteraddoncharts.yaml",
}
"""(group, kind) -> the CRD manifest serving it (PackageRevision in two versions, HelmClusterAddonChart in one)."""

ROOT_KEPT = frozenset({"apiVersion", "kind", "metadata"})
"""Kept at the root whatever the schema says (the apiserver never prunes type and object meta)."""


@cache
def _crd(group: str, kind: str) -> Mapping[str, Any]:
    return yaml.safe_load(CRD_FILES[(group, kind)].read_text())


def schema_of(api_version: str, kind: str) -> Schema:
    """The ``openAPIV3Schema`` of ``kind`` at ``api_version`` (``group/version``)."""
    group, _, version = api_version.partition("/")
    for served in _crd(group, kind)["spec"]["versions"]:
        if served["name"] == version:
            return served["schema"]["openAPIV3Schema"]
    raise KeyError(f"{kind}.{group} does not serve {version}")


def node_at(schema: Schema, *path: str) -> Schema:
    """The schema node at a path of property names; ``[]`` steps into array items."""
    node = schema
    for step in path:
        node = node["items"] if step == "[]" else node["properties"][step]
    return node


def pruned_paths(obj: Any, schema: Schema) -> list[str]:
    """Every path in ``obj`` that structural pruning against ``schema`` would drop, in document order.

    As ``structuralpruning.Prune``: an object node keeps its declared properties, everything under
    ``additionalProperties``, and everything when it preserves unknown fields; arrays recurse into
    ``items``; a value whose JSON type differs from the schema's is left to validation, not pruned.
    """
    return list(_pruned(obj, schema, "", root=True))


def _pruned(value: Any, schema: Schema, path: str, root: bool = False) -> Iterator[str]:
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                yield from _pruned(item, items, f"{path}[{index}]")
        return
    if not isinstance(value, Mapping):
        return
    properties: Mapping[str, Any] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    for key, child in value.items():
        where = f"{path}.{key}" if path else key
        if root and key in ROOT_KEPT:
            continue
        if key in properties:
            yield from _pruned(child, properties[key], where)
        elif isinstance(additional, Mapping):
            yield from _pruned(child, additional, where)
        elif not preserve and additional is not True:
            yield where


def pruned(obj: Any, schema: Schema) -> Any:
    """``obj`` as the apiserver would keep it: a copy without :func:`pruned_paths`."""
    return _prune(obj, schema, root=True)


def _prune(value: Any, schema: Schema, root: bool = False) -> Any:
    if isinstance(value, list):
        items = schema.get("items")
        return [_prune(v, items) for v in value] if isinstance(items, Mapping) else list(value)
    if not isinstance(value, Mapping):
        return value
    properties: Mapping[str, Any] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    kept: dict[str, Any] = {}
    for key, child in value.items():
        if root and key in ROOT_KEPT:
            kept[key] = child
        elif key in properties:
            kept[key] = _prune(child, properties[key])
        elif isinstance(additional, Mapping):
            kept[key] = _prune(child, additional)
        elif preserve or additional is True:
            kept[key] = child
    return kept


def without_descriptions(node: Any) -> Any:
    """A schema node without its ``description`` keywords, to compare two versions' declarations.

    Property *names* are kept (``source.init`` has a property called ``description``).
    """
    if not isinstance(node, Mapping):
        return node
    result: dict[str, Any] = {}
    for key, value in node.items():
        if key == "description":
            continue
        if key in ("properties", "patternProperties"):
            result[key] = {name: without_descriptions(child) for name, child in value.items()}
        elif key in ("items", "additionalProperties"):
            result[key] = without_descriptions(value)
        else:
            result[key] = value
    return result
