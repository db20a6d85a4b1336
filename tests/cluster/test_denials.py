"""One denial per family through kube-apiserver and the shipped webhook configurations, read as a
user reads it: the machine's kubectl with the user's own kubeconfig (a client certificate).

The ComponentVersion's availability and the chart are written by the sidecar's ServiceAccount
(its token, its shipped RBAC), as the sidecar would write them; the server decides from its
informer cache, so the test waits, by dry-run requests, until the cache has caught up.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from policies.catalog import MSG_CV_UNAVAILABLE
from policies.charts import MSG_FORBIDDEN
from policies.charts_naming import helm_cluster_addon_chart_name
from policies.packages import MSG_CREATE_LIFECYCLE
from tests.support.controlplane.cluster import ServerProcess, wait_for
from tests.support.controlplane.fixtures import Kubectl
from webhook.kube.client import ApiError, Kube

USER = "alice"
USER_GROUPS = ("developers", "system:masters")
"""A human with every RBAC right: the webhook, not authorization, is what must stop her."""

DENIED = (
    'Error from server (Forbidden): {when}admission webhook "{hook}" denied the request: '
    "{kind} {ref} denied by {rule}: {message}"
)
"""What kubectl prints for a webhook's denial (``when``: kubectl create's ``error when creating "STDIN": ``)."""
CREATING = 'error when creating "STDIN": '

MISSING_SINCE = "2026-11-29T10:00:00Z"
MISSING_DETAIL = "manifest unknown at registry.example.com/demo:1.0.0 (3 consecutive misses)"


@pytest.fixture
def alice(user_kubeconfig: Callable[..., Path]) -> Path:
    return user_kubeconfig(USER, USER_GROUPS)


def denied(hook: str, kind: str, ref: str, rule: str, message: str, when: str = "") -> str:
    return DENIED.format(when=when, hook=hook, kind=kind, ref=ref, rule=rule, message=message)


def stderr_of(done: Any) -> str:
    assert done.returncode != 0, f"kubectl succeeded, but the request should have been denied:\n{done.stdout}"
    return str(done.stderr).strip()


def refused_dry_run(kube: Kube, path: str, body: dict[str, Any]) -> bool:
    """Whether the webhook now refuses ``body`` (a dry run: nothing is stored either way)."""
    try:
        kube.request("POST", path, query=[("dryRun", "All")], body=body)
    except ApiError as exc:
        if exc.status == 403:
            return True
        raise
    return False


def test_a_release_bound_to_an_unavailable_componentversion_is_denied(
    server: ServerProcess, admin: Kube, warden_kube: Kube, kube_as: Callable[[Path], Kube], kubectl: Kubectl,
    alice: Path, ns: str,
) -> None:  # fmt: skip
    versions = f"/apis/solar.opendefense.cloud/v1alpha1/namespaces/{ns}/componentversions"
    cv = {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "ComponentVersion",
        "metadata": {"name": "demo-1-0-0", "namespace": ns},
        "spec": {"componentRef": {"name": "demo"}, "tag": "1.0.0"},
    }
    admin.request("POST", versions, body=cv)
    condition = {
        "type": "Available", "status": "False", "reason": "ArtifactMissing",
        "lastTransitionTime": MISSING_SINCE, "message": MISSING_DETAIL,
    }  # fmt: skip
    warden_kube.request(  # no status subresource: the sidecar merge-patches the object
        "PATCH", f"{versions}/demo-1-0-0", body={"status": {"conditions": [condition]}},
        content_type="application/merge-patch+json",
    )  # fmt: skip
    release = {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "Release",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"componentVersionRef": {"name": "demo-1-0-0"}},
    }
    releases = f"/apis/solar.opendefense.cloud/v1alpha1/namespaces/{ns}/releases"
    wait_for(lambda: refused_dry_run(kube_as(alice), releases, release), "the server's cache to see Available=False")

    done = kubectl("create", "-f", "-", kubeconfig=alice, input=json.dumps(release))

    message = MSG_CV_UNAVAILABLE.format(
        cv=f"{ns}/demo-1-0-0", reason="ArtifactMissing", since=MISSING_SINCE, detail=MISSING_DETAIL
    )
    hook = "catalog.validate.catalog-warden.io"
    assert stderr_of(done) == denied(hook, "Release", f"{ns}/web", "catalog.release-binding", message, CREATING)
    assert kubectl("-n", ns, "get", "releases.solar.opendefense.cloud", "web").returncode == 1


def test_a_packagerevision_created_as_published_is_denied(
    server: ServerProcess, kubectl: Kubectl, alice: Path, ns: str
) -> None:
    revision = {
        "apiVersion": "porch.kpt.dev/v1alpha2",
        "kind": "PackageRevision",
        "metadata": {"name": "blueprints.nginx.v1", "namespace": ns},
        "spec": {
            "repository": "blueprints", "packageName": "nginx", "workspaceName": "v1", "lifecycle": "Published",
            "source": {"init": {"description": "nginx"}},
        },
    }  # fmt: skip

    done = kubectl("create", "-f", "-", kubeconfig=alice, input=json.dumps(revision))

    message = MSG_CREATE_LIFECYCLE.format(value="Published", allowed="Draft or Proposed")
    hook = "packages.validate.catalog-warden.io"
    ref = f"{ns}/blueprints.nginx.v1"
    expected = denied(hook, "PackageRevision", ref, "packages.revision-lifecycle", message, CREATING)
    # The mutating webhook's warning (no Repository yet) comes first, as kubectl prints it.
    warning = f"Warning: Repository {ns}/blueprints not found yet; its owner reference is added once it exists"
    assert stderr_of(done).splitlines() == [warning, expected]


def test_a_user_editing_a_charts_status_is_denied(
    server: ServerProcess, warden_kube: Kube, kubectl: Kubectl, alice: Path, name: str
) -> None:
    chart = helm_cluster_addon_chart_name(name, "podinfo")
    charts = "/apis/helm.deckhouse.io/v1alpha1/helmclusteraddoncharts"
    body = {
        "apiVersion": "helm.deckhouse.io/v1alpha1",
        "kind": "HelmClusterAddonChart",
        "metadata": {"name": chart, "labels": {"repository": name, "chart": "podinfo"}},
    }
    warden_kube.request("POST", charts, body=body)  # the sidecar's chart index, with its own token
    versions = [{"version": "1.0.0", "digest": "sha256:" + "a" * 64}]
    warden_kube.request(
        "PATCH", f"{charts}/{chart}/status", body={"status": {"versions": versions}},
        content_type="application/merge-patch+json",
    )  # fmt: skip

    done = kubectl(
        "patch", "helmclusteraddoncharts.helm.deckhouse.io", chart, "--subresource=status", "--type=merge",
        "-p", '{"status": {"versions": []}}', kubeconfig=alice,
    )  # fmt: skip

    hook = "charts.validate.catalog-warden.io"
    assert stderr_of(done) == denied(hook, "HelmClusterAddonChart", chart, "charts.chart-module-only", MSG_FORBIDDEN)
    assert warden_kube.request("GET", f"{charts}/{chart}")["status"]["versions"] == versions
