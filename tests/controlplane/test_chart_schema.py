"""HelmClusterAddonChart through a real kube-apiserver: our one-version CRD keeps every shape upstream writes.

kube-apiserver prunes unknown fields and validates the schema on every write, which the apiserver
double does not; so this is where "nothing upstream writes is pruned" is proven. The upgrade of
seed 004 is replayed too: an object stored under upstream's CRD as shipped (the pre-upgrade
shape, ``shared/upstream/operator-helm/``) still reads, unchanged, once our CRD replaces it.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.controlplane import BUILD_SCRIPT, ControlPlane, bin_dir, control_plane, missing_binaries

REPO = Path(__file__).resolve().parents[2]
OURS = REPO / "manifests" / "crds" / "charts" / "helmclusteraddoncharts.yaml"
UPSTREAM = Path("/work/shared/upstream/operator-helm/helmclusteraddoncharts.yaml")
KUBECTL = "/usr/bin/kubectl"
CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/helmclusteraddoncharts.helm.deckhouse.io"
CHARTS = "/apis/helm.deckhouse.io/v1alpha1/helmclusteraddoncharts"
WAIT = 60.0

pytestmark = pytest.mark.timeout(300)

CONDITION = {
    "type": "Ready",
    "status": "True",
    "reason": "Success",
    "message": "",
    "lastTransitionTime": "2026-05-01T12:00:00Z",
    "observedGeneration": 1,
}
NEWEST = {
    "iconURL": "https://charts.example.com/podinfo.png",
    "observedGeneration": 2,
    "conditions": [CONDITION],
    "versions": [
        {"version": "3.0.0", "mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip"},
        {"version": "2.9.0", "ociRef": "oci://ghcr.io/acme/podinfo:2.9.0"},
        {"version": "2.8.0", "unavailableReason": "InvalidChartReference", "unavailableMessage": "carries no tag"},
        {"version": "2.7.0", "unavailableReason": "ResolvePending", "unavailableMessage": "manifest request failed"},
        {"version": "2.6.0", "unavailableReason": "UnsupportedMediaType"},
        {"version": "2.5.0", "mediaType": "application/tar+gzip", "unavailableReason": "RemovedFromRepository"},
    ],
}
PRE_UPGRADE = {"versions": [{"version": "1.0.0", "digest": "sha256:" + "a" * 64, "pulled": True}]}


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    binaries = bin_dir()
    missing = missing_binaries(binaries)
    if missing:
        pytest.skip(f"control plane not built ({', '.join(missing)} missing): run {BUILD_SCRIPT.relative_to(REPO)}")
    if not UPSTREAM.is_file():
        pytest.skip(f"{UPSTREAM} not present")
    with control_plane(binaries=binaries) as started:
        yield started


@pytest.fixture
def api(plane: ControlPlane) -> Iterator[httpx.Client]:
    with plane.client() as client:
        yield client


def apply(plane: ControlPlane, path: Path) -> None:
    done = subprocess.run(
        [KUBECTL, f"--kubeconfig={plane.kubeconfig}", "apply", "--server-side", "--force-conflicts", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def wait_served(api: httpx.Client, marker: str) -> None:
    """Until the CRD is Established and its stored schema mentions ``marker`` (the apiserver's
    own handler picks a new schema up shortly after the update)."""
    deadline = time.monotonic() + WAIT
    while True:
        crd = api.get(CRD)
        conditions = (crd.json().get("status") or {}).get("conditions") or [] if crd.status_code == 200 else []
        ready = any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
        if ready and marker in crd.text:
            return
        assert time.monotonic() < deadline, f"CRD not served with {marker!r}: {crd.text[:500]}"
        time.sleep(0.1)


def chart(api: httpx.Client, status: dict[str, Any]) -> str:
    name = f"podinfo-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": "helm.deckhouse.io/v1alpha1",
        "kind": "HelmClusterAddonChart",
        "metadata": {"name": name, "labels": {"heritage": "deckhouse", "repository": "r", "chart": "podinfo"}},
    }
    api.post(CHARTS, json=body).raise_for_status()
    current = api.get(f"{CHARTS}/{name}").json()
    put = api.put(f"{CHARTS}/{name}/status", json={**current, "status": status})
    assert put.status_code == 200, put.text
    return name


def test_pre_upgrade_object_survives_the_crd_swap_and_every_newest_field_is_kept(
    plane: ControlPlane, api: httpx.Client
) -> None:
    apply(plane, UPSTREAM)
    wait_served(api, '"pulled"')
    old = chart(api, PRE_UPGRADE)

    apply(plane, OURS)
    wait_served(api, "InvalidChartReference")

    assert api.get(f"{CHARTS}/{old}").json()["status"] == PRE_UPGRADE
    new = chart(api, NEWEST)
    assert api.get(f"{CHARTS}/{new}").json()["status"] == NEWEST
    mixed = chart(api, {"versions": NEWEST["versions"] + PRE_UPGRADE["versions"]})
    assert api.get(f"{CHARTS}/{mixed}").json()["status"]["versions"] == NEWEST["versions"] + PRE_UPGRADE["versions"]


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"version": "1.0.0", "unavailableReason": "Broken"}, "unavailableReason"),
        (
            {"version": "1.0.0", "unavailableReason": "ResolvePending", "unavailableMessage": "x" * 257},
            "unavailableMessage",
        ),
        ({"version": ""}, "version"),
    ],
)
def test_what_upstream_would_refuse_is_refused(plane: ControlPlane, api: httpx.Client, entry, field) -> None:
    apply(plane, OURS)
    wait_served(api, "InvalidChartReference")
    name = chart(api, {"versions": []})
    current = api.get(f"{CHARTS}/{name}").json()
    put = api.put(f"{CHARTS}/{name}/status", json={**current, "status": {"versions": [entry]}})
    assert put.status_code == 422, put.text
    assert f"status.versions[0].{field}" in put.json()["message"]
