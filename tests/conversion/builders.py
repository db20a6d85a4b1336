"""Small, readable objects for the example and contract tests."""

from __future__ import annotations

from typing import Any


def package_revision(version: str, name: str = "blueprints.nginx.v1", **fields: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": f"porch.kpt.dev/{version}",
        "kind": "PackageRevision",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "7"},
    }
    obj.update(fields)
    return obj


def chart(version: str, name: str = "podinfo-chart-podinfo", **fields: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": f"helm.deckhouse.io/{version}",
        "kind": "HelmClusterAddonChart",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"repository": "podinfo", "chart": "podinfo"}},
    }
    obj.update(fields)
    return obj
