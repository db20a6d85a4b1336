"""Malformed catalog objects get a 422 naming the field, never an exception (which the shell turns into a 500).

The CRDs reject these shapes, but where another server serves the group (an aggregated apiserver,
DESIGN.md section 3) or a CRD is older than the webhook, the rules are the only check left.
"""

from __future__ import annotations

from typing import Any

import pytest

from policies.families import TABLES
from policies.kinds import COMPONENT_VERSION
from policies.model import Operation
from tests.policies.test_catalog_support import (
    DISCOVERY,
    changed,
    component_version,
    context,
    denied,
    mutate_all,
    registry,
    registry_binding,
    release,
    release_binding,
    request,
    target,
    validate,
)


def not_object(field: str, got: str) -> str:
    return f"{field} must be an object such as {{name: demo}}, not {got}"


def not_string(field: str, got: str) -> str:
    return f"{field} must be a string, not {got}"


CASES: list[Any] = [
    pytest.param(
        changed(release(), "spec", "componentVersionRef", value="demo-v1"),
        "catalog.release-binding",
        not_object("spec.componentVersionRef", "a string"),
        id="release-ref-string",
    ),
    pytest.param(
        changed(release(), "spec", "componentVersionRef", value=["demo-v1"]),
        "catalog.release-binding",
        not_object("spec.componentVersionRef", "an array"),
        id="release-ref-list",
    ),
    pytest.param(
        changed(release(), "spec", "componentVersionRef", "name", value=7),
        "catalog.release-binding",
        not_string("spec.componentVersionRef.name", "a number"),
        id="release-ref-name-number",
    ),
    pytest.param(
        changed(release(), "spec", "componentVersionRef", "namespace", value={"a": "b"}),
        "catalog.release-binding",
        not_string("spec.componentVersionRef.namespace", "an object"),
        id="release-ref-namespace-object",
    ),
    pytest.param(
        changed(release(), "spec", "componentVersionRef", "name", value=""),
        "catalog.release-binding",
        "spec.componentVersionRef.name is required",
        id="release-ref-name-empty",
    ),
    pytest.param(
        changed(release(), "spec", value="demo-v1"),
        "catalog.release-binding",
        "spec must be an object, not a string",
        id="release-spec-string",
    ),
    pytest.param(
        changed(target(), "spec", "renderRegistryRef", value="zot"),
        "catalog.target-render-registry",
        not_object("spec.renderRegistryRef", "a string"),
        id="target-ref-string",
    ),
    pytest.param(
        changed(registry_binding("b"), "spec", "targetRef", value=True),
        "catalog.registrybinding-ambiguous",
        not_object("spec.targetRef", "a boolean"),
        id="registrybinding-target-bool",
    ),
    pytest.param(
        changed(registry_binding("b"), "spec", "registryRef", "name", value=["zot"]),
        "catalog.registrybinding-ambiguous",
        not_string("spec.registryRef.name", "an array"),
        id="registrybinding-registry-name-list",
    ),
    pytest.param(
        changed(release_binding("rb"), "spec", "targetRef", value="edge-1"),
        "catalog.releasebinding-reference-grant",
        not_object("spec.targetRef", "a string"),
        id="releasebinding-target-string",
    ),
    pytest.param(
        changed(registry(), "spec", value=["zot.example.com"]),
        "catalog.registry-fields",
        "spec must be an object, not an array",
        id="registry-spec-list",
    ),
]


@pytest.mark.parametrize(("obj", "rule", "message"), CASES)
@pytest.mark.parametrize("op", [Operation.CREATE, Operation.UPDATE])
def test_malformed_references_are_invalid_not_internal_errors(obj, rule, message, op):
    kind = obj["kind"]
    good = {
        "Release": release(),
        "Target": target(),
        "RegistryBinding": registry_binding("b"),
        "ReleaseBinding": release_binding("rb"),
        "Registry": registry(),
    }[kind]
    good = changed(good, "metadata", "name", value=obj["metadata"]["name"])
    old = good if op is Operation.UPDATE else None
    assert validate(request(op, obj, old), context(registry())) == denied(rule, message, 422)


@pytest.mark.parametrize(
    ("value", "got"),
    [("demo", "a string"), (["demo"], "an array"), (3, "a number")],
)
def test_component_version_with_a_malformed_component_ref_is_invalid_on_the_mutating_path(value, got):
    cv = changed(component_version(), "spec", "componentRef", value=value)
    [rule] = TABLES["catalog"].lookup(True, COMPONENT_VERSION, Operation.CREATE, "")
    decision = rule.fn(request(Operation.CREATE, cv, user=DISCOVERY), context())
    assert (decision.allowed, decision.code, decision.message) == (False, 422, not_object("spec.componentRef", got))


def test_component_version_with_a_number_as_component_name_is_invalid():
    cv = changed(component_version(), "spec", "componentRef", "name", value=42)
    [rule] = TABLES["catalog"].lookup(True, COMPONENT_VERSION, Operation.CREATE, "")
    decision = rule.fn(request(Operation.CREATE, cv), context())
    assert (decision.allowed, decision.code, decision.message) == (
        False,
        422,
        not_string("spec.componentRef.name", "a number"),
    )


def test_well_formed_component_version_still_mutates():
    final, _ = mutate_all(request(Operation.CREATE, component_version()), context())
    assert final["metadata"]["labels"] == {"solar.opendefense.cloud/component": "demo"}


def test_release_without_spec_is_invalid():
    rel = changed(release(), "spec", value=None)
    assert validate(request(Operation.CREATE, rel), context()) == denied(
        "catalog.release-binding", "spec.componentVersionRef.name is required", 422
    )
