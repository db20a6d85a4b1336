"""PackageRevision in both versions through the apiserver double and our ``/convert`` (issue 6).

v1alpha2 is stored; every v1alpha1 read and write passes through the conversion webhook. What
v1alpha1 cannot hold (later tasks, the v1alpha2-only status fields) must survive in the
annotation through writes in the other version.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from policies.model import GroupKind
from policies.packages import LATEST_LABEL_V1ALPHA1
from tests.e2e_conversion.conftest import PACKAGE_REVISION, USER, USER_GROUPS, Cluster, carried, written
from tests.support.stack import WARDEN

REPOSITORY = GroupKind("config.porch.kpt.dev", "Repository")

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


def with_repository(cluster: Cluster, ns: str) -> None:
    """The Repository the mutating path reads from the cache (owner reference), once cached."""
    repo = {
        "apiVersion": "config.porch.kpt.dev/v1alpha1",
        "kind": "Repository",
        "metadata": {"name": "blueprints", "namespace": ns},
        "spec": {"type": "git", "git": {"repo": "https://git.example.com/blueprints.git", "branch": "main"}},
    }
    api = cluster.stack.custom(USER, USER_GROUPS)
    created = api.create_namespaced_custom_object("config.porch.kpt.dev", "v1alpha1", ns, "repositories", repo)
    cluster.stack.wait_caught_up(REPOSITORY, created)


def common_spec(workspace: str = "v1") -> dict[str, Any]:
    return {
        "packageName": "web",
        "repository": "blueprints",
        "workspaceName": workspace,
        "readinessGates": [{"conditionType": "Ready"}],
        "packageMetadata": {"labels": {"team": "web"}},
    }


def v1alpha1(name: str, ns: str, *tasks: dict[str, Any]) -> dict[str, Any]:
    spec = {**common_spec(), "tasks": [{"type": "init", "init": INIT}, *tasks]}
    return PACKAGE_REVISION.manifest("v1alpha1", name, ns, metadata={"labels": {"app": "web"}}, spec=spec)


def v1alpha2(name: str, ns: str, workspace: str = "v1") -> dict[str, Any]:
    spec = {**common_spec(workspace), "source": {"init": INIT}}
    return PACKAGE_REVISION.manifest("v1alpha2", name, ns, metadata={"labels": {"app": "web"}}, spec=spec)


def test_created_in_v1alpha1_reads_in_v1alpha2_and_back_as_written(cluster: Cluster, ns: str) -> None:
    with_repository(cluster, ns)
    revisions = cluster.revisions()
    manifest = v1alpha1("web-v1", ns, EVAL)

    created = revisions.create(manifest)
    as_v2 = revisions.get("v1alpha2", "web-v1", ns)
    as_v1 = revisions.get("v1alpha1", "web-v1", ns)

    assert created["spec"] == {**manifest["spec"], "lifecycle": "Draft"}
    assert created["metadata"]["labels"] == {"app": "web"}, "no latest-revision label on a v1alpha1 CREATE"
    assert "annotations" not in created["metadata"]
    assert as_v2["spec"] == {**common_spec(), "lifecycle": "Draft", "source": {"init": INIT}}
    assert as_v2["metadata"]["labels"] == {"app": "web"}
    assert carried(as_v2) == {"from": "v1alpha1", "tasksTail": [EVAL], "created": ["metadata.annotations"]}
    assert cluster.stored(PACKAGE_REVISION, "web-v1", ns) == as_v2
    assert as_v1 == created


def test_created_in_v1alpha2_reads_in_v1alpha1_and_back_as_written(cluster: Cluster, ns: str) -> None:
    with_repository(cluster, ns)
    revisions = cluster.revisions()
    manifest = v1alpha2("web-v1", ns)

    created = revisions.create(manifest)
    as_v1 = revisions.get("v1alpha1", "web-v1", ns)
    as_v2 = revisions.get("v1alpha2", "web-v1", ns)

    assert as_v1["spec"] == {**common_spec(), "lifecycle": "Draft", "tasks": [{"type": "init", "init": INIT}]}
    assert as_v1["metadata"]["labels"] == {"app": "web", LATEST_LABEL_V1ALPHA1: "false"}
    assert written(as_v1)["metadata"] == {**written(created)["metadata"], "labels": as_v1["metadata"]["labels"]}
    assert as_v2 == created


def test_spec_updates_through_either_version_keep_what_only_the_other_can_hold(cluster: Cluster, ns: str) -> None:
    with_repository(cluster, ns)
    revisions = cluster.revisions()
    revisions.create(v1alpha1("web-v1", ns, EVAL))
    tasks = [{"type": "init", "init": INIT}, EVAL, RENDER]

    revisions.patch("v1alpha1", "web-v1", {"spec": {"lifecycle": "Proposed", "tasks": tasks}}, ns)
    proposed_v2 = revisions.get("v1alpha2", "web-v1", ns)
    revisions.patch("v1alpha2", "web-v1", {"spec": {"lifecycle": "Draft"}}, ns)
    draft_v1 = revisions.get("v1alpha1", "web-v1", ns)

    assert (proposed_v2["spec"]["lifecycle"], proposed_v2["spec"]["source"]) == ("Proposed", {"init": INIT})
    assert carried(proposed_v2) == {
        "from": "v1alpha1",
        "tasksTail": [EVAL, RENDER],
        "created": ["metadata.annotations"],
    }
    assert (draft_v1["spec"]["lifecycle"], draft_v1["spec"]["tasks"]) == ("Draft", tasks)
    assert "annotations" not in draft_v1["metadata"]


def test_status_written_in_v1alpha2_reads_in_v1alpha1_and_a_v1alpha1_status_update_keeps_the_rest(
    cluster: Cluster, ns: str
) -> None:
    with_repository(cluster, ns)
    revisions, warden = cluster.revisions(), cluster.served(PACKAGE_REVISION, WARDEN)
    revisions.create(v1alpha2("web-v1", ns))
    status = {"revision": 1, "publishedBy": "alice", "publishedAt": "2026-01-02T03:04:05Z", "conditions": [READY]}
    warden.patch_status("v1alpha2", "web-v1", {"status": {**status, **V2_ONLY_STATUS}}, ns)

    as_v1 = revisions.get("v1alpha1", "web-v1", ns)
    not_ready = {**READY, "status": "False", "reason": "Rendering", "message": "the renderer is busy"}
    updated = warden.patch_status("v1alpha1", "web-v1", {"status": {"conditions": [not_ready]}}, ns)
    as_v2 = revisions.get("v1alpha2", "web-v1", ns)

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


def test_lists_in_both_versions_hold_every_revision_converted(cluster: Cluster, ns: str) -> None:
    with_repository(cluster, ns)
    revisions = cluster.revisions()
    revisions.create(v1alpha1("web-v1", ns, EVAL))
    revisions.create(v1alpha2("web-v2", ns, workspace="v2"))

    listed = {v: revisions.list(v, ns) for v in ("v1alpha1", "v1alpha2")}

    for version, answer in listed.items():
        assert answer["apiVersion"] == f"porch.kpt.dev/{version}"
        assert [item["metadata"]["name"] for item in answer["items"]] == ["web-v1", "web-v2"]
        got = [revisions.get(version, item["metadata"]["name"], ns) for item in answer["items"]]
        assert answer["items"] == got
    assert [i["spec"]["tasks"] for i in listed["v1alpha1"]["items"]] == [
        [{"type": "init", "init": INIT}, EVAL],
        [{"type": "init", "init": INIT}],
    ]
    assert [i["spec"]["source"] for i in listed["v1alpha2"]["items"]] == [{"init": INIT}, {"init": INIT}]


def test_a_v1alpha1_watch_sees_v1alpha2_writes_in_v1alpha1(cluster: Cluster, ns: str) -> None:
    with_repository(cluster, ns)
    revisions = cluster.revisions()
    revisions.create(v1alpha2("web-v1", ns))
    since = revisions.list("v1alpha1", ns)["metadata"]["resourceVersion"]
    revisions.patch("v1alpha2", "web-v1", {"spec": {"lifecycle": "Proposed"}}, ns)

    event = next(revisions.watch_from("v1alpha1", since, ns))

    assert (event["type"], event["object"]["apiVersion"]) == ("MODIFIED", "porch.kpt.dev/v1alpha1")
    assert event["object"]["spec"]["lifecycle"] == "Proposed"
    assert event["object"]["spec"]["tasks"] == [{"type": "init", "init": INIT}]
    assert event["object"]["metadata"]["labels"] == {"app": "web", LATEST_LABEL_V1ALPHA1: "false"}


def test_a_plain_v1alpha1_update_cannot_write_the_revision_number(cluster: Cluster, ns: str) -> None:
    """spec.revision is stored as status.revision: without packages.revision-number a user's plain
    v1alpha1 patch would write status past the status subresource."""
    with_repository(cluster, ns)
    revisions, warden = cluster.revisions(), cluster.served(PACKAGE_REVISION, WARDEN)
    revisions.create(v1alpha1("web-v1", ns))

    with pytest.raises(ApiException) as refused:
        revisions.patch("v1alpha1", "web-v1", {"spec": {"revision": 7}}, ns)
    assert refused.value.status == 403
    assert json.loads(refused.value.body)["message"] == (
        'admission webhook "packages.validate.catalog-warden.io" denied the request: '
        f"PackageRevision {ns}/web-v1 denied by packages.revision-number: spec.revision is assigned by the package "
        "controllers on publish (stored as v1alpha2 status.revision) and cannot be changed (0 to 7)"
    )
    assert "revision" not in cluster.stored(PACKAGE_REVISION, "web-v1", ns).get("status", {})

    warden.patch("v1alpha1", "web-v1", {"spec": {"revision": 7}}, ns)
    assert cluster.stored(PACKAGE_REVISION, "web-v1", ns)["status"]["revision"] == 7
