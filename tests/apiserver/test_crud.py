"""Create, get, list, update, patch through the official client: the double's storage semantics."""

from __future__ import annotations

import re

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.apiserver.helpers import GROUP, MakeDouble, objects, widget
from tests.support.apiserver import ApiServerDouble


def error(exc: pytest.ExceptionInfo[ApiException]) -> tuple[int, str, str]:
    import json

    body = json.loads(exc.value.body)
    return body["code"], body["reason"], body["message"]


def test_create_fills_server_fields_and_counts_resource_versions(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    first = api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("a", spec={"size": 1}))
    second = api.create_namespaced_custom_object(
        GROUP, "v1", "default", "widgets", {**widget(""), "metadata": {"generateName": "w-"}}
    )
    assert re.fullmatch(r"[0-9a-f-]{36}", first["metadata"]["uid"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", first["metadata"]["creationTimestamp"])
    assert first["metadata"]["generation"] == 1
    assert int(second["metadata"]["resourceVersion"]) == int(first["metadata"]["resourceVersion"]) + 1
    assert re.fullmatch(r"w-[bcdfghjklmnpqrstvwxz2456789]{5}", second["metadata"]["name"])


def test_create_twice_is_already_exists(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("a"))
    with pytest.raises(ApiException) as exc:
        api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("a"))
    assert error(exc) == (409, "AlreadyExists", 'widgets.test.catalog-warden.io "a" already exists')


def test_get_missing_is_not_found_and_namespace_must_exist(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    with pytest.raises(ApiException) as exc:
        api.get_namespaced_custom_object(GROUP, "v1", "default", "widgets", "nope")
    assert error(exc) == (404, "NotFound", 'widgets.test.catalog-warden.io "nope" not found')
    with pytest.raises(ApiException) as exc:
        api.create_namespaced_custom_object(GROUP, "v1", "elsewhere", "widgets", widget("a", namespace="elsewhere"))
    assert error(exc) == (404, "NotFound", 'namespaces "elsewhere" not found')


def test_cluster_scoped_and_every_served_version(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    gadget = {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"x": 1}}
    created = api.create_cluster_custom_object(GROUP, "v1", "gadgets", gadget)
    assert "namespace" not in created["metadata"]
    assert api.get_cluster_custom_object(GROUP, "v1", "gadgets", "g")["spec"] == {"x": 1}
    api.create_namespaced_custom_object(GROUP, "v2", "default", "widgets", widget("b", version="v2"))
    assert api.get_namespaced_custom_object(GROUP, "v1", "default", "widgets", "b")["apiVersion"] == f"{GROUP}/v1"
    stored = double.store.get((GROUP, "widgets", "default", "b"))
    assert stored is not None and stored["apiVersion"] == f"{GROUP}/v1"  # storage version


def test_list_selectors_and_resource_version(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    labels = {"a": {"env": "prod", "tier": "web"}, "b": {"env": "dev"}, "c": {"tier": "db"}}
    for name, label_set in labels.items():
        api.create_namespaced_custom_object(
            GROUP, "v1", "default", "widgets", widget(name, metadata={"labels": label_set})
        )

    def names(**kwargs: str) -> list[str]:
        return [
            i["metadata"]["name"]
            for i in api.list_namespaced_custom_object(GROUP, "v1", "default", "widgets", **kwargs)["items"]
        ]

    assert names(label_selector="env=prod") == ["a"]
    assert names(label_selector="env!=prod") == ["b", "c"]
    assert names(label_selector="env in (prod, dev)") == ["a", "b"]
    assert names(label_selector="env notin (prod)") == ["b", "c"]
    assert names(label_selector="tier") == ["a", "c"]
    assert names(label_selector="!tier") == ["b"]
    assert names(label_selector="env,tier=web") == ["a"]
    assert names(field_selector="metadata.name=b") == ["b"]
    assert names(field_selector="metadata.name!=b,metadata.namespace=default") == ["a", "c"]
    listed = api.list_namespaced_custom_object(GROUP, "v1", "default", "widgets")
    assert listed["metadata"]["resourceVersion"] == str(double.resource_version)
    assert listed["kind"] == "WidgetList"
    with pytest.raises(ApiException) as exc:
        names(field_selector="spec.size=1")
    assert error(exc) == (
        400,
        "BadRequest",
        '"spec.size" is not a known field selector: only "metadata.name", "metadata.namespace"',
    )


def test_list_pages_with_limit_and_continue(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    for name in ("a", "b", "c"):
        api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget(name))
    page = api.list_namespaced_custom_object(GROUP, "v1", "default", "widgets", limit=2)
    rest = api.list_namespaced_custom_object(
        GROUP, "v1", "default", "widgets", limit=2, _continue=page["metadata"]["continue"]
    )
    assert [i["metadata"]["name"] for i in page["items"] + rest["items"]] == ["a", "b", "c"]
    assert "continue" not in rest["metadata"]


def test_update_with_stale_resource_version_conflicts(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    created = api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("a", spec={"size": 1}))
    api.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a", {"spec": {"size": 2}})
    created["spec"]["size"] = 3
    with pytest.raises(ApiException) as exc:
        api.replace_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a", created)
    assert error(exc) == (
        409,
        "Conflict",
        'Operation cannot be fulfilled on widgets.test.catalog-warden.io "a": the object has been modified; '
        "please apply your changes to the latest version and try again",
    )


def test_generation_bumps_on_spec_only_and_status_subresource_rules(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    api.create_namespaced_custom_object(
        GROUP, "v1", "default", "widgets", widget("a", spec={"size": 1}, status={"x": 1})
    )
    current = api.get_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a")
    assert "status" not in current  # status is dropped on create when the subresource is enabled
    current["metadata"]["labels"] = {"l": "1"}
    current["status"] = {"ignored": True}
    after_meta = api.replace_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a", current)
    assert (after_meta["metadata"]["generation"], "status" in after_meta) == (1, False)
    after_status = api.patch_namespaced_custom_object_status(
        GROUP, "v1", "default", "widgets", "a", {"status": {"ready": True}, "spec": {"size": 99}}
    )
    assert (after_status["metadata"]["generation"], after_status["spec"], after_status["status"]) == (
        1,
        {"size": 1},
        {"ready": True},
    )
    after_spec = api.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a", {"spec": {"size": 2}})
    assert (after_spec["metadata"]["generation"], after_spec["status"]) == (2, {"ready": True})


def test_json_patch_and_no_op_update(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("a", spec={"items": [1, 2]}))
    patched = api.patch_namespaced_custom_object(
        GROUP,
        "v1",
        "default",
        "widgets",
        "a",
        [{"op": "add", "path": "/spec/items/-", "value": 3}],
        _content_type="application/json-patch+json",
    )
    assert patched["spec"]["items"] == [1, 2, 3]
    again = api.replace_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a", patched)
    assert again["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as exc:
        api.patch_namespaced_custom_object(
            GROUP,
            "v1",
            "default",
            "widgets",
            "a",
            [{"op": "test", "path": "/spec/items/0", "value": 9}],
            _content_type="application/json-patch+json",
        )
    assert exc.value.status == 422


def test_builtins_configmap_secret_lease_event(double: ApiServerDouble) -> None:
    core = client.CoreV1Api(double.admin)
    secret = core.create_namespaced_secret(
        "default", client.V1Secret(metadata=client.V1ObjectMeta(name="s"), string_data={"k": "v"})
    )
    assert (secret.data, secret.string_data, secret.type) == ({"k": "dg=="}, None, "Opaque")
    cm = core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"a": "1"}})
    assert cm.metadata.generation is None
    patched = core.patch_namespaced_config_map("c", "default", {"data": {"b": "2"}})
    assert patched.data == {"a": "1", "b": "2"}
    leases = client.CoordinationV1Api(double.admin)
    lease = leases.create_namespaced_lease(
        "default",
        client.V1Lease(
            metadata=client.V1ObjectMeta(name="l"),
            spec=client.V1LeaseSpec(holder_identity="me", lease_duration_seconds=5),
        ),
    )
    lease.spec.holder_identity = "you"
    assert leases.replace_namespaced_lease("l", "default", lease).spec.holder_identity == "you"
    event = core.create_namespaced_event(
        "default",
        client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name="e-"),
            involved_object=client.V1ObjectReference(kind="Widget", name="a"),
            reason="Deleted",
            message="m",
            type="Normal",
        ),
    )
    assert core.list_namespaced_event("default").items[0].metadata.name == event.metadata.name
    status = core.delete_namespaced_config_map("c", "default")
    assert (status["kind"], status["status"]) == ("Status", "Success")


