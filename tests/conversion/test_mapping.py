"""Exact examples of each mapping, annotation text included (docs/conversion.md shows the same)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.conversion import CONVERSION_DATA, CONVERTERS, ConversionError
from tests.conversion.builders import package_revision


def convert(obj: dict[str, Any], to_version: str) -> dict[str, Any]:
    """One converter call as the framing makes it (apiVersion set to the target)."""
    group, _, version = obj["apiVersion"].partition("/")
    result = CONVERTERS[(group, obj["kind"], version, to_version)](obj)
    result["apiVersion"] = f"{group}/{to_version}"
    return result


def carried(obj: dict[str, Any]) -> dict[str, Any]:
    return json.loads(obj["metadata"]["annotations"][CONVERSION_DATA])


def test_package_revision_v1alpha1_to_v1alpha2() -> None:
    obj = package_revision(
        "v1alpha1",
        spec={
            "packageName": "nginx",
            "repository": "blueprints",
            "workspaceName": "v1",
            "revision": 3,
            "lifecycle": "Published",
            "tasks": [
                {"type": "clone", "clone": {"upstreamRef": {"type": "git", "git": {"repo": "r"}}, "strategy": "copy"}},
                {"type": "render", "render": {}},
            ],
        },
        status={"publishedBy": "alice", "publishTimestamp": "2026-01-02T03:04:05Z"},
    )
    obj["metadata"]["labels"] = {"kpt.dev/latest-revision": "true"}
    out = convert(obj, "v1alpha2")
    assert out["spec"] == {
        "packageName": "nginx",
        "repository": "blueprints",
        "workspaceName": "v1",
        "lifecycle": "Published",
        "source": {"cloneFrom": {"type": "git", "git": {"repo": "r"}}},
    }
    assert out["status"] == {"publishedBy": "alice", "revision": 3, "publishedAt": "2026-01-02T03:04:05Z"}
    assert out["metadata"]["labels"] == {"porch.kpt.dev/latest-revision": "true"}
    assert out["metadata"]["annotations"] == {
        CONVERSION_DATA: '{"from":"v1alpha1","taskBody":{"strategy":"copy"},'
        '"tasksTail":[{"type":"render","render":{}}],"created":["metadata.annotations"]}'
    }
    assert convert(out, "v1alpha1") == obj


@pytest.mark.parametrize(
    ("source", "task"),
    [
        ({"init": {"description": "d"}}, {"type": "init", "init": {"description": "d"}}),
        ({"cloneFrom": {"type": "git"}}, {"type": "clone", "clone": {"upstreamRef": {"type": "git"}}}),
        ({"copyFrom": {"name": "p.v1"}}, {"type": "edit", "edit": {"sourceRef": {"name": "p.v1"}}}),
        (
            {"upgrade": {"oldUpstream": {"name": "a"}, "currentPackage": {"name": "c"}, "strategy": "fast-forward"}},
            {
                "type": "upgrade",
                "upgrade": {
                    "oldUpstream": {"name": "a"},
                    "localPackageRevisionRef": {"name": "c"},
                    "strategy": "fast-forward",
                },
            },
        ),
    ],
)
def test_package_revision_source_is_the_first_task(source: dict[str, Any], task: dict[str, Any]) -> None:
    v2 = package_revision("v1alpha2", spec={"source": source})
    v1 = convert(v2, "v1alpha1")
    assert v1["spec"] == {"tasks": [task]}
    assert "annotations" not in v1["metadata"]
    assert convert(package_revision("v1alpha1", spec={"tasks": [task]}), "v1alpha2")["spec"] == {"source": source}


def test_package_revision_v1alpha2_only_status_is_carried() -> None:
    obj = package_revision(
        "v1alpha2",
        spec={"source": {"init": {}}},
        status={"revision": 0, "observedGeneration": 2, "creationSource": "init", "conditions": []},
    )
    out = convert(obj, "v1alpha1")
    assert out["spec"] == {"tasks": [{"type": "init", "init": {}}], "revision": 0}
    assert out["status"] == {"conditions": []}
    assert carried(out) == {
        "from": "v1alpha2",
        "status": {"observedGeneration": 2, "creationSource": "init"},
        "created": ["metadata.annotations"],
    }
    assert convert(out, "v1alpha2") == obj


def test_package_revision_tasks_without_a_source_travel_whole() -> None:
    obj = package_revision("v1alpha1", spec={"tasks": [{"type": "render"}, {"type": "init", "init": {}}]})
    out = convert(obj, "v1alpha2")
    assert out["spec"] == {}
    assert carried(out)["tasks"] == [{"type": "render"}, {"type": "init", "init": {}}]


def test_package_revision_both_latest_labels_survive() -> None:
    obj = package_revision("v1alpha1", spec={})
    obj["metadata"]["labels"] = {"kpt.dev/latest-revision": "true", "porch.kpt.dev/latest-revision": "stale"}
    out = convert(obj, "v1alpha2")
    assert out["metadata"]["labels"] == {"porch.kpt.dev/latest-revision": "true"}
    assert carried(out)["labels"] == {"porch.kpt.dev/latest-revision": "stale"}
    assert convert(out, "v1alpha1") == obj


def test_foreign_annotation_value_survives_the_round_trip() -> None:
    obj = package_revision("v1alpha2", spec={})
    obj["metadata"]["annotations"] = {CONVERSION_DATA: "left here by someone"}
    out = convert(obj, "v1alpha1")
    assert carried(out)["prior"] == "left here by someone"
    assert convert(out, "v1alpha2") == obj


@pytest.mark.parametrize(
    ("obj", "to_version", "message"),
    [
        (
            package_revision("v1alpha1", spec={"tasks": {"type": "init"}}),
            "v1alpha2",
            "spec.tasks must be an array, not an object",
        ),
        (
            package_revision("v1alpha2", spec=[], status={"revision": 1}),
            "v1alpha1",
            "spec must be an object, not an array",
        ),
    ],
)
def test_malformed_fields_are_named(obj: dict[str, Any], to_version: str, message: str) -> None:
    with pytest.raises(ConversionError) as raised:
        convert(obj, to_version)
    assert str(raised.value) == message


def test_tampered_payload_is_named() -> None:
    obj = package_revision("v1alpha1", spec={})
    obj["metadata"]["annotations"] = {CONVERSION_DATA: '{"from":"v1alpha2","created":"status"}'}
    with pytest.raises(ConversionError) as raised:
        convert(obj, "v1alpha2")
    assert str(raised.value) == f"annotation {CONVERSION_DATA}: created must be an array, not a string"


# --- bodies the mapping cannot express without losing a key -------------------------------------

BOTH_UPGRADE_KEYS = {"localPackageRevisionRef": {"name": "a"}, "currentPackage": {"name": "b"}}


def test_a_v1alpha1_upgrade_body_holding_both_names_travels_whole() -> None:
    """Renaming localPackageRevisionRef onto a currentPackage already there would drop one of them."""
    tasks = [{"type": "upgrade", "upgrade": BOTH_UPGRADE_KEYS}]
    obj = package_revision("v1alpha1", spec={"tasks": tasks})
    out = convert(obj, "v1alpha2")
    assert "source" not in out["spec"]
    assert carried(out) == {"from": "v1alpha1", "tasks": tasks, "created": ["metadata.annotations"]}
    assert convert(out, "v1alpha1") == obj


@pytest.mark.parametrize(
    ("version", "body"),
    [("v1alpha1", {"currentPackage": {"name": "b"}}), ("v1alpha2", {"localPackageRevisionRef": {"name": "a"}})],
    ids=["v1alpha1 body with the v1alpha2 name", "v1alpha2 body with the v1alpha1 name"],
)
def test_an_upgrade_body_holding_only_the_other_versions_name_comes_back_as_it_was(
    version: str, body: dict[str, Any]
) -> None:
    """Renamed back on the return trip, the name would change: the body travels whole."""
    spec = {"tasks": [{"type": "upgrade", "upgrade": body}]} if version == "v1alpha1" else {"source": {"upgrade": body}}
    obj = package_revision(version, spec=spec)
    other = "v1alpha2" if version == "v1alpha1" else "v1alpha1"
    assert convert(convert(obj, other), version) == obj


def test_a_v1alpha2_upgrade_source_holding_both_names_travels_whole() -> None:
    source = {"upgrade": BOTH_UPGRADE_KEYS}
    obj = package_revision("v1alpha2", spec={"source": source})
    out = convert(obj, "v1alpha1")
    assert "tasks" not in out["spec"]
    assert carried(out) == {"from": "v1alpha2", "source": source, "created": ["metadata.annotations"]}
    assert convert(out, "v1alpha2") == obj


@pytest.mark.parametrize("source", ["init", ["init"], True, 3], ids=["string", "list", "boolean", "number"])
def test_a_source_that_is_not_an_object_comes_back_as_it_was(source: Any) -> None:
    """Carried whole on the way to v1alpha1, so the way back must accept it (it was refused)."""
    obj = package_revision("v1alpha2", spec={"packageName": "nginx", "source": source})
    out = convert(obj, "v1alpha1")
    assert carried(out)["source"] == source
    assert convert(out, "v1alpha2") == obj
