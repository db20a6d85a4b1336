"""The referenced set: green, red and terminating entries keep their artifacts; incomplete sets cannot publish."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from policies.artifacts import DIGEST_LABEL
from policies.kinds import COMPONENT, COMPONENT_VERSION
from policies.referenced_set import CONFIGMAP_KEY, MSG_UNSYNCED, IncompleteSet, Keep, ReferencedSet, compute
from policies.view import MemoryView

NOW = datetime(2026, 11, 29, 12, 30, 5, tzinfo=UTC)
D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
D3 = "sha256:" + "3" * 64
HOST = "reg.example:5000"
REPO = "ocm/component-descriptors/example.com/demo"
OTHER_REPO = "ocm/component-descriptors/example.com/other"


def component(name: str, repository: str, registry: str = HOST, ns: str = "team-a") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns},
        "spec": {"scheme": "https", "registry": registry, "repository": repository},
    }


def cv(name: str, comp: str, tag: str, ns: str = "team-a", **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": ns, "labels": extra.get("labels", {})},
        "spec": {"componentRef": {"name": comp}, "tag": tag},
    }
    if "available" in extra:
        obj["status"] = {
            "conditions": [{"type": "Available", "status": extra["available"]}],
            "availability": {"resolvedDigest": extra.get("digest", "")},
        }
    if extra.get("terminating"):
        obj["metadata"]["deletionTimestamp"] = "2026-11-29T12:00:00Z"
    return obj


def view_of(*objs: tuple[Any, dict[str, Any]], synced: bool = True) -> MemoryView:
    view = MemoryView(synced=synced)
    for kind, obj in objs:
        view.put(kind, obj)
    return view


def catalog() -> list[tuple[Any, dict[str, Any]]]:
    return [
        (COMPONENT, component("example-com-demo", "ocm/example.com/demo")),
        (COMPONENT, component("example-com-other", "ocm/example.com/other")),
        (COMPONENT, component("example-com-demo", "ocm/example.com/demo", registry="mirror.example", ns="team-b")),
        (COMPONENT_VERSION, cv("green", "example-com-demo", "1.0.0", available="True", digest=D1)),
        (COMPONENT_VERSION, cv("red", "example-com-demo", "1.1.0+ci.7", available="False", digest=D2)),
        (COMPONENT_VERSION, cv("unchecked", "example-com-demo", "0.9.0")),
        (COMPONENT_VERSION, cv("going", "example-com-other", "2.0.0", terminating=True)),
        (COMPONENT_VERSION, cv("pinned", "example-com-other", "2.1.0", labels={DIGEST_LABEL: D3[7:]})),
        (COMPONENT_VERSION, cv("mirrored", "example-com-demo", "1.0.0", ns="team-b")),
    ]


def test_every_present_entry_keeps_its_artifact():
    result = compute(view_of(*catalog()), generation=7, now=NOW)
    assert isinstance(result, ReferencedSet)
    assert result.complete is True
    assert result.registries == {
        HOST: {
            REPO: Keep(("0.9.0", "1.0.0", "1.1.0.build-ci.7"), (D1, D2)),
            OTHER_REPO: Keep(("2.0.0", "2.1.0"), (D3,)),
        },
        "mirror.example": {REPO: Keep(("1.0.0",), ())},
    }
    assert result.keep(HOST, REPO).tags == ("0.9.0", "1.0.0", "1.1.0.build-ci.7")
    assert result.keep(HOST, "ocm/component-descriptors/nothing") == Keep()
    with pytest.raises(TypeError):
        result.registries[HOST][REPO] = Keep()  # type: ignore[index]


def test_configmap_json_is_sorted_and_deterministic():
    result = compute(view_of(*catalog()), generation=7, now=NOW)
    reordered = compute(view_of(*reversed(catalog())), generation=7, now=NOW)
    assert result.dumps() == reordered.dumps()
    assert json.loads(result.dumps()) == {
        "complete": True,
        "computedAt": "2026-11-29T12:30:05Z",
        "generation": 7,
        "registries": {
            HOST: {
                REPO: {"digests": [D1, D2], "tags": ["0.9.0", "1.0.0", "1.1.0.build-ci.7"]},
                OTHER_REPO: {"digests": [D3], "tags": ["2.0.0", "2.1.0"]},
            },
            "mirror.example": {REPO: {"digests": [], "tags": ["1.0.0"]}},
        },
    }
    assert result.dumps().startswith('{"complete":true,"computedAt":"2026-11-29T12:30:05Z","generation":7,')
    assert CONFIGMAP_KEY == "referenced-set.json"


def test_published_json_reads_back_and_compares_by_content():
    result = compute(view_of(*catalog()), generation=7, now=NOW)
    again = ReferencedSet.loads(result.dumps())
    assert again == result
    later = compute(view_of(*catalog()), generation=8, now=datetime(2026, 11, 29, 13, 0, tzinfo=UTC))
    assert later.same_content(again)
    assert not later.same_content(None)
    fewer = compute(view_of(*catalog()[:-1]), generation=8, now=NOW)
    assert not fewer.same_content(again)


@pytest.mark.parametrize("text", ['{"complete": false}', '{"complete": true}', "[]"])
def test_loads_refuses_anything_but_a_complete_set(text):
    with pytest.raises(ValueError, match="not a complete referenced set"):
        ReferencedSet.loads(text)


def test_unsynced_view_is_incomplete():
    result = compute(view_of(*catalog(), synced=False), generation=7, now=NOW)
    assert isinstance(result, IncompleteSet)
    assert result.complete is False
    assert result.reasons == (MSG_UNSYNCED,)
    assert not hasattr(result, "dumps")


def test_one_unresolved_entry_makes_the_whole_set_incomplete():
    objs = [
        *catalog(),
        (COMPONENT_VERSION, cv("orphan", "gone", "1.0.0")),
        (COMPONENT_VERSION, cv("untagged", "example-com-demo", "")),
    ]
    result = compute(view_of(*objs), generation=7, now=NOW)
    assert isinstance(result, IncompleteSet)
    assert result.reasons == (
        "ComponentVersion team-a/orphan: Component team-a/gone does not exist",
        "ComponentVersion team-a/untagged: spec.tag is empty",
    )
    assert result.summary(limit=1) == "ComponentVersion team-a/orphan: Component team-a/gone does not exist; and 1 more"
    assert result.summary() == "; ".join(result.reasons)


def test_an_empty_synced_catalog_is_complete_and_keeps_nothing():
    result = compute(view_of(), generation=1, now=NOW)
    assert isinstance(result, ReferencedSet)
    assert result.registries == {}


def test_merged_with_keeps_what_either_set_keeps_and_an_incomplete_one_wins():
    first = ReferencedSet(4, NOW, {HOST: {REPO: Keep(("1.0.0",), (D1,))}})
    later = ReferencedSet(9, NOW, {HOST: {REPO: Keep(("0.9.0",), ()), OTHER_REPO: Keep(("2.0.0",), (D2,))}})
    merged = first.merged_with(later)
    assert isinstance(merged, ReferencedSet) and merged.generation == 4
    assert merged.keep(HOST, REPO) == Keep(("0.9.0", "1.0.0"), (D1,))
    assert merged.keep(HOST, OTHER_REPO) == Keep(("2.0.0",), (D2,))
    incomplete = IncompleteSet(NOW, ("a reason",))
    assert first.merged_with(incomplete) is incomplete
