"""The sidecar's write primitives against the double: only what changed, preconditions, bounded retries."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from policies import kinds
from tests.kube.conftest import NS, Recorder
from tests.support.apiserver import ApiServerDouble
from webhook.kube.client import Conflict, Kube, NotFound
from webhook.kube.writes import DeleteResult, FinalizerResult, Writer, merge_patch

NOW = datetime.datetime(2026, 11, 29, 12, 30, 5, 123456, tzinfo=datetime.UTC)
PROTECT = "solar.opendefense.cloud/componentversion-ref"


def cv(name: str, finalizers: tuple[str, ...] = ()) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if finalizers:
        meta["finalizers"] = list(finalizers)
    return {"apiVersion": "solar.opendefense.cloud/v1alpha1", "kind": "ComponentVersion", "metadata": meta, "spec": {}}


def condition(status: str, reason: str) -> dict[str, Any]:
    return {
        "type": "Available",
        "status": status,
        "reason": reason,
        "message": f"{reason} for tag v1",
        "lastTransitionTime": "2026-11-29T12:00:00Z",
    }


@pytest.fixture
def writer(kube: Kube) -> Writer:
    return Writer(kube, instance="warden-0", clock=lambda: NOW)


@pytest.fixture
def red_cv(kube: Kube, admin: Kube) -> dict[str, Any]:
    """A ComponentVersion with a status (no status subresource: status is part of the object)."""
    admin.create(kinds.COMPONENT_VERSION, cv("demo-v1"))
    status = {"conditions": [condition("False", "ArtifactMissing")], "availability": {"consecutiveMisses": 3}}
    return admin.patch(kinds.COMPONENT_VERSION, "demo-v1", NS, {"status": status})


# ---- merge patch -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "desired", "patch"),
    [
        ({"a": 1}, {"a": 1}, {}),
        ({"a": 1, "b": 2}, {"a": 1}, {"b": None}),
        ({"a": {"x": 1, "y": 2}}, {"a": {"x": 1, "y": 3}}, {"a": {"y": 3}}),
        ({"a": [1, 2]}, {"a": [1]}, {"a": [1]}),
        ({"a": 1}, {"a": {"x": 1}}, {"a": {"x": 1}}),
        ({}, {"a": {"x": 1}}, {"a": {"x": 1}}),
    ],
)
def test_merge_patch(current: dict, desired: dict, patch: dict) -> None:
    assert merge_patch(current, desired) == patch


# ---- status ------------------------------------------------------------------------------------


def test_patch_status_sends_only_what_changed(writer: Writer, kube: Kube, red_cv: dict, recorder: Recorder) -> None:
    desired = {**red_cv["status"], "availability": {"consecutiveMisses": 4}}
    written = writer.patch_status(kinds.COMPONENT_VERSION, red_cv, desired)
    (call,) = recorder.all()
    assert (call.verb, call.name, call.sub) == ("patch", "demo-v1", "")  # ComponentVersion: no status subresource
    assert json.loads(call.body) == {
        "metadata": {"resourceVersion": red_cv["metadata"]["resourceVersion"]},
        "status": {"availability": {"consecutiveMisses": 4}},
    }
    assert written["status"] == desired
    assert kube.get(kinds.COMPONENT_VERSION, "demo-v1", NS)["status"] == desired


def test_patch_status_uses_the_status_subresource_where_there_is_one(
    writer: Writer, kube: Kube, admin: Kube, recorder: Recorder
) -> None:
    body = {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "Release",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"componentVersionRef": {"name": "demo-v1"}},
    }
    release = admin.create(kinds.RELEASE, body)
    desired = {"conditions": [condition("True", "Rendered")]}
    assert writer.patch_status(kinds.RELEASE, release, desired) is not None
    (call,) = recorder.of("patch")
    assert (call.name, call.sub) == ("web", "status")
    assert json.loads(call.body) == {
        "metadata": {"resourceVersion": release["metadata"]["resourceVersion"]},
        "status": desired,
    }
    stored = kube.get(kinds.RELEASE, "web", NS)
    assert stored["status"] == desired
    assert stored["metadata"]["generation"] == release["metadata"]["generation"]


def test_patch_status_removes_fields_the_desired_status_drops(writer: Writer, kube: Kube, red_cv: dict) -> None:
    desired = {"conditions": [condition("True", "ArtifactResolved")]}
    assert writer.patch_status(kinds.COMPONENT_VERSION, red_cv, desired) is not None
    assert kube.get(kinds.COMPONENT_VERSION, "demo-v1", NS)["status"] == desired


def test_patch_status_sends_nothing_when_nothing_changed(writer: Writer, red_cv: dict, recorder: Recorder) -> None:
    assert writer.patch_status(kinds.COMPONENT_VERSION, red_cv, dict(red_cv["status"])) is None
    assert recorder.all() == []


def test_patch_status_from_a_stale_read_is_refused_not_written_over(
    writer: Writer, kube: Kube, admin: Kube, red_cv: dict
) -> None:
    admin.patch(kinds.COMPONENT_VERSION, "demo-v1", NS, {"metadata": {"labels": {"moved": "on"}}})
    with pytest.raises(Conflict):
        writer.patch_status(kinds.COMPONENT_VERSION, red_cv, {"conditions": []})
    assert kube.get(kinds.COMPONENT_VERSION, "demo-v1", NS)["status"] == red_cv["status"]


# ---- delete with preconditions -----------------------------------------------------------------


def test_delete_if_unchanged_deletes_with_uid_and_version_preconditions(
    writer: Writer, kube: Kube, red_cv: dict, recorder: Recorder
) -> None:
    assert writer.delete_if_unchanged(kinds.COMPONENT_VERSION, red_cv) is DeleteResult.DELETED
    (call,) = recorder.of("delete")
    assert call.body["preconditions"] == {
        "uid": red_cv["metadata"]["uid"],
        "resourceVersion": red_cv["metadata"]["resourceVersion"],
    }
    with pytest.raises(NotFound):
        kube.get(kinds.COMPONENT_VERSION, "demo-v1", NS)


def test_delete_whose_precondition_lost_the_race_is_skipped_and_the_object_survives(
    writer: Writer, kube: Kube, admin: Kube, red_cv: dict
) -> None:
    evaluated = kube.get(kinds.COMPONENT_VERSION, "demo-v1", NS)  # 1. the janitor reads and decides
    admin.patch(kinds.COMPONENT_VERSION, "demo-v1", NS, {"metadata": {"labels": {"catalog-warden.io/retain": "true"}}})
    assert writer.delete_if_unchanged(kinds.COMPONENT_VERSION, evaluated) is DeleteResult.SKIPPED_CONFLICT  # 3.
    survivor = kube.get(kinds.COMPONENT_VERSION, "demo-v1", NS)
    assert survivor["metadata"]["labels"] == {"catalog-warden.io/retain": "true"}
    assert "deletionTimestamp" not in survivor["metadata"]


def test_delete_of_a_recreated_object_is_skipped_by_its_uid(
    writer: Writer, kube: Kube, admin: Kube, red_cv: dict
) -> None:
    admin.delete(kinds.COMPONENT_VERSION, "demo-v1", NS)
    recreated = admin.create(kinds.COMPONENT_VERSION, cv("demo-v1"))
    assert writer.delete_if_unchanged(kinds.COMPONENT_VERSION, red_cv) is DeleteResult.SKIPPED_CONFLICT
    assert kube.get(kinds.COMPONENT_VERSION, "demo-v1", NS)["metadata"]["uid"] == recreated["metadata"]["uid"]


def test_delete_of_a_gone_object_is_gone(writer: Writer, admin: Kube, red_cv: dict) -> None:
    admin.delete(kinds.COMPONENT_VERSION, "demo-v1", NS)
    assert writer.delete_if_unchanged(kinds.COMPONENT_VERSION, red_cv) is DeleteResult.GONE


# ---- finalizers --------------------------------------------------------------------------------


def test_remove_finalizer_keeps_the_others(writer: Writer, kube: Kube, admin: Kube) -> None:
    obj = admin.create(kinds.COMPONENT_VERSION, cv("f", (PROTECT, "other.io/keep")))
    assert writer.remove_finalizer(kinds.COMPONENT_VERSION, obj, PROTECT) is FinalizerResult.REMOVED
    assert kube.get(kinds.COMPONENT_VERSION, "f", NS)["metadata"]["finalizers"] == ["other.io/keep"]


def test_remove_finalizer_from_a_stale_read_retries_from_a_fresh_one(
    writer: Writer, kube: Kube, admin: Kube, recorder: Recorder
) -> None:
    stale = admin.create(kinds.COMPONENT_VERSION, cv("f", (PROTECT,)))
    admin.patch(kinds.COMPONENT_VERSION, "f", NS, {"metadata": {"finalizers": [PROTECT, "added.io/later"]}})
    before = len(recorder.all())
    assert writer.remove_finalizer(kinds.COMPONENT_VERSION, stale, PROTECT) is FinalizerResult.REMOVED
    assert [c.verb for c in recorder.all()[before:]] == ["patch", "get", "patch"]
    assert kube.get(kinds.COMPONENT_VERSION, "f", NS)["metadata"]["finalizers"] == ["added.io/later"]


def test_a_lost_race_that_forbids_the_removal_keeps_the_finalizer(
    writer: Writer, kube: Kube, admin: Kube, recorder: Recorder
) -> None:
    """The change that won the race is re-judged: here it retained the object, so nothing is sent."""
    stale = admin.create(kinds.COMPONENT_VERSION, cv("f", (PROTECT,)))
    admin.patch(kinds.COMPONENT_VERSION, "f", NS, {"metadata": {"labels": {"catalog-warden.io/retain": "true"}}})
    before = len(recorder.all())

    def still_allowed(fresh: dict) -> bool:
        return (fresh["metadata"].get("labels") or {}).get("catalog-warden.io/retain") != "true"

    assert writer.remove_finalizer(kinds.COMPONENT_VERSION, stale, PROTECT, still_allowed) is FinalizerResult.KEPT
    assert [c.verb for c in recorder.all()[before:]] == ["patch", "get"]
    assert kube.get(kinds.COMPONENT_VERSION, "f", NS)["metadata"]["finalizers"] == [PROTECT]


def test_removing_the_last_finalizer_of_a_terminating_object_lets_it_go(
    writer: Writer, kube: Kube, admin: Kube
) -> None:
    admin.create(kinds.COMPONENT_VERSION, cv("f", (PROTECT,)))
    terminating = admin.delete(kinds.COMPONENT_VERSION, "f", NS)
    assert terminating["metadata"]["deletionTimestamp"]
    assert writer.remove_finalizer(kinds.COMPONENT_VERSION, terminating, PROTECT) is FinalizerResult.REMOVED
    with pytest.raises(NotFound):
        kube.get(kinds.COMPONENT_VERSION, "f", NS)
    assert writer.remove_finalizer(kinds.COMPONENT_VERSION, terminating, PROTECT) is FinalizerResult.GONE


def test_remove_finalizer_absent_sends_nothing(writer: Writer, admin: Kube, recorder: Recorder) -> None:
    obj = admin.create(kinds.COMPONENT_VERSION, cv("f", ("other.io/keep",)))
    before = len(recorder.all())
    assert writer.remove_finalizer(kinds.COMPONENT_VERSION, obj, PROTECT) is FinalizerResult.ABSENT
    assert recorder.all()[before:] == []


def test_remove_finalizer_gives_up_after_bounded_attempts(
    apiserver: ApiServerDouble, writer: Writer, admin: Kube, recorder: Recorder
) -> None:
    obj = admin.create(kinds.COMPONENT_VERSION, cv("f", (PROTECT,)))
    original = apiserver.api.patch
    bumps = {"n": 0}

    def contended_patch(target: Any, body: bytes, content_type: str, user: dict, params: dict) -> Any:
        """Someone else writes the object just before each of the warden's patches lands."""
        bumps["n"] += 1
        label = {"metadata": {"labels": {"bump": str(bumps["n"])}}}
        original(target, json.dumps(label).encode(), "application/merge-patch+json", user, {})
        return original(target, body, content_type, user, params)

    apiserver.api.patch = contended_patch  # type: ignore[method-assign]
    with pytest.raises(Conflict):
        writer.remove_finalizer(kinds.COMPONENT_VERSION, obj, PROTECT)
    assert bumps["n"] == writer.finalizer_attempts == 5
    assert admin.get(kinds.COMPONENT_VERSION, "f", NS)["metadata"]["finalizers"] == [PROTECT]


