"""Builders for AdmissionReview requests as kube-apiserver sends them."""

from __future__ import annotations

import uuid
from typing import Any

RESOURCES = {"Release": "releases", "ComponentVersion": "componentversions", "Pod": "pods"}


def review(
    operation: str,
    obj: dict[str, Any] | None,
    old: dict[str, Any] | None = None,
    *,
    group: str = "solar.opendefense.cloud",
    version: str = "v1alpha1",
    kind: str = "Release",
    user: str = "alice@example.com",
    dry_run: bool = False,
    uid: str | None = None,
) -> dict[str, Any]:
    subject = obj or old or {}
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": RESOURCES.get(kind, kind.lower() + "s")}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid or str(uuid.uuid4()),
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": subject.get("metadata", {}).get("name", ""),
            "namespace": subject.get("metadata", {}).get("namespace", ""),
            "operation": operation,
            "userInfo": {"username": user, "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": old,
            "options": None,
            "dryRun": dry_run,
        },
    }


def release(cv: str, name: str = "web", namespace: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "Release",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"componentVersionRef": {"name": cv}, **spec},
    }
