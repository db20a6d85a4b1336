"""Builders and polling shared by the double's tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubernetes import client

from tests.support.apiserver import ApiServerDouble

GROUP = "test.catalog-warden.io"
MakeDouble = Callable[..., ApiServerDouble]


def webhook_config(kind: str, *hooks: dict[str, Any], name: str = "test") -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name, "annotations": {"cert-manager.io/inject-ca-from": "catalog-warden/serving"}},
        "webhooks": list(hooks),
    }


def hook(
    name: str, path: str, resources: list[str], operations: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    """One webhook entry with the shape our manifests use; `extra` overrides any field."""
    entry = {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "matchPolicy": "Equivalent",
        "failurePolicy": "Fail",
        "timeoutSeconds": 2,
        "clientConfig": {"service": {"name": "catalog-warden", "namespace": "catalog-warden", "path": path}},
        "rules": [
            {
                "apiGroups": [GROUP],
                "apiVersions": ["v1"],
                "operations": operations or ["CREATE", "UPDATE", "DELETE"],
                "resources": resources,
                "scope": "*",
            }
        ],
    }
    entry.update(extra)
    return entry


def widget(name: str, namespace: str = "default", version: str = "v1", **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace, **fields.pop("metadata", {})},
        **fields,
    }


def objects(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


def eventually(condition: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll `condition` until it returns a truthy value or the deadline passes (then fail with `what`)."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
