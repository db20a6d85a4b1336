"""CRD conversion through a webhook (strategy Webhook) as apiextensions-apiserver does it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.helpers import GROUP, MakeDouble, objects
from tests.support.apiserver import ApiServerDouble, TestCA
from tests.support.apiserver.scripted_webhook import Reply, ScriptedWebhook

OLD, NEW = f"{GROUP}/v1alpha1", f"{GROUP}/v1alpha2"


def convert_one(obj: dict[str, Any], target: str) -> dict[str, Any]:
    """v1alpha1 spec.size <-> v1alpha2 spec.dimensions.size."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = target
    spec = out.setdefault("spec", {})
    if target == NEW and "size" in spec:
        spec["dimensions"] = {"size": spec.pop("size")}
    if target == OLD and "dimensions" in spec:
        spec["size"] = spec.pop("dimensions")["size"]
    return out


def converter(path: str, review: dict[str, Any]) -> Reply:
    request = review["request"]
    converted = [convert_one(o, request["desiredAPIVersion"]) for o in request["objects"]]
    return Reply(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "response": {"uid": request["uid"], "result": {"status": "Success"}, "convertedObjects": converted},
        }
    )


def gizmo(name: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": OLD,
        "kind": "Gizmo",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"size": size},
    }


@pytest.fixture
def converting(make_double: MakeDouble, webhook: ScriptedWebhook, ca: TestCA) -> ApiServerDouble:
    webhook.script = converter
    return make_double(webhook_base_url=webhook.url, ca_bundle=ca.cert_pem)


def reviews(webhook: ScriptedWebhook) -> list[tuple[str, list[str]]]:
    return [
        (b["request"]["desiredAPIVersion"], [o["apiVersion"] for o in b["request"]["objects"]])
        for p, b in webhook.requests
        if p == "/convert"
    ]


def test_writes_in_an_old_version_are_stored_in_the_storage_version(
    converting: ApiServerDouble, webhook: ScriptedWebhook
) -> None:
    api = objects(converting.admin)
    created = api.create_namespaced_custom_object(GROUP, "v1alpha1", "default", "gizmos", gizmo("a", 3))
    assert (created["apiVersion"], created["spec"]) == (OLD, {"size": 3})
    stored = converting.store.get((GROUP, "gizmos", "default", "a"))
    assert (stored["apiVersion"], stored["spec"]) == (NEW, {"dimensions": {"size": 3}})
    assert reviews(webhook) == [(NEW, [OLD]), (OLD, [NEW])]


def test_reads_in_the_storage_version_skip_the_webhook_and_lists_convert_in_one_review(
    converting: ApiServerDouble, webhook: ScriptedWebhook
) -> None:
    api = objects(converting.admin)
    for name, size in (("a", 1), ("b", 2)):
        api.create_namespaced_custom_object(GROUP, "v1alpha2", "default", "gizmos", convert_one(gizmo(name, size), NEW))
    assert api.get_namespaced_custom_object(GROUP, "v1alpha2", "default", "gizmos", "a")["spec"] == {
        "dimensions": {"size": 1}
    }
    assert reviews(webhook) == []
    listed = api.list_namespaced_custom_object(GROUP, "v1alpha1", "default", "gizmos")
    assert [i["spec"] for i in listed["items"]] == [{"size": 1}, {"size": 2}]
    assert reviews(webhook) == [(OLD, [NEW, NEW])]


def test_only_label_and_annotation_edits_survive(converting: ApiServerDouble, webhook: ScriptedWebhook) -> None:
    api = objects(converting.admin)
    api.create_namespaced_custom_object(GROUP, "v1alpha2", "default", "gizmos", convert_one(gizmo("a", 1), NEW))

    def meddling(path: str, review: dict[str, Any]) -> Reply:
        reply = converter(path, review)
        for obj in reply.body["response"]["convertedObjects"]:
            obj["metadata"]["labels"] = {"converted": "yes"}
            obj["metadata"]["finalizers"] = ["sneaky"]
        return reply

    webhook.script = meddling
    got = api.get_namespaced_custom_object(GROUP, "v1alpha1", "default", "gizmos", "a")
    assert (got["metadata"]["labels"], "finalizers" in got["metadata"]) == ({"converted": "yes"}, False)


FAILED = "Internal error occurred: conversion webhook for test.catalog-warden.io/v1alpha2, Kind=Gizmo failed: "


def broken_uid(review: dict[str, Any], reply: Reply) -> None:
    reply.body["response"]["uid"] = "other"


def broken_count(review: dict[str, Any], reply: Reply) -> None:
    reply.body["response"]["convertedObjects"] = []


def broken_name(review: dict[str, Any], reply: Reply) -> None:
    reply.body["response"]["convertedObjects"][0]["metadata"]["name"] = "renamed"


def broken_result(review: dict[str, Any], reply: Reply) -> None:
    reply.body["response"]["result"] = {"status": "Failure", "message": "cannot convert size"}


@pytest.mark.parametrize(
    ("breakage", "reason"),
    [
        (broken_uid, 'expected response.uid="{uid}", got "other"'),
        (broken_count, "returned 0 objects, expected 1"),
        (broken_name, "name changed from 'a' to 'renamed'"),
        (broken_result, "cannot convert size"),
    ],
)
def test_bad_conversion_responses_fail_the_read(
    converting: ApiServerDouble, webhook: ScriptedWebhook, breakage: Any, reason: str
) -> None:
    api = objects(converting.admin)
    api.create_namespaced_custom_object(GROUP, "v1alpha2", "default", "gizmos", convert_one(gizmo("a", 1), NEW))

    def broken(path: str, review: dict[str, Any]) -> Reply:
        reply = converter(path, review)
        breakage(review, reply)
        return reply

    webhook.script = broken
    with pytest.raises(ApiException) as exc:
        api.get_namespaced_custom_object(GROUP, "v1alpha1", "default", "gizmos", "a")
    uid = webhook.requests[-1][1]["request"]["uid"]
    body = json.loads(exc.value.body)
    assert (body["code"], body["reason"], body["message"]) == (500, "InternalError", FAILED + reason.format(uid=uid))


def test_conversion_strategy_none_only_rewrites_api_version(double: ApiServerDouble) -> None:
    api = objects(double.admin)
    api.create_namespaced_custom_object(
        GROUP,
        "v1",
        "default",
        "widgets",
        {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"a": 1}},
    )
    got = api.get_namespaced_custom_object(GROUP, "v2", "default", "widgets", "w")
    assert (got["apiVersion"], got["spec"]) == (f"{GROUP}/v2", {"a": 1})
