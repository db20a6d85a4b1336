"""Every rule of every family answers malformed objects; none raises (issue 11).

The shell turns a raising rule into a 500 denial, and the packages mutating rules used to rely on
``packages.revision-shape`` running before them: called on their own (the sidecar, a test, a
reordered table) they raised on ``metadata: "x"``, and ``packages.revision-defaults`` deep-copied
the object, a RecursionError for one nested about 330 levels. Each rule now checks the shape of
what it writes into and answers 422 naming the field.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.config import PolicyConfig
from policies.families import INDEXES, TABLES
from policies.model import AdmissionRequest, GroupKind, Operation, UserInfo
from policies.rules import Context
from policies.view import MemoryView
from tests.policies import test_catalog_support as catalog
from tests.policies import test_packages_support as packages
from tests.server import fuzz
from tests.support.objects import changed

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def kind_of(obj: dict[str, Any]) -> GroupKind:
    return GroupKind(obj["apiVersion"].rpartition("/")[0], obj["kind"])


def rule_fn(family: str, name: str) -> Any:
    return next(r.fn for r in TABLES[family].family.rules if r.name == name)


def published(obj: dict[str, Any]) -> dict[str, Any]:
    return changed(obj, "spec", "lifecycle", value="Published")


# (rule, operation, object, old object, the 422 message)
MALFORMED = [
    ("packages.revision-lifecycle-default", Operation.CREATE,
     changed(packages.revision(None), "spec", value=["Draft"]), None, "spec must be an object, not an array"),
    ("packages.revision-lifecycle-default", Operation.CREATE,
     changed(packages.revision(None), "metadata", value="x"), None, "metadata must be an object, not a string"),
    ("packages.revision-defaults", Operation.CREATE,
     changed(packages.revision("Draft"), "metadata", value=["x"]), None, "metadata must be an object, not an array"),
    ("packages.revision-defaults", Operation.CREATE,
     changed(packages.revision("Draft"), "metadata", "labels", value=["a"]), None,
     "metadata.labels must be an object, not an array"),
    ("packages.revision-defaults", Operation.CREATE,
     changed(packages.revision("Draft"), "metadata", "finalizers", value="x"), None,
     "metadata.finalizers must be an array, not a string"),
    ("packages.revision-publish-stamp", Operation.UPDATE,
     changed(published(packages.revision("Proposed")), "metadata", "annotations", value=5),
     packages.revision("Proposed"), "metadata.annotations must be an object, not a number"),
    ("packages.revision-publish-stamp", Operation.UPDATE,
     changed(published(packages.revision("Proposed")), "metadata", value=1.5),
     packages.revision("Proposed"), "metadata must be an object, not a number"),
    ("catalog.componentversion-component-label", Operation.CREATE,
     changed(catalog.component_version(), "metadata", value=["x"]), None, "metadata must be an object, not an array"),
    ("catalog.componentversion-component-label", Operation.CREATE,
     changed(catalog.component_version(), "metadata", "labels", value="x"), None,
     "metadata.labels must be an object, not a string"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "op", "obj", "old", "message"), MALFORMED, ids=[f"{m[0]}:{m[4]}" for m in MALFORMED])
def test_a_mutating_rule_on_its_own_answers_422_naming_the_field(
    name: str, op: Operation, obj: dict[str, Any], old: dict[str, Any] | None, message: str
) -> None:
    family = name.partition(".")[0]
    req = AdmissionRequest("u", op, kind_of(obj), "v1alpha2", "n", "team-a", "", obj, old, UserInfo("alice"))
    decision = rule_fn(family, name)(req, packages.context(packages.repository()))
    assert (decision.allowed, decision.code, decision.reason, decision.message) == (False, 422, "Invalid", message)
    assert decision.patch == ()


def test_revision_defaults_on_an_object_nested_1000_levels() -> None:
    """Was a RecursionError (``copy.deepcopy``): the rule now copies only what it writes."""
    obj = packages.revision("Draft")
    obj["status"] = {"upstreamLock": fuzz.Deep(1000).value()}
    before = copy.deepcopy(obj["metadata"])
    decision = packages.rule("packages.revision-defaults")(
        packages.request(Operation.CREATE, obj), packages.context(packages.repository())
    )
    assert decision.allowed
    assert decision.desired is not None and decision.desired["status"] is obj["status"], "shared, not copied"
    assert decision.desired["metadata"]["finalizers"] == ["porch.kpt.dev/packagerevisions"]
    assert obj["metadata"] == before, "the request object is never modified"


# --- the rule table, fuzzed directly -------------------------------------------------------------


def _view() -> MemoryView:
    view = MemoryView(indexes=INDEXES)
    for obj, _ in fuzz.ADMISSION_OBJECTS:
        view.put(kind_of(obj), obj)
    return view


VIEW = _view()
SEEDS = [obj for obj, _ in fuzz.ADMISSION_OBJECTS]


@st.composite
def malformed(draw: st.DrawFn) -> tuple[GroupKind, Any]:
    seed = draw(st.sampled_from(SEEDS))
    obj: Any = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(fuzz.paths(obj))[1:] or [()]))
        value = draw(st.one_of(fuzz.json_values, st.sampled_from([120, 1000]).map(lambda n: fuzz.Deep(n).value())))
        obj = fuzz.put(obj, path, value)
    return kind_of(seed), obj


@settings(max_examples=500, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(malformed(), malformed(), st.sampled_from(list(Operation)), st.sampled_from(["v1alpha1", "v1alpha2"]))
def test_no_rule_raises_on_a_malformed_object(
    new: tuple[GroupKind, Any], old: tuple[GroupKind, Any], op: Operation, version: str
) -> None:
    kind, obj = new
    ctx = Context(view=VIEW, now=NOW, config=PolicyConfig())
    req = AdmissionRequest(
        "u", op, kind, version, "n", "team-a", "",
        None if op is Operation.DELETE else obj, None if op is Operation.CREATE else old[1], UserInfo("alice"),
    )  # fmt: skip
    for table in TABLES.values():
        for mutating in (False, True):
            for rule in table.lookup(mutating, kind, op, ""):
                decision = rule.fn(req, ctx)
                assert decision.allowed or decision.code < 500, (rule.name, decision.message)
                decision.patch  # noqa: B018 - computing the patch must not raise either


def test_revision_immutable_reads_tasks_of_the_wrong_type_as_absent() -> None:
    """Was a KeyError (``tasks[0]`` of an object), found by the fuzz above; the shape rule refuses it first."""
    old = packages.revision("Draft", version="v1alpha1")
    new = changed(old, "spec", "tasks", value={"a": {}})
    req = packages.request(Operation.UPDATE, new, old, version="v1alpha1")
    decision = packages.rule("packages.revision-immutable")(req, packages.context())
    assert (decision.code, decision.message) == (
        422,
        "immutable fields changed: spec.tasks[0]; create a new PackageRevision instead",
    )
