"""Structural schemas: unknown fields pruned, defaults applied, OpenAPI validation answered with 422."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.helpers import GROUP, objects
from tests.support.apiserver import ApiServerDouble


def sprocket(spec: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Sprocket", "metadata": {"name": "s"}, "spec": spec, **top}


def create(double: ApiServerDouble, body: dict[str, Any]) -> dict[str, Any]:
    return objects(double.admin).create_namespaced_custom_object(GROUP, "v1", "default", "sprockets", body)


def test_unknown_fields_are_pruned_and_defaults_applied(double: ApiServerDouble) -> None:
    created = create(double, sprocket({"size": 2, "bogus": 1, "extra": {"free": {"form": True}}}, junk={"x": 1}))
    assert created["spec"] == {"size": 2, "mode": "slow", "extra": {"free": {"form": True}}}
    assert "junk" not in created


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({}, "spec.size: Required value"),
        ({"size": "big"}, 'spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"'),
        ({"size": 0}, "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"),
        ({"size": 1, "mode": "warp"}, 'spec.mode: Unsupported value: "warp": supported values: "fast", "slow"'),
        ({"size": 1, "name": "A1"}, "spec.name: Invalid value: \"A1\": spec.name in body should match '^[a-z]+$'"),
        (
            {"size": 1, "labels": {"a": 1}},
            'spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer"',
        ),
        (
            {"mode": "warp"},
            '[spec.size: Required value, spec.mode: Unsupported value: "warp": supported values: "fast", "slow"]',
        ),
    ],
)
def test_schema_violations_are_invalid(double: ApiServerDouble, spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiException) as exc:
        create(double, sprocket(spec))
    body = json.loads(exc.value.body)
    assert (body["code"], body["reason"], body["message"]) == (
        422,
        "Invalid",
        f'Sprocket.test.catalog-warden.io "s" is invalid: {message}',
    )


def test_updates_are_validated_too(double: ApiServerDouble) -> None:
    create(double, sprocket({"size": 1}))
    with pytest.raises(ApiException) as exc:
        objects(double.admin).patch_namespaced_custom_object(
            GROUP, "v1", "default", "sprockets", "s", {"spec": {"size": None}}
        )
    assert (
        json.loads(exc.value.body)["message"]
        == 'Sprocket.test.catalog-warden.io "s" is invalid: spec.size: Required value'
    )
