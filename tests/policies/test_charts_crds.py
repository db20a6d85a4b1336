"""The charts CRDs (manifests/crds/charts): served shape, structural schemas, and agreement with the rules."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies import charts

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
    assert [v["name"] for v in crd["spec"]["versions"] if v["storage"]] == (
        ["v1alpha2"] if kind == "HelmClusterAddonChart" else ["v1alpha1"]
    )


def test_chart_crd_converts_through_the_webhook():
    crd = load("HelmClusterAddonChart")
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1", "v1alpha2"]
    assert crd["spec"]["conversion"] == {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {
                "service": {"name": "catalog-warden", "namespace": "catalog-warden", "path": "/convert", "port": 443}
            },
        },
    }
    assert crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "catalog-warden/catalog-warden-serving"


def test_chart_versions_shapes():
    crd = load("HelmClusterAddonChart")
    for name in ("v1alpha1", "v1alpha2"):
        assert "spec" not in schema(crd, name)["properties"]  # status only, as upstream
    v1 = schema(crd, "v1alpha1")["properties"]["status"]["properties"]["versions"]["items"]
    v2 = schema(crd, "v1alpha2")["properties"]["status"]["properties"]["versions"]["items"]
    assert sorted(v1["properties"]) == ["digest", "pulled", "version"]
    assert sorted(v2["properties"]) == ["digest", "mediaType", "unavailableMessage", "unavailableReason", "version"]
    assert v2["properties"]["unavailableReason"]["enum"] == [
        "RemovedFromRepository",
        "UnsupportedMediaType",
        "ResolvePending",
    ]
    assert v2["properties"]["unavailableMessage"]["maxLength"] == 256
    assert v1["required"] == v2["required"] == ["version"]


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
