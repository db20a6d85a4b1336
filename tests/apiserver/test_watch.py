"""Watch through `kubernetes.watch.Watch`: history from a resourceVersion, live events, bookmarks, 410."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client.rest import ApiException

from tests.apiserver.helpers import GROUP, MakeDouble, eventually, objects, widget
from tests.support.apiserver import ApiServerDouble


def stream(double: ApiServerDouble, **kwargs: Any) -> list[tuple[str, str, str]]:
    """Every (type, name, apiVersion) a watch yields until its server-side timeout."""
    api = objects(double.admin)
    version = kwargs.pop("version", "v1")
    kwargs.setdefault("timeout_seconds", 1)
    events = watch.Watch().stream(api.list_namespaced_custom_object, GROUP, version, "default", "widgets", **kwargs)
    return [(e["type"], e["object"]["metadata"].get("name", ""), e["object"]["apiVersion"]) for e in events]


def test_history_from_a_resource_version(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("before"))
    start = str(double.resource_version)
    api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("a"))
    api.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a", {"spec": {"x": 1}})
    api.delete_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a")
    v1 = f"{GROUP}/v1"
    assert stream(double, resource_version=start) == [("ADDED", "a", v1), ("MODIFIED", "a", v1), ("DELETED", "a", v1)]
    assert stream(double, resource_version=start, version="v2")[0] == ("ADDED", "a", f"{GROUP}/v2")


def test_without_resource_version_starts_with_the_current_state(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    for name in ("a", "b"):
        api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget(name))
    assert [(t, n) for t, n, _v in stream(double)] == [("ADDED", "a"), ("ADDED", "b")]


def test_live_events_reach_a_running_watch(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    seen: list[tuple[str, str]] = []
    watcher = watch.Watch()
    start = str(double.resource_version)

    def run() -> None:
        for event in watcher.stream(
            api.list_namespaced_custom_object, GROUP, "v1", "default", "widgets", resource_version=start
        ):
            seen.append((event["type"], event["object"]["metadata"]["name"]))
            if event["type"] == "DELETED":
                watcher.stop()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("live"))
    eventually(lambda: seen == [("ADDED", "live")], what="the ADDED event")
    api.delete_namespaced_custom_object(GROUP, "v1", "default", "widgets", "live")
    thread.join(timeout=10)
    assert seen == [("ADDED", "live"), ("DELETED", "live")]


def test_label_selector_turns_entering_and_leaving_into_added_and_deleted(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("a"))
    start = str(double.resource_version)
    api.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a", {"metadata": {"labels": {"on": "y"}}})
    api.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a", {"spec": {"x": 1}})
    api.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a", {"metadata": {"labels": None}})
    events = stream(double, resource_version=start, label_selector="on=y")
    assert [(t, n) for t, n, _v in events] == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_bookmarks_carry_the_current_resource_version(make_double: MakeDouble) -> None:
    double = make_double(bookmark_interval=0.1)
    objects(double.admin).create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("a"))
    start = str(double.resource_version)
    raw = watch.Watch().stream(
        objects(double.admin).list_namespaced_custom_object,
        GROUP,
        "v1",
        "default",
        "widgets",
        resource_version=start,
        allow_watch_bookmarks=True,
        timeout_seconds=1,
    )
    bookmarks = [e["object"] for e in raw if e["type"] == "BOOKMARK"]
    assert bookmarks, "expected at least one BOOKMARK within a second at a 0.1 s interval"
    assert bookmarks[0] == {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"resourceVersion": start}}


def test_too_old_resource_version_is_410_expired(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("a"))
    old = double.resource_version - 1
    double.compact()
    with pytest.raises(ApiException) as exc:
        stream(double, resource_version=str(old))
    assert (exc.value.status, exc.value.reason) == (
        410,
        f"Expired: too old resource version: {old} ({double.resource_version + 1})",
    )


def test_a_watch_survives_410_by_relisting(double: ApiServerDouble) -> None:
    """The informer pattern: list, watch from the list's RV; on 410 relist and watch from the new RV."""
    api = objects(double.admin)
    api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("a"))

    def relist() -> tuple[set[str], str]:
        listed = api.list_namespaced_custom_object(GROUP, "v1", "default", "widgets")
        return {i["metadata"]["name"] for i in listed["items"]}, listed["metadata"]["resourceVersion"]

    state, rv = relist()
    api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("b"))
    double.compact()  # the events since `rv` are gone
    try:
        stream(double, resource_version=rv)
        pytest.fail("expected 410")
    except ApiException as exc:
        assert exc.status == 410
        state, rv = relist()
    assert state == {"a", "b"}
    api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("c"))
    assert [(t, n) for t, n, _v in stream(double, resource_version=rv)] == [("ADDED", "c")]
