"""PackageRevision in both versions through kube-apiserver and our ``/convert`` (DESIGN.md section 7).

v1alpha2 is stored; kube-apiserver calls the conversion webhook of the shipped CRD (the Service,
the injected caBundle) for every v1alpha1 read, list, watch and write. It checks each
ConversionReview response itself: a converted object whose metadata differs other than in labels
and annotations, or a changed count, order or uid, fails the request with ``conversion webhook
for ... failed``, so every successful request here is an accepted response. What v1alpha1 cannot
hold travels in the annotation ``catalog-warden.io/conversion-data`` and leaves it again when
read back in the version that wrote it. Carried over from tests/e2e_conversion (the double).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from policies.conversion import CONVERSION_DATA
from policies.packages import LATEST_LABEL_V1ALPHA1, LATEST_LABEL_V1ALPHA2
from tests.support.controlplane.cluster import ServerProcess, wait_for
from webhook.kube.client import ApiError, Kube

Obj = dict[str, Any]

GROUP = "porch.kpt.dev"
MERGE = "application/merge-patch+json"
WATCH_SECONDS = 10
"""Server-side end of a watch, so a missing event fails the test instead of hanging it."""

INIT = {"description": "a web app", "keywords": ["web"]}
EVAL = {"type": "eval", "eval": {"image": "gcr.io/kpt-fn/set-labels:v0.2"}}
RENDER = {"type": "render"}
READY = {
    "type": "Ready",
    "status": "True",
    "reason": "Published",
    "message": "the revision is published",
    "lastTransitionTime": "2026-01-02T03:04:05Z",
    "observedGeneration": 2,
}
V2_ONLY_STATUS = {
    "observedGeneration": 2,
    "creationSource": "init",
    "packageConditions": [{"type": "Rendered", "status": "True"}],
}
LABELS = {"v1alpha1": LATEST_LABEL_V1ALPHA1, "v1alpha2": LATEST_LABEL_V1ALPHA2}


def revisions(version: str, ns: str, name: str = "") -> str:
    path = f"/apis/{GROUP}/{version}/namespaces/{ns}/packagerevisions"
    return f"{path}/{name}" if name else path


def carried(obj: Obj) -> Obj | None:
    """The decoded conversion-data annotation of ``obj``, or None when it has none."""
    value = (obj["metadata"].get("annotations") or {}).get(CONVERSION_DATA)
    return None if value is None else json.loads(value)


def same_object(obj: Obj) -> Obj:
    """What conversion must leave alone: the metadata other than labels and annotations."""
    return {k: v for k, v in obj["metadata"].items() if k not in ("labels", "annotations")}


def common_spec(workspace: str = "v1") -> Obj:
    return {
        "packageName": "web",
        "repository": "blueprints",
        "workspaceName": workspace,
        "readinessGates": [{"conditionType": "Ready"}],
        "packageMetadata": {"labels": {"team": "web"}},
    }


def v1alpha1(name: str, ns: str, *tasks: Obj) -> Obj:
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "PackageRevision",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"}},
        "spec": {**common_spec(), "tasks": [{"type": "init", "init": INIT}, *tasks]},
    }


def v1alpha2(name: str, ns: str, workspace: str = "v1") -> Obj:
    return {
        "apiVersion": f"{GROUP}/v1alpha2",
        "kind": "PackageRevision",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"}},
        "spec": {**common_spec(workspace), "source": {"init": INIT}},
    }


@pytest.fixture
def repository(server: ServerProcess, admin: Kube, ns: str) -> Iterator[Obj]:
    """The Repository ``blueprints``, once the server's cache has it (a dry run gets its owner reference).

    Afterwards the revisions' finalizer is dropped by hand: no sidecar runs here to release it, and
    the namespace would stay Terminating (tests/cluster/test_garbage_collection.py shows why).
    """
    repo = admin.request(
        "POST",
        f"/apis/config.porch.kpt.dev/v1alpha1/namespaces/{ns}/repositories",
        body={
            "apiVersion": "config.porch.kpt.dev/v1alpha1",
            "kind": "Repository",
            "metadata": {"name": "blueprints", "namespace": ns},
            "spec": {"type": "git", "git": {"repo": "https://git.example.com/blueprints.git", "branch": "main"}},
        },
    )
    probe = v1alpha2("cache-probe", ns)

    def owned() -> bool:
        answer = admin.request("POST", revisions("v1alpha2", ns), query=[("dryRun", "All")], body=probe)
        return bool(answer["metadata"].get("ownerReferences"))

    wait_for(owned, "the server's cache to see Repository blueprints")
    yield repo
    for item in admin.request("GET", revisions("v1alpha2", ns))["items"]:
        path = revisions("v1alpha2", ns, item["metadata"]["name"])
        admin.request("PATCH", path, body={"metadata": {"finalizers": None}}, content_type=MERGE)


def test_created_in_v1alpha1_reads_in_v1alpha2_and_back_as_written(repository: Obj, admin: Kube, ns: str) -> None:
    manifest = v1alpha1("web-v1", ns, EVAL)

    created = admin.request("POST", revisions("v1alpha1", ns), body=manifest)
    as_v2 = admin.request("GET", revisions("v1alpha2", ns, "web-v1"))
    as_v1 = admin.request("GET", revisions("v1alpha1", ns, "web-v1"))

    assert created["apiVersion"] == f"{GROUP}/v1alpha1"
    assert created["spec"] == {**manifest["spec"], "lifecycle": "Draft"}
    assert created["metadata"]["labels"] == {"app": "web"}  # no latest-revision label on a v1alpha1 CREATE
    assert "annotations" not in created["metadata"]
    assert as_v2["spec"] == {**common_spec(), "lifecycle": "Draft", "source": {"init": INIT}}
    assert carried(as_v2) == {"from": "v1alpha1", "tasksTail": [EVAL], "created": ["metadata.annotations"]}
    assert same_object(as_v2) == same_object(created)
    assert as_v2["metadata"]["ownerReferences"][0]["uid"] == repository["metadata"]["uid"]
    assert as_v1 == created


def test_created_in_v1alpha2_reads_in_v1alpha1_and_back_as_written(repository: Obj, admin: Kube, ns: str) -> None:
    created = admin.request("POST", revisions("v1alpha2", ns), body=v1alpha2("web-v1", ns))
    as_v1 = admin.request("GET", revisions("v1alpha1", ns, "web-v1"))
    as_v2 = admin.request("GET", revisions("v1alpha2", ns, "web-v1"))

    assert created["metadata"]["labels"] == {"app": "web", LATEST_LABEL_V1ALPHA2: "false"}
    assert as_v1["spec"] == {**common_spec(), "lifecycle": "Draft", "tasks": [{"type": "init", "init": INIT}]}
    assert as_v1["metadata"]["labels"] == {"app": "web", LATEST_LABEL_V1ALPHA1: "false"}
    assert same_object(as_v1) == same_object(created)
    assert as_v2 == created


def test_spec_updates_through_either_version_keep_what_only_the_other_can_hold(
    repository: Obj, admin: Kube, ns: str
) -> None:
    admin.request("POST", revisions("v1alpha1", ns), body=v1alpha1("web-v1", ns, EVAL))
    tasks = [{"type": "init", "init": INIT}, EVAL, RENDER]

    path = revisions("v1alpha1", ns, "web-v1")
    admin.request("PATCH", path, body={"spec": {"lifecycle": "Proposed", "tasks": tasks}}, content_type=MERGE)
    proposed_v2 = admin.request("GET", revisions("v1alpha2", ns, "web-v1"))
    admin.request(
        "PATCH", revisions("v1alpha2", ns, "web-v1"), body={"spec": {"lifecycle": "Draft"}}, content_type=MERGE
    )
    draft_v1 = admin.request("GET", path)

    assert (proposed_v2["spec"]["lifecycle"], proposed_v2["spec"]["source"]) == ("Proposed", {"init": INIT})
    assert carried(proposed_v2) == {
        "from": "v1alpha1",
        "tasksTail": [EVAL, RENDER],
        "created": ["metadata.annotations"],
    }
    assert (draft_v1["spec"]["lifecycle"], draft_v1["spec"]["tasks"]) == ("Draft", tasks)
    assert "annotations" not in draft_v1["metadata"]


def test_status_written_in_v1alpha2_reads_in_v1alpha1_and_a_v1alpha1_status_update_keeps_the_rest(
    repository: Obj, admin: Kube, warden_kube: Kube, ns: str
) -> None:
    admin.request("POST", revisions("v1alpha2", ns), body=v1alpha2("web-v1", ns))
    status = {"revision": 1, "publishedBy": "alice", "publishedAt": "2026-01-02T03:04:05Z", "conditions": [READY]}
    warden_kube.request(
        "PATCH", revisions("v1alpha2", ns, "web-v1") + "/status", body={"status": {**status, **V2_ONLY_STATUS}},
        content_type=MERGE,
    )  # fmt: skip

    as_v1 = admin.request("GET", revisions("v1alpha1", ns, "web-v1"))
    not_ready = {**READY, "status": "False", "reason": "Rendering", "message": "the renderer is busy"}
    updated = warden_kube.request(
        "PATCH", revisions("v1alpha1", ns, "web-v1") + "/status", body={"status": {"conditions": [not_ready]}},
        content_type=MERGE,
    )  # fmt: skip
    as_v2 = admin.request("GET", revisions("v1alpha2", ns, "web-v1"))

    assert as_v1["spec"]["revision"] == 1
    assert as_v1["status"] == {
        "publishedBy": "alice",
        "publishTimestamp": "2026-01-02T03:04:05Z",
        "conditions": [READY],
    }
    assert carried(as_v1) == {"from": "v1alpha2", "status": V2_ONLY_STATUS, "created": ["metadata.annotations"]}
    assert updated["status"]["conditions"] == [not_ready]
    assert as_v2["status"] == {**status, **V2_ONLY_STATUS, "conditions": [not_ready]}
    assert "annotations" not in as_v2["metadata"]


def test_lists_in_both_versions_hold_every_revision_converted(repository: Obj, admin: Kube, ns: str) -> None:
    admin.request("POST", revisions("v1alpha1", ns), body=v1alpha1("web-v1", ns, EVAL))
    admin.request("POST", revisions("v1alpha2", ns), body=v1alpha2("web-v2", ns, workspace="v2"))

    listed = {v: admin.request("GET", revisions(v, ns)) for v in ("v1alpha1", "v1alpha2")}

    for version, answer in listed.items():
        assert answer["apiVersion"] == f"{GROUP}/{version}"
        assert [item["metadata"]["name"] for item in answer["items"]] == ["web-v1", "web-v2"]
        got = [admin.request("GET", revisions(version, ns, item["metadata"]["name"])) for item in answer["items"]]
        assert answer["items"] == got
    assert [same_object(i) for i in listed["v1alpha1"]["items"]] == [
        same_object(i) for i in listed["v1alpha2"]["items"]
    ]
    assert [i["spec"]["tasks"] for i in listed["v1alpha1"]["items"]] == [
        [{"type": "init", "init": INIT}, EVAL],
        [{"type": "init", "init": INIT}],
    ]
    assert [i["spec"]["source"] for i in listed["v1alpha2"]["items"]] == [{"init": INIT}, {"init": INIT}]


def watch_from(kube: Kube, version: str, ns: str, since: str) -> Iterator[Obj]:
    query = [("watch", "true"), ("resourceVersion", since), ("timeoutSeconds", str(WATCH_SECONDS))]
    with kube.stream(revisions(version, ns), query, timeout=WATCH_SECONDS + 5) as events:
        yield from events


@pytest.mark.parametrize(("watched", "written"), [("v1alpha1", "v1alpha2"), ("v1alpha2", "v1alpha1")])
def test_a_watch_in_one_version_sees_writes_in_the_other_converted(
    repository: Obj, admin: Kube, ns: str, watched: str, written: str
) -> None:
    admin.request("POST", revisions("v1alpha1", ns), body=v1alpha1("web-v1", ns, EVAL))
    since = admin.request("GET", revisions(watched, ns))["metadata"]["resourceVersion"]
    admin.request(
        "PATCH", revisions(written, ns, "web-v1"), body={"spec": {"lifecycle": "Proposed"}}, content_type=MERGE
    )
    admin.request("DELETE", revisions(written, ns, "web-v1"))

    events = watch_from(admin, watched, ns, since)
    modified, finalized = next(events), next(events)

    for event in (modified, finalized):
        assert (event["type"], event["object"]["apiVersion"]) == ("MODIFIED", f"{GROUP}/{watched}")
        assert event["object"]["metadata"]["labels"] == {"app": "web"}  # created through v1alpha1: no latest label
    assert modified["object"]["spec"]["lifecycle"] == "Proposed"
    assert "deletionTimestamp" in finalized["object"]["metadata"]  # held by porch.kpt.dev/packagerevisions
    tasks_or_source = {
        "v1alpha1": ("tasks", [{"type": "init", "init": INIT}, EVAL]),
        "v1alpha2": ("source", {"init": INIT}),
    }
    field, value = tasks_or_source[watched]
    assert modified["object"]["spec"][field] == value


def test_a_plain_v1alpha1_update_cannot_write_the_revision_number(
    repository: Obj, admin: Kube, warden_kube: Kube, ns: str
) -> None:
    """spec.revision is stored as status.revision: kube-apiserver stores it from a plain v1alpha1
    update (the status subresource does not stop it), so the rule packages.revision-number must."""
    admin.request("POST", revisions("v1alpha1", ns), body=v1alpha1("web-v1", ns))

    with pytest.raises(ApiError) as refused:
        admin.request("PATCH", revisions("v1alpha1", ns, "web-v1"), body={"spec": {"revision": 7}}, content_type=MERGE)

    assert refused.value.status == 403
    assert refused.value.message == (
        'admission webhook "packages.validate.catalog-warden.io" denied the request: '
        f"PackageRevision {ns}/web-v1 denied by packages.revision-number: spec.revision is assigned by the package "
        "controllers on publish (stored as v1alpha2 status.revision) and cannot be changed (0 to 7)"
    )
    assert "revision" not in admin.request("GET", revisions("v1alpha2", ns, "web-v1")).get("status", {})

    warden_kube.request(
        "PATCH", revisions("v1alpha1", ns, "web-v1"), body={"spec": {"revision": 7}}, content_type=MERGE
    )
    assert admin.request("GET", revisions("v1alpha2", ns, "web-v1"))["status"]["revision"] == 7
