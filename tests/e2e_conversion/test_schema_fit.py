"""The CRD schemas fit the converters (docs/conversion.md, "What the CRD schemas must declare").

A lossless converter is not enough: kube-apiserver prunes each object against the schema of the
version it is in, after every conversion and on every write. So every field a converter emits
must be declared in the target version's schema, fields both versions hold must be declared
alike, and the names one version gives a meaning to must not be declared in the other (or the
apiserver would keep a stale copy there instead of handing it to the converter).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.conversion import CONVERTERS
from tests.conversion import strategies
from tests.e2e_conversion.schemas import node_at, pruned, pruned_paths, schema_of, without_descriptions

PORCH_V1, PORCH_V2 = "porch.kpt.dev/v1alpha1", "porch.kpt.dev/v1alpha2"
PR = "PackageRevision"

DIRECTIONS: list[tuple[str, str, str, st.SearchStrategy[dict[str, Any]]]] = [
    (PR, PORCH_V1, PORCH_V2, strategies.package_revision_v1alpha1()),
    (PR, PORCH_V2, PORCH_V1, strategies.package_revision_v1alpha2()),
]


def converter(kind: str, source: str, target: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    group, _, from_version = source.partition("/")
    return CONVERTERS[(group, kind, from_version, target.partition("/")[2])]


@pytest.mark.parametrize(
    ("kind", "source", "target", "objects"), DIRECTIONS, ids=[f"{k}-{s}-to-{t}" for k, s, t, _ in DIRECTIONS]
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_what_the_converter_emits_is_declared_and_survives_pruning_both_ways(
    kind: str, source: str, target: str, objects: st.SearchStrategy[dict[str, Any]], data: st.DataObject
) -> None:
    """An object as the apiserver holds it in ``source`` converts to one it would not prune in ``target``,
    and comes back, after pruning in ``target``, as it was."""
    written = pruned(data.draw(objects), schema_of(source, kind))

    converted = converter(kind, source, target)(written)
    converted["apiVersion"] = target

    assert pruned_paths(converted, schema_of(target, kind)) == []
    back = converter(kind, target, source)(pruned(converted, schema_of(target, kind)))
    back["apiVersion"] = source
    assert pruned(back, schema_of(source, kind)) == written


SAME_DATUM: list[tuple[str, str, tuple[str, ...], str, tuple[str, ...]]] = [
    # fields passed through untouched
    *[(PR, PORCH_V1, ("spec", f), PORCH_V2, ("spec", f)) for f in ("packageName", "repository", "workspaceName")],
    *[(PR, PORCH_V1, ("spec", f), PORCH_V2, ("spec", f)) for f in ("readinessGates", "packageMetadata")],
    *[
        (PR, PORCH_V1, ("status", f), PORCH_V2, ("status", f))
        for f in ("publishedBy", "upstreamLock", "selfLock", "deployment", "conditions")
    ],
    # fields moved under another name
    (PR, PORCH_V1, ("spec", "revision"), PORCH_V2, ("status", "revision")),
    (PR, PORCH_V1, ("status", "publishTimestamp"), PORCH_V2, ("status", "publishedAt")),
    # the first task's body (or the field of it) that is the source
    (PR, PORCH_V1, ("spec", "tasks", "[]", "init"), PORCH_V2, ("spec", "source", "init")),
    (PR, PORCH_V1, ("spec", "tasks", "[]", "clone", "upstreamRef"), PORCH_V2, ("spec", "source", "cloneFrom")),
    (PR, PORCH_V1, ("spec", "tasks", "[]", "edit", "sourceRef"), PORCH_V2, ("spec", "source", "copyFrom")),
]
"""(kind, v1alpha1, its path, v1alpha2, its path): the same datum, so the same declaration."""


@pytest.mark.parametrize(
    ("kind", "old", "old_path", "new", "new_path"),
    SAME_DATUM,
    ids=[f"{k}:{'.'.join(p)}" for k, _, p, _, _ in SAME_DATUM],
)
def test_fields_both_versions_hold_are_declared_alike(
    kind: str, old: str, old_path: tuple[str, ...], new: str, new_path: tuple[str, ...]
) -> None:
    declared_old = without_descriptions(node_at(schema_of(old, kind), *old_path))
    declared_new = without_descriptions(node_at(schema_of(new, kind), *new_path))
    assert declared_old == declared_new


def test_the_upgrade_task_is_the_upgrade_source_with_its_renamed_key() -> None:
    body = without_descriptions(node_at(schema_of(PORCH_V1, PR), "spec", "tasks", "[]", "upgrade"))
    source = without_descriptions(node_at(schema_of(PORCH_V2, PR), "spec", "source", "upgrade"))
    renamed = {("currentPackage" if k == "localPackageRevisionRef" else k): v for k, v in body["properties"].items()}
    assert {**body, "properties": renamed} == source


RESERVED: list[tuple[str, str, tuple[str, ...], str]] = [
    (PR, PORCH_V1, ("spec",), "source"),
    *[
        (PR, PORCH_V1, ("status",), f)
        for f in (
            "revision",
            "publishedAt",
            "observedGeneration",
            "observedPrrResourceVersion",
            "renderingPrrResourceVersion",
            "creationSource",
            "packageConditions",
        )
    ],
    (PR, PORCH_V2, ("spec",), "tasks"),
    (PR, PORCH_V2, ("spec",), "revision"),
    (PR, PORCH_V2, ("status",), "publishTimestamp"),
]
"""(kind, version, container, name): a name the other version gives a meaning to."""


@pytest.mark.parametrize(
    ("kind", "version", "container", "name"), RESERVED, ids=[f"{v}:{'.'.join((*c, n))}" for _, v, c, n in RESERVED]
)
def test_names_the_other_version_gives_a_meaning_to_are_not_declared(
    kind: str, version: str, container: tuple[str, ...], name: str
) -> None:
    node = node_at(schema_of(version, kind), *container)
    assert name not in node["properties"]
    assert not node.get("x-kubernetes-preserve-unknown-fields")


def test_pruning_is_what_the_helpers_say() -> None:
    """The helpers themselves: undeclared fields are reported and removed, preserved subtrees kept."""
    obj = {
        "apiVersion": PORCH_V2,
        "kind": PR,
        "metadata": {"annotations": {"a": "b"}},
        "x-top": 1,
        "spec": {"packageName": "p", "x-spec": {"deep": True}, "packageMetadata": {"labels": {"any": "v"}}},
        "status": {"upstreamLock": {"anything": [1]}, "packageConditions": [{"type": "T", "x-item": 0}]},
    }
    schema = schema_of(PORCH_V2, PR)

    assert pruned_paths(obj, schema) == ["x-top", "spec.x-spec", "status.packageConditions[0].x-item"]
    assert pruned(obj, schema) == {
        "apiVersion": PORCH_V2,
        "kind": PR,
        "metadata": {"annotations": {"a": "b"}},
        "spec": {"packageName": "p", "packageMetadata": {"labels": {"any": "v"}}},
        "status": {"upstreamLock": {"anything": [1]}, "packageConditions": [{"type": "T"}]},
    }
