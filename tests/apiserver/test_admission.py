"""Admission webhooks called over TLS as kube-apiserver calls them, against a scripted webhook server."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.apiserver.helpers import GROUP, MakeDouble, hook, objects, webhook_config, widget
from tests.support.apiserver import ApiServerDouble, TestCA
from tests.support.apiserver.scripted_webhook import Reply, ScriptedWebhook, allow, deny, patch, review_response

VALIDATING = "ValidatingWebhookConfiguration"
MUTATING = "MutatingWebhookConfiguration"


def status_of(exc: pytest.ExceptionInfo[ApiException]) -> tuple[int, str, str]:
    body = json.loads(exc.value.body)
    return body["code"], body.get("reason", ""), body["message"]


def start(make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA, *configs: dict[str, Any]) -> ApiServerDouble:
    return make_double(*configs, webhook_base_url=webhook.url, ca_bundle=ca.cert_pem)


def create(double: ApiServerDouble, obj: dict[str, Any], client_: client.ApiClient | None = None) -> dict[str, Any]:
    api = objects(client_ or double.admin)
    return api.create_namespaced_custom_object(GROUP, "v1", obj["metadata"]["namespace"], "widgets", obj)


def test_allow_passes_warnings_through(make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA) -> None:
    double = start(make_double, webhook, ca, webhook_config(VALIDATING, hook("v.test", "/validate", ["widgets"])))
    webhook.script = lambda path, review: allow(review, "mind the gap")
    result = objects(double.admin).create_namespaced_custom_object_with_http_info(
        GROUP, "v1", "default", "widgets", widget("a")
    )
    data, code, headers = result if isinstance(result, tuple) else (result.data, result.status_code, result.headers)
    assert (code, data["metadata"]["name"]) == (201, "a")
    assert headers.get("Warning") == '299 - "mind the gap"'
    assert [p for p, _b in webhook.requests] == ["/validate"]


def test_deny_is_rejected_with_the_webhooks_code_and_message(
    make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA
) -> None:
    double = start(make_double, webhook, ca, webhook_config(VALIDATING, hook("v.test", "/validate", ["widgets"])))
    webhook.script = lambda path, review: deny(review, "Widget default/a is red", code=403)
    with pytest.raises(ApiException) as exc:
        create(double, widget("a"))
    assert status_of(exc) == (
        403,
        "Forbidden",
        'admission webhook "v.test" denied the request: Widget default/a is red',
    )
    webhook.script = lambda path, review: review_response(review, allowed=False, status={"code": 200})
    with pytest.raises(ApiException) as exc:
        create(double, widget("a"))
    assert status_of(exc) == (400, "", 'admission webhook "v.test" denied the request without explanation')
    assert double.store.get((GROUP, "widgets", "default", "a")) is None


def test_review_request_is_built_exactly(make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA) -> None:
    double = start(make_double, webhook, ca, webhook_config(VALIDATING, hook("v.test", "/validate", ["widgets"])))
    observer = double.api_client("system:serviceaccount:solar-system:solar-discovery", ["discoverers"])
    created = create(double, widget("a", spec={"n": 1}), observer)
    objects(double.admin).delete_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a", dry_run="All")
    (_p1, first), (_p2, second) = webhook.requests
    request = first["request"]
    assert (first["apiVersion"], first["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    assert {k: v for k, v in request.items() if k not in ("uid", "object")} == {
        "kind": {"group": GROUP, "version": "v1", "kind": "Widget"},
        "resource": {"group": GROUP, "version": "v1", "resource": "widgets"},
        "requestKind": {"group": GROUP, "version": "v1", "kind": "Widget"},
        "requestResource": {"group": GROUP, "version": "v1", "resource": "widgets"},
        "name": "a",
        "namespace": "default",
        "operation": "CREATE",
        "userInfo": {
            "username": "system:serviceaccount:solar-system:solar-discovery",
            "groups": [
                "discoverers",
                "system:serviceaccounts",
                "system:serviceaccounts:solar-system",
                "system:authenticated",
            ],
        },
        "oldObject": None,
        "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }
    assert request["object"]["metadata"]["uid"] == created["metadata"]["uid"]
    delete = second["request"]
    assert (delete["operation"], delete["object"], delete["dryRun"]) == ("DELETE", None, True)
    assert delete["oldObject"]["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert delete["options"] == {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"]}


def test_mutating_patches_apply_serially_before_validation(
    make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA
) -> None:
    mutating = webhook_config(
        MUTATING,
        hook("m1.test", "/mutate/1", ["widgets"], ["CREATE"], failurePolicy="Ignore"),
        hook("m2.test", "/mutate/2", ["widgets"], ["CREATE"], failurePolicy="Ignore"),
    )
    validating = webhook_config(VALIDATING, hook("v.test", "/validate", ["widgets"]))
    double = start(make_double, webhook, ca, mutating, validating)

    def script(path: str, review: dict[str, Any]) -> Reply:
        obj = review["request"]["object"]
        if path == "/mutate/1":
            return patch(review, [{"op": "add", "path": "/spec", "value": {"from": "m1"}}])
        if path == "/mutate/2":
            assert obj["spec"] == {"from": "m1"}
            return patch(
                review, [{"op": "add", "path": "/metadata/labels", "value": {"m2": "seen-" + obj["spec"]["from"]}}]
            )
        assert obj["metadata"]["labels"] == {"m2": "seen-m1"}
        return allow(review)

    webhook.script = script
    created = create(double, widget("a"))
    assert (created["spec"], created["metadata"]["labels"]) == ({"from": "m1"}, {"m2": "seen-m1"})
    assert [p for p, _b in webhook.requests] == ["/mutate/1", "/mutate/2", "/validate"]
    assert webhook.errors == []


FAIL_ON_DOWN = (
    'Internal error occurred: failed calling webhook "v.test": failed to call webhook: '
    'Post "{url}/validate?timeout=2s": '
)


def test_failure_policy_with_the_webhook_down(make_double: MakeDouble, ca: TestCA) -> None:
    with ScriptedWebhook(ca) as gone:
        url = gone.url
    closed = webhook_config(VALIDATING, hook("v.test", "/validate", ["widgets"], failurePolicy="Fail"))
    double = make_double(closed, webhook_base_url=url, ca_bundle=ca.cert_pem)
    with pytest.raises(ApiException) as exc:
        create(double, widget("a"))
    host = url.removeprefix("https://")
    assert status_of(exc) == (
        500,
        "InternalError",
        FAIL_ON_DOWN.format(url=url) + f"dial tcp {host}: connect: connection refused",
    )
    opened = webhook_config(VALIDATING, hook("v.test", "/validate", ["widgets"], failurePolicy="Ignore"))
    double = make_double(opened, webhook_base_url=url, ca_bundle=ca.cert_pem)
    assert create(double, widget("a"))["metadata"]["name"] == "a"


def test_timeout_is_a_call_error(make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA) -> None:
    config = webhook_config(VALIDATING, hook("v.test", "/validate", ["widgets"], timeoutSeconds=1))
    double = start(make_double, webhook, ca, config)
    release = threading.Event()

    def slow(path: str, review: dict[str, Any]) -> Reply:
        release.wait(5)
        return allow(review)

    webhook.script = slow
    began = time.monotonic()
    with pytest.raises(ApiException) as exc:
        create(double, widget("a"))
    release.set()
    assert time.monotonic() - began < 4
    code, _reason, message = status_of(exc)
    assert (code, message) == (
        500,
        f'Internal error occurred: failed calling webhook "v.test": failed to call webhook: '
        f'Post "{webhook.url}/validate?timeout=1s": context deadline exceeded',
    )


def test_wrong_ca_fails_tls_verification(make_double: MakeDouble, webhook: ScriptedWebhook) -> None:
    other = TestCA("someone else")
    double = make_double(
        webhook_config(VALIDATING, hook("v.test", "/validate", ["widgets"])),
        webhook_base_url=webhook.url,
        ca_bundle=other.cert_pem,
    )
    with pytest.raises(ApiException) as exc:
        create(double, widget("a"))
    assert status_of(exc)[2].endswith(
        "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    )
    assert webhook.requests == []


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (
            lambda r: Reply({**allow(r).body, "response": {"uid": "other", "allowed": True}}),
            'expected response.uid="{uid}", got "other"',
        ),
        (
            lambda r: Reply({**allow(r).body, "apiVersion": "admission.k8s.io/v1beta1"}),
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, "
            "got admission.k8s.io/v1beta1, Kind=AdmissionReview",
        ),
        (lambda r: patch(r, []), "validating webhooks may not return patches"),
        (
            lambda r: Reply({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
            "webhook response was absent",
        ),
    ],
)
def test_invalid_responses_are_call_errors(
    make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA, reply: Any, problem: str
) -> None:
    double = start(make_double, webhook, ca, webhook_config(VALIDATING, hook("v.test", "/validate", ["widgets"])))
    webhook.script = lambda path, review: reply(review)
    with pytest.raises(ApiException) as exc:
        create(double, widget("a"))
    uid = webhook.requests[-1][1]["request"]["uid"]
    assert status_of(exc) == (
        500,
        "InternalError",
        'Internal error occurred: failed calling webhook "v.test": received invalid webhook response: '
        + problem.format(uid=uid),
    )


def test_a_patch_on_delete_is_an_internal_error_even_under_ignore(
    make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA
) -> None:
    config = webhook_config(MUTATING, hook("m.test", "/mutate", ["widgets"], ["DELETE"], failurePolicy="Ignore"))
    double = start(make_double, webhook, ca, config)
    create(double, widget("a"))
    webhook.script = lambda path, review: patch(review, [{"op": "add", "path": "/x", "value": 1}])
    with pytest.raises(ApiException) as exc:
        objects(double.admin).delete_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a")
    assert status_of(exc) == (
        500,
        "InternalError",
        'Internal error occurred: admission webhook "m.test" attempted to modify the object, which is not '
        "supported for this operation",
    )


def test_rules_match_subresources_scope_and_namespace_selector(
    make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA
) -> None:
    excluded = {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]
    }
    config = webhook_config(
        VALIDATING,
        hook("main.test", "/main", ["widgets"], ["UPDATE"], namespaceSelector=excluded),
        hook("status.test", "/status", ["widgets/status"], ["UPDATE"]),
        hook(
            "cluster.test",
            "/cluster",
            ["*"],
            ["CREATE"],
            rules=[
                {
                    "apiGroups": ["*"],
                    "apiVersions": ["*"],
                    "operations": ["CREATE"],
                    "resources": ["*"],
                    "scope": "Cluster",
                }
            ],
        ),
    )
    double = start(make_double, webhook, ca, config)
    api = objects(double.admin)
    for namespace in ("default", "kube-system"):
        create(double, widget("a", namespace=namespace))
        api.patch_namespaced_custom_object(GROUP, "v1", namespace, "widgets", "a", {"spec": {"x": 1}})
    api.patch_namespaced_custom_object_status(GROUP, "v1", "default", "widgets", "a", {"status": {"ok": True}})
    api.create_cluster_custom_object(
        GROUP, "v1", "gadgets", {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    )
    calls = [(p, b["request"].get("namespace", ""), b["request"].get("subResource")) for p, b in webhook.requests]
    assert calls == [("/main", "default", None), ("/status", "default", "status"), ("/cluster", "", None)]


def test_equivalent_match_converts_to_a_version_the_rule_names(
    make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA
) -> None:
    double = start(make_double, webhook, ca, webhook_config(VALIDATING, hook("v.test", "/validate", ["widgets"])))
    objects(double.admin).create_namespaced_custom_object(GROUP, "v2", "default", "widgets", widget("a", version="v2"))
    request = webhook.requests[0][1]["request"]
    assert (request["kind"]["version"], request["requestKind"]["version"], request["object"]["apiVersion"]) == (
        "v1",
        "v2",
        f"{GROUP}/v1",
    )


def test_identity_is_the_clients_user(make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA) -> None:
    double = start(make_double, webhook, ca, webhook_config(VALIDATING, hook("v.test", "/validate", ["widgets"])))
    webhook.script = lambda path, review: (
        deny(review, "observers may not delete")
        if review["request"]["userInfo"]["username"].endswith(":solar-discovery")
        else allow(review)
    )
    create(double, widget("a"))
    observer = double.api_client("system:serviceaccount:solar-system:solar-discovery")
    with pytest.raises(ApiException) as exc:
        objects(observer).delete_namespaced_custom_object(GROUP, "v1", "default", "widgets", "a")
    assert status_of(exc)[2] == 'admission webhook "v.test" denied the request: observers may not delete'
