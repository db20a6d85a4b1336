"""The charts CRDs (manifests/crds/charts): served shape, structural schemas, and agreement with the rules."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies import charts
from policies.chart_index import MESSAGE_LIMIT
from policies.conversion import CONVERTERS
from tests.e2e_conversion.schemas import pruned_paths

CRD_DIR = Path(__file__).resolve().parents[2] / "manifests" / "crds" / "charts"
FILES = {
    "HelmClusterAddon": "helmclusteraddons.yaml",
    "HelmClusterAddonChart": "helmclusteraddoncharts.yaml",
    "HelmClusterAddonRepository": "helmclusteraddonrepositories.yaml",
}


def load(kind: str) -> dict[str, Any]:
    return yaml.safe_load((CRD_DIR / FILES[kind]).read_text())


def version(crd: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in crd["spec"]["versions"] if v["name"] == name)


def schema(crd: dict[str, Any], name: str) -> dict[str, Any]:
    return version(crd, name)["schema"]["openAPIV3Schema"]


def test_kustomization_lists_every_crd():
    kustomization = yaml.safe_load((CRD_DIR / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(FILES.values())


@pytest.mark.parametrize("kind", FILES)
def test_crd_is_cluster_scoped_in_the_deckhouse_group(kind):
    crd = load(kind)
    plural = FILES[kind].removesuffix(".yaml")
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{plural}.helm.deckhouse.io"
    assert crd["spec"]["group"] == "helm.deckhouse.io"
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["kind"] == kind
    assert crd["spec"]["names"]["plural"] == plural
    for v in crd["spec"]["versions"]:
        assert v["served"] is True
        assert v["subresources"] == {"status": {}}
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1"]  # one version, as upstream
    assert [v["name"] for v in crd["spec"]["versions"] if v["storage"]] == ["v1alpha1"]


def test_chart_crd_has_no_conversion():
    """Upstream extends the status in place (B2); an invented second version would need a converter."""
    crd = load("HelmClusterAddonChart")
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    assert "cert-manager.io/inject-ca-from" not in (crd["metadata"].get("annotations") or {})
    assert not [key for key in CONVERTERS if key[0] == "helm.deckhouse.io"]


def test_chart_versions_shape_is_upstreams_chart_catalog_status():
    crd = load("HelmClusterAddonChart")
    root = schema(crd, "v1alpha1")
    assert "spec" not in root["properties"]  # status only, as upstream
    status = root["properties"]["status"]["properties"]
    assert sorted(status) == ["conditions", "iconURL", "observedGeneration", "versions"]
    entry = status["versions"]["items"]
    assert sorted(entry["properties"]) == [
        "digest",
        "mediaType",
        "ociRef",
        "pulled",
        "unavailableMessage",
        "unavailableReason",
        "version",
    ]
    assert (
        entry["properties"]["unavailableReason"]["enum"]
        == list(charts.UNAVAILABLE_REASONS)
        == [
            "RemovedFromRepository",
            "UnsupportedMediaType",
            "ResolvePending",
            "InvalidChartReference",
        ]
    )
    assert entry["properties"]["unavailableMessage"]["maxLength"] == MESSAGE_LIMIT == 256
    assert entry["required"] == ["version"]  # pulled was required before verdicts; the new shape has none


# --- upstream's CRDs as shipped (shared/upstream/operator-helm) ----------------------------------

UPSTREAM = Path("/work/shared/upstream/operator-helm")
needs_upstream = pytest.mark.skipif(not UPSTREAM.is_dir(), reason="shared/upstream/operator-helm not present")


def upstream(kind: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((UPSTREAM / FILES[kind]).read_text()) if d]
    (crd,) = docs
    return crd


def _declared_paths(node: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every property path a schema declares, with its node."""
    found: list[tuple[str, Any]] = []
    for key, child in (node.get("properties") or {}).items():
        where = f"{path}.{key}" if path else key
        found.append((where, child))
        found += _declared_paths(child, where)
    if isinstance(node.get("items"), dict):
        found += _declared_paths(node["items"], f"{path}[]")
    return found


def _node(root: Any, path: str) -> Any:
    node = root
    for step in path.replace("[]", ".[]").split("."):
        if not step:
            continue
        if step == "[]":
            node = node.get("items")
        else:
            node = (
                (node.get("properties") or {}).get(step)
                if not node.get("x-kubernetes-preserve-unknown-fields")
                else node
            )
        if node is None:
            return None
    return node