def test_namespaces_get_their_name_label(double: ApiServerDouble) -> None:
    core = client.CoreV1Api(double.admin)
    created = core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="team", labels={"x": "1"})))
    assert created.metadata.labels == {"x": "1", "kubernetes.io/metadata.name": "team"}
    assert (created.status.phase, created.spec.finalizers) == ("Active", ["kubernetes"])


def test_dry_run_create_and_patch_persist_nothing(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    before = double.resource_version
    api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("a"), dry_run="All")
    assert double.resource_version == before
    with pytest.raises(ApiException):
        api.get_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a")
    api.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("a", spec={"s": 1}))
    result = api.patch_namespaced_custom_object(
        GROUP, "v1", "default", "widgets", "a", {"spec": {"s": 2}}, dry_run="All"
    )
    assert result["spec"] == {"s": 2}
    assert api.get_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a")["spec"] == {"s": 1}


def test_unknown_token_is_unauthorized(double: ApiServerDouble) -> None:
    configuration = double.configuration("someone")
    configuration.api_key = {"authorization": "not-a-token"}
    with pytest.raises(ApiException) as exc:
        client.CoreV1Api(client.ApiClient(configuration)).list_namespace()
    assert exc.value.status == 401


def test_discovery_serves_the_dynamic_client(double: ApiServerDouble) -> None:
    from kubernetes.dynamic import DynamicClient

    dynamic = DynamicClient(double.admin)
    widgets = dynamic.resources.get(api_version=f"{GROUP}/v1", kind="Widget")
    widgets.create(body=widget("d"), namespace="default")
    assert widgets.get(name="d", namespace="default").metadata.name == "d"
    assert list(widgets.subresources) == ["status"]
    assert dynamic.resources.get(api_version="coordination.k8s.io/v1", kind="Lease").namespaced is True


def test_names_must_be_dns_subdomains_and_requests_are_logged(double: ApiServerDouble) -> None:
    with pytest.raises(ApiException) as exc:
        objects(double.admin).create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("Bad_Name"))
    code, reason, message = error(exc)
    assert (code, reason) == (422, "Invalid")
    assert message.startswith(
        'Widget.test.catalog-warden.io "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
        "a lowercase RFC 1123 subdomain must consist of"
    )
    last = double.requests[-1]
    assert (last.method, last.path, last.user) == (
        "POST",
        "/apis/test.catalog-warden.io/v1/namespaces/default/widgets",
        "kubernetes-admin",
    )


def test_tls_double_serves_https_to_configured_clients(make_double: MakeDouble) -> None:
    double = make_double(tls=True)
    assert double.url.startswith("https://127.0.0.1:")
    names = [n.metadata.name for n in client.CoreV1Api(double.admin).list_namespace().items]
    assert names == ["default", "kube-system"]
    listed = objects(double.admin).list_cluster_custom_object(GROUP, "v1", "widgets")
    assert listed["items"] == []
