"""The packages CRDs agree with the rules: versions, names, lifecycle enum, label keys, conversion."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.packages import LATEST_LABEL_V1ALPHA1, LATEST_LABEL_V1ALPHA2, Lifecycle

CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds" / "packages"


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((CRDS / name).read_text())


def version(crd: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in crd["spec"]["versions"] if v["name"] == name)


def columns(v: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["jsonPath"] for c in v["additionalPrinterColumns"]}


def spec_props(v: dict[str, Any]) -> dict[str, Any]:
    return v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]


def test_kustomization_lists_every_crd_file() -> None:
    listed = load("kustomization.yaml")["resources"]
    assert sorted(listed) == sorted(p.name for p in CRDS.glob("*.yaml") if p.name != "kustomization.yaml")


def test_packagerevision_versions_and_names() -> None:
    crd = load("packagerevisions.yaml")
    assert crd["metadata"]["name"] == "packagerevisions.porch.kpt.dev"
    assert crd["spec"]["names"]["shortNames"] == ["rpkg"]
    assert crd["spec"]["scope"] == "Namespaced"
    assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [
        ("v1alpha1", True, False),
        ("v1alpha2", True, True),
    ]
    assert all(v["subresources"] == {"status": {}} for v in crd["spec"]["versions"])


def test_packagerevision_conversion_webhook_and_ca_injection() -> None:
    crd = load("packagerevisions.yaml")
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


@pytest.mark.parametrize(
    ("name", "revision", "label"),
    [("v1alpha1", ".spec.revision", LATEST_LABEL_V1ALPHA1), ("v1alpha2", ".status.revision", LATEST_LABEL_V1ALPHA2)],
)
def test_printer_columns_follow_each_versions_fields(name: str, revision: str, label: str) -> None:
    cols = columns(version(load("packagerevisions.yaml"), name))
    escaped = label.replace(".", "\\.")
    assert cols["Lifecycle"] == ".spec.lifecycle"
    assert cols["Revision"] == revision
    assert cols["Latest"] == f".metadata.labels['{escaped}']"


def test_lifecycle_enums_match_the_rules() -> None:
    crd = load("packagerevisions.yaml")
    values = [lc.value for lc in Lifecycle]
    assert spec_props(version(crd, "v1alpha2"))["lifecycle"]["enum"] == values
    # v1alpha1 accepted an empty lifecycle (canonicalized to Draft); the rules read it as Draft.
    assert spec_props(version(crd, "v1alpha1"))["lifecycle"]["enum"] == ["", *values]


def test_each_version_has_its_own_shape() -> None:
    crd = load("packagerevisions.yaml")
    v1, v2 = spec_props(version(crd, "v1alpha1")), spec_props(version(crd, "v1alpha2"))
    assert {"tasks", "revision"} <= set(v1) and not {"source"} & set(v1)
    assert "source" in v2 and not {"tasks", "revision"} & set(v2)
    assert set(v2["source"]["properties"]) == {"init", "cloneFrom", "copyFrom", "upgrade"}
    status = {
        n: version(crd, n)["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
        for n in ("v1alpha1", "v1alpha2")
    }
    assert "publishTimestamp" in status["v1alpha1"] and "publishedAt" in status["v1alpha2"]
    assert "revision" in status["v1alpha2"]


def test_repository_crd() -> None:
    crd = load("repositories.yaml")
    assert crd["metadata"]["name"] == "repositories.config.porch.kpt.dev"
    assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [("v1alpha1", True, True)]
    assert crd["spec"]["scope"] == "Namespaced"