@needs_upstream
@pytest.mark.parametrize("kind", FILES)
def test_every_field_upstream_declares_is_declared_alike(kind):
    """Nothing upstream writes is pruned by ours: every path it declares exists here with its type."""
    theirs, ours = schema(upstream(kind), "v1alpha1"), schema(load(kind), "v1alpha1")
    missing, retyped = [], []
    for path, node in _declared_paths(theirs):
        mine = _node(ours, path)
        if mine is None:
            missing.append(path)
        elif mine.get("x-kubernetes-preserve-unknown-fields") and not node.get("properties"):
            continue
        elif node.get("type") != mine.get("type"):
            retyped.append((path, node.get("type"), mine.get("type")))
    assert (missing, retyped) == ([], [])


@needs_upstream
def test_what_upstream_writes_in_either_shape_is_accepted_and_kept():
    """An object in the pre-upgrade shape (upstream's CRD as shipped) and one in the current shape
    (ChartCatalogStatus, B2) are neither pruned nor rejected by our schema."""
    ours = schema(load("HelmClusterAddonChart"), "v1alpha1")
    pre_upgrade = {"version": "1.0.0", "digest": "sha256:10", "pulled": True}
    current = [
        {"version": "2.0.0", "mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip"},
        {"version": "1.9.0", "ociRef": "oci://ghcr.io/acme/podinfo:1.9.0"},
        {"version": "1.8.0", "unavailableReason": "InvalidChartReference", "unavailableMessage": "carries no tag"},
        {"version": "1.7.0", "unavailableReason": "ResolvePending"},
    ]
    condition = {
        "type": "Ready",
        "status": "True",
        "reason": "Success",
        "message": "",
        "lastTransitionTime": "2026-05-01T12:00:00Z",
        "observedGeneration": 1,
    }
    obj = {
        "apiVersion": "helm.deckhouse.io/v1alpha1",
        "kind": "HelmClusterAddonChart",
        "metadata": {"name": "podinfo-chart-podinfo", "labels": {"heritage": "deckhouse"}},
        "status": {
            "iconURL": "https://charts.example.com/icon.png",
            "observedGeneration": 3,
            "conditions": [condition],
            "versions": [*current, pre_upgrade],
        },
    }
    assert pruned_paths(obj, ours) == []
    assert pruned_paths(obj, schema(upstream("HelmClusterAddonChart"), "v1alpha1")) != []  # the old CRD would prune
    problems = [
        (entry["version"], field)
        for entry in obj["status"]["versions"]
        for field in ours["properties"]["status"]["properties"]["versions"]["items"]["required"]
        if field not in entry
    ]
    assert problems == []
    for entry in current:
        reason = entry.get("unavailableReason")
        assert reason is None or reason in charts.UNAVAILABLE_REASONS


def test_addon_chart_reference_fields():
    spec = schema(load("HelmClusterAddon"), "v1alpha1")["properties"]["spec"]
    chart = spec["properties"]["chart"]
    assert chart["required"] == [charts.CHART_FIELD, charts.REPOSITORY_FIELD]
    assert sorted(chart["properties"]) == sorted([charts.CHART_FIELD, charts.REPOSITORY_FIELD, charts.VERSION_FIELD])
    status = schema(load("HelmClusterAddon"), "v1alpha1")["properties"]["status"]["properties"]
    assert sorted(status["lastAppliedChart"]["properties"]) == sorted(chart["properties"])


def test_repository_url_cel_rule_is_the_webhook_rule():
    url = schema(load("HelmClusterAddonRepository"), "v1alpha1")["properties"]["spec"]["properties"]["url"]
    (validation,) = url["x-kubernetes-validations"]
    assert validation == {
        "rule": "self.matches('^(https?|oci)://.+$')",
        "message": "URL must have a valid protocol (http, https, oci) and a non-empty path",
    }
    assert validation["message"] in charts.MSG_URL_SCHEME
    pattern = re.search(r"matches\('\^(.*)\$'\)", validation["rule"])
    assert pattern is not None
    assert pattern.group(1) == charts.URL_PATTERN.pattern


def _structural_problems(node: Any, path: str) -> list[str]:
    """Every schema node has a type unless it preserves unknown fields (structural schema rule)."""
    if not isinstance(node, dict):
        return []
    problems = []
    if "type" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        problems.append(path)
    for key, child in node.get("properties", {}).items():
        problems += _structural_problems(child, f"{path}.{key}")
    if "items" in node:
        problems += _structural_problems(node["items"], f"{path}[]")
    return problems


@pytest.mark.parametrize("kind", FILES)
def test_schemas_are_structural(kind):
    crd = load(kind)
    for v in crd["spec"]["versions"]:
        assert _structural_problems(v["schema"]["openAPIV3Schema"], v["name"]) == []
        for column in v.get("additionalPrinterColumns", ()):
            assert column["type"] in {"string", "date", "integer", "number", "boolean"}
            assert column["jsonPath"].startswith(".")
