"""MemoryView: the store behind --state, tests and the informer cache."""

from __future__ import annotations

import re

import pytest

from policies.catalog import RELEASES_BY_COMPONENT_VERSION
from policies.families import INDEXES
from policies.kinds import COMPONENT_VERSION, RELEASE
from policies.view import MemoryView


def rel(name: str, cv: str, ns: str = "a", cv_ns: str | None = None, **labels: str) -> dict:
    ref = {"name": cv} | ({"namespace": cv_ns} if cv_ns else {})
    return {"metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": {"componentVersionRef": ref}}


def names(objs) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


def test_index_follows_put_update_remove_and_replace() -> None:
    v = MemoryView(INDEXES)
    v.put(RELEASE, rel("r1", "cv1"))
    v.put(RELEASE, rel("r2", "cv1"))
    v.put(RELEASE, rel("r3", "cv1", ns="b", cv_ns="a"))
    assert names(v.indexed(RELEASE, RELEASES_BY_COMPONENT_VERSION, "a/cv1")) == ["r1", "r2", "r3"]
    v.put(RELEASE, rel("r2", "cv2"))  # rebinding moves it between keys
    assert names(v.indexed(RELEASE, RELEASES_BY_COMPONENT_VERSION, "a/cv1")) == ["r1", "r3"]
    assert names(v.indexed(RELEASE, RELEASES_BY_COMPONENT_VERSION, "a/cv2")) == ["r2"]
    assert v.remove(RELEASE, "r1", "a") is not None
    assert names(v.indexed(RELEASE, RELEASES_BY_COMPONENT_VERSION, "a/cv1")) == ["r3"]
    v.replace(RELEASE, [rel("r9", "cv2")])
    assert v.indexed(RELEASE, RELEASES_BY_COMPONENT_VERSION, "a/cv1") == ()
    assert names(v.indexed(RELEASE, RELEASES_BY_COMPONENT_VERSION, "a/cv2")) == ["r9"]


def test_list_filters_by_namespace_and_labels() -> None:
    v = MemoryView(INDEXES)
    v.put(RELEASE, rel("r1", "cv", team="x"))
    v.put(RELEASE, rel("r2", "cv", ns="b", team="x"))
    v.put(RELEASE, rel("r3", "cv", team="y"))
    assert names(v.list(RELEASE)) == ["r1", "r2", "r3"]
    assert names(v.list(RELEASE, namespace="a")) == ["r1", "r3"]
    assert names(v.list(RELEASE, labels={"team": "x"})) == ["r1", "r2"]
    assert names(v.list(RELEASE, namespace="a", labels={"team": "x"})) == ["r1"]
    assert v.get(RELEASE, "r2", "b")["metadata"]["namespace"] == "b"
    assert v.get(RELEASE, "r2", "a") is None


def test_undeclared_index_is_an_error_not_an_empty_answer() -> None:
    with pytest.raises(
        KeyError, match=re.escape("no index 'nope' declared for ComponentVersion.solar.opendefense.cloud")
    ):
        MemoryView(INDEXES).indexed(COMPONENT_VERSION, "nope", "x")


def test_synced_flag() -> None:
    v = MemoryView(synced=False)
    assert not v.synced
    v.mark_synced()
    assert v.synced
