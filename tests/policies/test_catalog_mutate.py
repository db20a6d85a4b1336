"""The catalog's mutating path: the Component label on new ComponentVersions, nothing else."""

from __future__ import annotations

import copy

import pytest

from policies.catalog_labels import componentversion_component_label
from policies.families import TABLES
from policies.kinds import COMPONENT_VERSION, RELEASE
from policies.model import Operation
from tests.policies.test_catalog_support import (
    DISCOVERY,
    changed,
    component_version,
    context,
    mutate_all,
    release,
    request,
)

LABEL = "solar.opendefense.cloud/component"


@pytest.mark.parametrize(
    ("cv", "labels", "warnings"),
    [
        pytest.param(component_version(), {LABEL: "demo"}, [], id="no-labels"),
        pytest.param(
            component_version(labels={"team": "web"}), {"team": "web", LABEL: "demo"}, [], id="other-labels-kept"
        ),
        pytest.param(component_version(labels={LABEL: "legacy"}), {LABEL: "legacy"}, [], id="existing-label-kept"),
        pytest.param(component_version(component_name=None), None, [], id="no-component-ref"),
        pytest.param(
            component_version(component_name="c" * 64),
            None,
            [
                "label solar.opendefense.cloud/component not added: Component name "
                + "c" * 13
                + "…"
                + "c" * 13
                + " is not a valid label value"
            ],
            id="name-too-long-for-a-label",
        ),
    ],
)
def test_component_version_create_gets_the_component_label(cv, labels, warnings):
    final, said = mutate_all(request(Operation.CREATE, cv, user=DISCOVERY), context())
    assert final["metadata"].get("labels") == labels
    assert said == warnings
    assert {k: v for k, v in final.items() if k != "metadata"} == {k: v for k, v in cv.items() if k != "metadata"}


def test_component_label_patch_is_exact_and_idempotent():
    cv = component_version(labels={"team": "web"})
    first = componentversion_component_label(request(Operation.CREATE, cv), context())
    assert list(first.patch) == [
        {"op": "add", "path": "/metadata/labels/solar.opendefense.cloud~1component", "value": "demo"}
    ]
    final, _ = mutate_all(request(Operation.CREATE, cv), context())
    second = componentversion_component_label(request(Operation.CREATE, final), context())
    assert second.patch == ()
    assert second.allowed


@pytest.mark.parametrize(
    "status",
    [
        pytest.param(None, id="no-status"),
        pytest.param({}, id="empty-status"),
        pytest.param({"conditions": []}, id="no-conditions"),
    ],
)
def test_component_version_create_never_invents_availability(status):
    cv = component_version()
    if status is not None:
        cv["status"] = status
    final, _ = mutate_all(request(Operation.CREATE, copy.deepcopy(cv)), context())
    assert final.get("status") == cv.get("status")


def test_component_version_update_and_other_kinds_are_not_mutated():
    table = TABLES["catalog"]
    assert table.lookup(True, COMPONENT_VERSION, Operation.UPDATE, "") == ()
    assert table.lookup(True, RELEASE, Operation.CREATE, "") == ()
    cv = component_version()
    final, said = mutate_all(request(Operation.UPDATE, changed(cv, "spec", "tag", value="v2"), cv), context())
    assert "labels" not in final["metadata"]
    assert said == []
    rel = release()
    assert mutate_all(request(Operation.CREATE, rel), context()) == (rel, [])
