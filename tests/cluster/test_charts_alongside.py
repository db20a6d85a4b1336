"""The charts family alongside operator-helm: upstream's CRDs installed exactly as shipped
(``shared/upstream/operator-helm/``, the pre-upgrade shape), our webhooks deciding on objects in
upstream's shape through kube-apiserver.

The session's cluster serves our CRDs; this module swaps in upstream's three for its tests and puts
ours back afterwards (ours are a superset, so nothing stored in between is lost either way).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from policies.charts import MSG_VERSION_UNRESOLVED
from tests.cluster.test_denials import denied, refused_dry_run, stderr_of
from tests.support.controlplane.cluster import Cluster, ServerProcess, wait_for
from tests.support.controlplane.fixtures import Kubectl
from webhook.kube.client import Kube

UPSTREAM = Path("/work/shared/upstream/operator-helm")
OURS = Path(__file__).resolve().parents[2] / "manifests" / "crds" / "charts"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
HELM = "/apis/helm.deckhouse.io/v1alpha1"
HOOK = "charts.validate.catalog-warden.io"
RULE = "charts.addon-deployable-version"


def _established_with(admin: Kube, plural: str, marker: str) -> bool:
    crd = admin.request("GET", f"{CRDS}/{plural}.helm.deckhouse.io")
    conditions = (crd.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
    return ready and marker in json.dumps(crd["spec"])


@pytest.fixture(scope="module")
def upstream_crds(cluster: Cluster) -> Iterator[None]:
    if not UPSTREAM.is_dir():
        pytest.skip(f"{UPSTREAM} not present")
    for path in sorted(UPSTREAM.glob("*.yaml")):
        done = cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
        assert done.returncode == 0, done.stderr
    yield
    done = cluster.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(OURS))
    assert done.returncode == 0, done.stderr


@pytest.fixture
def alice(user_kubeconfig: Callable[..., Path]) -> Path:
    return user_kubeconfig("alice", ("developers", "system:masters"))


def test_a_pre_upgrade_chart_under_an_older_name_gates_the_addon_by_its_labels(
    upstream_crds: None,
    server: ServerProcess,
    admin: Kube,
    warden_kube: Kube,
    kube_as: Callable[[Path], Kube],
    kubectl: Kubectl,
    alice: Path,
    name: str,
) -> None:
    wait_for(lambda: _established_with(admin, "helmclusteraddoncharts", '"pulled"'), "upstream's chart CRD")
    repo = name[:40]
    admin.request(
        "POST",
        f"{HELM}/helmclusteraddonrepositories",
        body={
            "apiVersion": "helm.deckhouse.io/v1alpha1",
            "kind": "HelmClusterAddonRepository",
            "metadata": {"name": repo},
            "spec": {"url": f"oci://registry.example.com/charts/{name}"},
        },
    )
    old_name = f"{repo}-podinfo"  # operator-helm's older "<repo>-<chart>" scheme, not the one we derive
    chart = {
        "apiVersion": "helm.deckhouse.io/v1alpha1",
        "kind": "HelmClusterAddonChart",
        "metadata": {"name": old_name, "labels": {"heritage": "deckhouse", "repository": repo, "chart": "podinfo"}},
    }
    warden_kube.request("POST", f"{HELM}/helmclusteraddoncharts", body=chart)
    versions = [{"version": "1.0.0", "digest": "sha256:" + "e" * 64, "pulled": True}]
    warden_kube.request(
        "PATCH",
        f"{HELM}/helmclusteraddoncharts/{old_name}/status",
        body={"status": {"versions": versions}},
        content_type="application/merge-patch+json",
    )
    addon: dict[str, Any] = {
        "apiVersion": "helm.deckhouse.io/v1alpha1",
        "kind": "HelmClusterAddon",
        "metadata": {"name": repo},
        "spec": {"chart": {"helmClusterAddonRepository": repo, "helmClusterAddonChart": "podinfo", "version": "1.0.0"}},
    }
    addons = f"{HELM}/helmclusteraddons"
    wait_for(lambda: refused_dry_run(kube_as(alice), addons, addon), "the server's cache to see the chart")

    done = kubectl("create", "-f", "-", kubeconfig=alice, input=json.dumps(addon))

    message = MSG_VERSION_UNRESOLVED.format(chart=old_name, version="1.0.0", repository=repo)
    assert stderr_of(done) == denied(HOOK, "HelmClusterAddon", repo, RULE, message, 'error when creating "STDIN": ')
    stored = warden_kube.request("GET", f"{HELM}/helmclusteraddoncharts/{old_name}")
    assert stored["status"]["versions"] == versions  # upstream's schema kept it as written
