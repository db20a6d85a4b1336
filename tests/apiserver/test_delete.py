"""Delete: preconditions (including one that loses a race), finalizers, GC cascade, namespace deletion."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.apiserver.helpers import GROUP, MakeDouble, eventually, hook, objects, webhook_config, widget
from tests.support.apiserver import ApiServerDouble, TestCA
from tests.support.apiserver.scripted_webhook import ScriptedWebhook, allow


def status_of(exc: pytest.ExceptionInfo[ApiException]) -> tuple[int, str, str]:
    body = json.loads(exc.value.body)
    return body["code"], body["reason"], body["message"]


def get(double: ApiServerDouble, name: str) -> dict[str, Any] | None:
    return double.store.get((GROUP, "widgets", "default", name))


def delete(double: ApiServerDouble, name: str, **options: Any) -> dict[str, Any]:
    return objects(double.admin).delete_namespaced_custom_object(
        GROUP, "v1", "default", "widgets", name, body=client.V1DeleteOptions(**options)
    )


def test_uid_and_resource_version_preconditions(double: ApiServerDouble) -> None:
    created = objects(double.admin).create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("a"))
    uid, rv = created["metadata"]["uid"], created["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as exc:
        delete(double, "a", preconditions=client.V1Preconditions(uid="other"))
    assert status_of(exc) == (
        409,
        "Conflict",
        f'Operation cannot be fulfilled on widgets.test.catalog-warden.io "a": Precondition failed: '
        f"UID in precondition: other, UID in object meta: {uid}",
    )
    with pytest.raises(ApiException) as exc:
        delete(double, "a", preconditions=client.V1Preconditions(resource_version="1"))
    assert status_of(exc)[2].endswith(f"ResourceVersion in precondition: 1, ResourceVersion in object meta: {rv}")
    delete(double, "a", preconditions=client.V1Preconditions(uid=uid, resource_version=rv))
    assert get(double, "a") is None


def test_delete_precondition_loses_a_race_while_the_webhook_deliberates(
    make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA
) -> None:
    """The object changes between the precondition check and the write: the delete must fail with 409."""
    config = webhook_config("ValidatingWebhookConfiguration", hook("v.test", "/validate", ["widgets"]))
    double = make_double(config, webhook_base_url=webhook.url, ca_bundle=ca.cert_pem)
    api = objects(double.admin)
    created = api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("a", spec={"n": 1}))
    rv = created["metadata"]["resourceVersion"]

    def concurrent_writer(path: str, review: dict[str, Any]) -> Any:
        if review["request"]["operation"] == "DELETE":
            api.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a", {"spec": {"n": 2}})
        return allow(review)

    webhook.script = concurrent_writer
    with pytest.raises(ApiException) as exc:
        delete(double, "a", preconditions=client.V1Preconditions(resource_version=rv))
    code, reason, message = status_of(exc)
    assert (code, reason) == (409, "Conflict")
    assert message.endswith(f"ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {int(rv) + 1}")
    assert get(double, "a")["spec"] == {"n": 2}


def test_finalizers_keep_the_object_until_the_last_is_removed(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    api.create_namespaced_custom_object(
        GROUP, "v1", "default", "widgets", widget("a", metadata={"finalizers": ["x/a", "x/b"]})
    )
    deleting = delete(double, "a")
    assert deleting["metadata"]["deletionTimestamp"]
    assert get(double, "a")["metadata"]["finalizers"] == ["x/a", "x/b"]
    with pytest.raises(ApiException) as exc:
        api.patch_namespaced_custom_object(
            GROUP, "v1", "default", "widgets", "a", {"metadata": {"finalizers": ["x/a", "x/b", "x/c"]}}
        )
    assert status_of(exc) == (
        422,
        "Invalid",
        'Widget.test.catalog-warden.io "a" is invalid: metadata.finalizers: Forbidden: no new finalizers can be '
        'added if the object is being deleted, found new finalizers []string{"x/c"}',
    )
    api.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a", {"metadata": {"finalizers": ["x/b"]}})
    assert get(double, "a")["metadata"]["deletionTimestamp"] == deleting["metadata"]["deletionTimestamp"]
    api.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a", {"metadata": {"finalizers": None}})
    assert get(double, "a") is None


def test_dry_run_delete_keeps_the_object(double: ApiServerDouble) -> None:
    objects(double.admin).create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("a"))
    delete(double, "a", dry_run=["All"])
    assert get(double, "a") is not None


def owned(name: str, owner: dict[str, Any], finalizers: tuple[str, ...] = ()) -> dict[str, Any]:
    ref = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "blockOwnerDeletion": True,
    }
    return widget(name, metadata={"ownerReferences": [ref], "finalizers": list(finalizers)})


def gc_setup(make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA) -> ApiServerDouble:
    config = webhook_config("ValidatingWebhookConfiguration", hook("v.test", "/validate", ["widgets"], ["DELETE"]))
    return make_double(config, webhook_base_url=webhook.url, ca_bundle=ca.cert_pem)


def deleters(webhook: ScriptedWebhook) -> list[tuple[str, str]]:
    return [(b["request"]["name"], b["request"]["userInfo"]["username"]) for _p, b in webhook.requests]


def test_background_cascade_runs_as_the_garbage_collector(
    make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA
) -> None:
    double = gc_setup(make_double, webhook, ca)
    api = objects(double.admin)
    owner = api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("owner"))
    api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", owned("child", owner))
    delete(double, "owner", propagation_policy="Background")
    eventually(lambda: get(double, "child") is None, what="the child to be collected")
    assert deleters(webhook) == [
        ("owner", "kubernetes-admin"),
        ("child", "system:serviceaccount:kube-system:generic-garbage-collector"),
    ]


def test_foreground_waits_for_dependents(make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA) -> None:
    double = gc_setup(make_double, webhook, ca)
    api = objects(double.admin)
    owner = api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("owner"))
    api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", owned("child", owner, ("hold",)))
    deleting = delete(double, "owner", propagation_policy="Foreground")
    assert deleting["metadata"]["finalizers"] == ["foregroundDeletion"]
    eventually(lambda: get(double, "child")["metadata"].get("deletionTimestamp"), what="the child to be deleting")
    assert get(double, "owner") is not None  # still waiting: the child has a finalizer
    api.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets", "child", {"metadata": {"finalizers": None}})
    eventually(lambda: get(double, "owner") is None, what="the owner to go after its dependents")


def test_orphan_unlinks_dependents(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    owner = api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("owner"))
    api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", owned("child", owner))
    delete(double, "owner", propagation_policy="Orphan")
    eventually(lambda: get(double, "owner") is None, what="the owner to go")
    assert "ownerReferences" not in get(double, "child")["metadata"]


def test_namespace_deletion_cascades_as_the_namespace_controller(
    make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA
) -> None:
    double = gc_setup(make_double, webhook, ca)
    core, api = client.CoreV1Api(double.admin), objects(double.admin)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="team")))
    api.create_namespaced_custom_object(
        GROUP, "v1", "team", "widgets", widget("w", namespace="team", metadata={"finalizers": ["hold"]})
    )
    core.create_namespaced_config_map("team", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="c")))
    terminating = core.delete_namespace("team")
    assert terminating["status"]["phase"] == "Terminating"
    eventually(lambda: double.store.get(("", "configmaps", "team", "c")) is None, what="the ConfigMap to go")
    with pytest.raises(ApiException) as exc:
        api.create_namespaced_custom_object(GROUP, "v1", "team", "widgets", widget("new", namespace="team"))
    assert status_of(exc) == (
        403,
        "Forbidden",
        'widgets.test.catalog-warden.io "new" is forbidden: unable to create new content in namespace team '
        "because it is being terminated",
    )
    assert core.read_namespace("team").status.phase == "Terminating"  # the Widget still has a finalizer
    api.patch_namespaced_custom_object(GROUP, "v1", "team", "widgets", "w", {"metadata": {"finalizers": None}})
    eventually(lambda: double.store.get(("", "namespaces", "", "team")) is None, what="the namespace to go")
    assert ("w", "system:serviceaccount:kube-system:namespace-controller") in deleters(webhook)
