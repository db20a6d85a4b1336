"""Malformed PackageRevisions get a 422 naming the field, never an internal error.

The mutating webhook runs before the apiserver checks the CRD schema, so ``spec: "x"`` does reach
``/mutate/packages``; the offline ``review`` command reads any file. Every case goes through the
real :class:`webhook.admission.Admission` shell, which turns a rule's exception into a 500: the
tests therefore fail on a crash, not only on a wrong message.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policies.config import DEFAULT_CONFIG
from policies.model import AdmissionRequest, Operation
from tests.policies.test_packages_support import NOW, repository, request, revision, view
from webhook.admission import Admission, Verdict


def admission() -> Admission:
    state = view(repository())
    return Admission(lambda: state, DEFAULT_CONFIG, clock=lambda: NOW)


def with_value(obj: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """A deep copy of ``obj`` with ``path`` set to ``value`` (null included)."""
    out = copy.deepcopy(obj)
    cur: Any = out
    for key in path[:-1]:
        cur = cur[key]
    cur[path[-1]] = value
    return out


def owned(version: str = "v1alpha2") -> dict[str, Any]:
    obj = revision("Draft", version=version)
    obj["metadata"].update(labels={"app": "web"}, annotations={"note": "x"}, finalizers=["example.com/keep"])
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "seed", "uid": "cm"}]
    return obj


# (path, bad value, message) for both versions; the path is written into a well-formed revision.
MALFORMED: list[tuple[tuple[str | int, ...], Any, str]] = [
    (("spec",), "nginx", "spec must be an object, not a string"),
    (("spec",), ["nginx"], "spec must be an object, not an array"),
    (("spec", "lifecycle"), 3, "spec.lifecycle must be a string, not a number"),
    (("spec", "lifecycle"), {"name": "Draft"}, "spec.lifecycle must be a string, not an object"),
    (("spec", "repository"), ["blueprints"], "spec.repository must be a string, not an array"),
    (("spec", "packageName"), {"name": "nginx"}, "spec.packageName must be a string, not an object"),
    (("spec", "workspaceName"), 1, "spec.workspaceName must be a string, not a number"),
    (("metadata", "labels"), "app=web", "metadata.labels must be an object, not a string"),
    (("metadata", "labels"), ["app"], "metadata.labels must be an object, not an array"),
    (("metadata", "labels", "app"), 1, "metadata.labels.app must be a string, not a number"),
    (("metadata", "annotations"), "note", "metadata.annotations must be an object, not a string"),
    (("metadata", "annotations", "note"), {"a": 1}, "metadata.annotations.note must be a string, not an object"),
    (("metadata", "finalizers"), "example.com/keep", "metadata.finalizers must be an array, not a string"),
    (
        ("metadata", "ownerReferences"),
        {"kind": "ConfigMap"},
        "metadata.ownerReferences must be an array, not an object",
    ),
    (("metadata", "ownerReferences", 0), "seed", "metadata.ownerReferences[0] must be an object, not a string"),
]
V1ALPHA2_ONLY = [
    (("spec", "source"), "init", "spec.source must be an object, not a string"),
]
V1ALPHA1_ONLY = [
    (("spec", "tasks"), {"type": "init"}, "spec.tasks must be an array, not an object"),
    (("spec", "tasks"), 5, "spec.tasks must be an array, not a number"),
    (("spec", "tasks", 0), "init", "spec.tasks[0] must be an object, not a string"),
    (("spec", "revision"), "2", "spec.revision must be a number, not a string"),
]
CASES = [("v1alpha2", *c) for c in MALFORMED + V1ALPHA2_ONLY] + [("v1alpha1", *c) for c in MALFORMED + V1ALPHA1_ONLY]
IDS = [f"{v}:{'.'.join(map(str, p))}={val!r}" for v, p, val, _ in CASES]


def expect_invalid(verdict: Verdict, rule: str, message: str) -> None:
    d = verdict.decision
    assert (d.allowed, d.code, d.reason) == (False, 422, "Invalid"), d.message
    assert d.message == f"PackageRevision team-a/blueprints.nginx.v1 denied by {rule}: {message}"
    assert verdict.patch is None


@pytest.mark.parametrize(("version", "path", "value", "message"), CASES, ids=IDS)
@pytest.mark.parametrize("mutating", [False, True], ids=["validate", "mutate"])
def test_malformed_create(version: str, path: tuple[str | int, ...], value: Any, message: str, mutating: bool) -> None:
    bad = with_value(owned(version), path, value)
    verdict = admission().evaluate("packages", mutating, request(Operation.CREATE, bad, version=version))
    expect_invalid(verdict, "packages.revision-shape", message)


@pytest.mark.parametrize(("version", "path", "value", "message"), CASES, ids=IDS)
@pytest.mark.parametrize("mutating", [False, True], ids=["validate", "mutate"])
@pytest.mark.parametrize("lifecycle", ["Proposed", "Published"])
def test_malformed_update(
    version: str, path: tuple[str | int, ...], value: Any, message: str, mutating: bool, lifecycle: str
) -> None:
    before = with_value(owned(version), ("spec", "lifecycle"), lifecycle)
    bad = with_value(before, path, value)
    verdict = admission().evaluate("packages", mutating, request(Operation.UPDATE, bad, before, version=version))
    expect_invalid(verdict, "packages.revision-shape", message)


@pytest.mark.parametrize(("version", "path", "value", "message"), CASES, ids=IDS)
def test_malformed_stored_object_on_delete(version: str, path: tuple[str | int, ...], value: Any, message: str) -> None:
    """Only reachable offline (``review``): the apiserver stores schema-valid objects."""
    bad = with_value(with_value(owned(version), ("spec", "lifecycle"), "Published"), path, value)
    verdict = admission().evaluate("packages", False, request(Operation.DELETE, old=bad, version=version))
    expect_invalid(verdict, "packages.revision-shape", f"the stored object: {message}")


def test_null_containers_are_absent_fields() -> None:
    """JSON null where an object or list is expected reads as absent (the apiserver prunes it)."""
    obj = owned()
    for path in (("metadata", "labels"), ("metadata", "annotations"), ("metadata", "finalizers")):
        obj = with_value(obj, path, None)
    obj = with_value(obj, ("metadata", "ownerReferences"), None)
    obj = with_value(obj, ("spec", "lifecycle"), None)
    req: AdmissionRequest = request(Operation.CREATE, obj)
    verdict = admission().evaluate("packages", True, req)
    assert verdict.decision.allowed, verdict.decision.message
    assert verdict.patch is not None and len(verdict.patch) > 0
    assert admission().evaluate("packages", False, req).decision.allowed


def test_a_null_spec_is_defaulted_like_an_absent_one() -> None:
    obj = with_value(owned(), ("spec",), None)
    verdict = admission().evaluate("packages", True, request(Operation.CREATE, obj))
    assert verdict.decision.allowed, verdict.decision.message
    assert {"op": "replace", "path": "/spec", "value": {"lifecycle": "Draft"}} in (verdict.patch or [])