# ---- events ------------------------------------------------------------------------------------


def test_emit_event_about_a_namespaced_object(writer: Writer, kube: Kube, red_cv: dict) -> None:
    created = writer.emit_event(red_cv, "Deleted", "retention: Available=False for 30d", type="Normal")
    event = kube.get(kinds.EVENT, created["metadata"]["name"], NS)
    assert event["metadata"]["name"] == f"demo-v1.{int(NOW.timestamp() * 1e9):x}"
    assert event["involvedObject"] == {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "ComponentVersion",
        "name": "demo-v1",
        "namespace": NS,
        "uid": red_cv["metadata"]["uid"],
        "resourceVersion": red_cv["metadata"]["resourceVersion"],
    }
    assert (event["reason"], event["message"], event["type"]) == (
        "Deleted",
        "retention: Available=False for 30d",
        "Normal",
    )
    assert event["reportingComponent"] == event["source"]["component"] == "catalog-warden"
    assert event["reportingInstance"] == "warden-0"
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-11-29T12:30:05Z"
    assert event["count"] == 1


def test_emit_event_about_a_cluster_scoped_object_goes_to_default_and_cuts_long_messages(
    writer: Writer, kube: Kube
) -> None:
    chart = {"apiVersion": "helm.deckhouse.io/v1alpha1", "kind": "HelmClusterAddonChart", "metadata": {"name": "c"}}
    created = writer.emit_event(chart, "Pruned", "é" * 600, type="Warning")
    event = kube.get(kinds.EVENT, created["metadata"]["name"], "default")
    assert event["message"] == "é" * 512
    assert event["type"] == "Warning"
    assert "namespace" not in event["involvedObject"]
