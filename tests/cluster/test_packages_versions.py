"""PackageRevision CREATE by version through kube-apiserver, the shipped webhooks and our CRD.

This control plane runs no Porch, so the packages family is standalone (``tests/support/controlplane``
installs ``components/standalone-packages``): v1alpha1 requests are converted to the v1alpha2 storage
version by our conversion webhook. As Porch's v1alpha1 strategy does, a v1alpha1 CREATE is a Draft
only, and the mutating path never adds a latest-revision label to it (DESIGN.md section 5).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from policies.packages import FINALIZER, LATEST_LABEL_V1ALPHA1, LATEST_LABEL_V1ALPHA2, MSG_CREATE_LIFECYCLE_V1ALPHA1
from tests.cluster.test_denials import CREATING, USER, USER_GROUPS, denied, stderr_of
from tests.support.controlplane.cluster import ServerProcess
from tests.support.controlplane.fixtures import Kubectl
from webhook.kube.client import Kube


@pytest.fixture
def alice(user_kubeconfig: Callable[..., Path]) -> Path:
    return user_kubeconfig(USER, USER_GROUPS)


def v1alpha1(ns: str, lifecycle: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "repository": "blueprints", "packageName": "nginx", "workspaceName": "v1",
        "tasks": [{"type": "init", "init": {"description": "nginx"}}],
    }  # fmt: skip
    if lifecycle is not None:
        spec["lifecycle"] = lifecycle
    return {
        "apiVersion": "porch.kpt.dev/v1alpha1",
        "kind": "PackageRevision",
        "metadata": {"name": "blueprints.nginx.v1", "namespace": ns},
        "spec": spec,
    }


def test_a_v1alpha1_create_as_proposed_is_denied(server: ServerProcess, kubectl: Kubectl, alice: Path, ns: str) -> None:
    done = kubectl("create", "-f", "-", kubeconfig=alice, input=json.dumps(v1alpha1(ns, "Proposed")))

    message = MSG_CREATE_LIFECYCLE_V1ALPHA1.format(value="Proposed")
    ref = f"{ns}/blueprints.nginx.v1"
    expected = denied("packages.validate.catalog-warden.io", "PackageRevision", ref, "packages.revision-lifecycle",
                      message, CREATING)  # fmt: skip
    assert stderr_of(done).splitlines()[-1] == expected


def test_a_v1alpha1_create_carries_no_latest_revision_label(server: ServerProcess, admin: Kube, ns: str) -> None:
    """A dry run: the mutating webhook, the conversion and the schema all run, nothing is stored."""
    path = f"/apis/porch.kpt.dev/v1alpha1/namespaces/{ns}/packagerevisions"
    created = admin.request("POST", path, query=[("dryRun", "All")], body=v1alpha1(ns, None))

    labels = created["metadata"].get("labels") or {}
    assert LATEST_LABEL_V1ALPHA1 not in labels and LATEST_LABEL_V1ALPHA2 not in labels
    assert created["spec"]["lifecycle"] == "Draft"
    assert created["metadata"]["finalizers"] == [FINALIZER], "standalone: what our CRD stores"
