"""The double over the project's real manifests/: every CRD served, the webhook configurations honoured."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.support.apiserver import ApiServerDouble, TestCA
from tests.support.apiserver.double import ApiServerDouble as Double
from tests.support.apiserver.fixtures import PROJECT_MANIFESTS
from tests.support.apiserver.resources import yaml_documents
from tests.support.apiserver.scripted_webhook import ScriptedWebhook

CRDS = [d for d in yaml_documents(PROJECT_MANIFESTS) if d.get("kind") == "CustomResourceDefinition"]


def test_every_crd_version_in_manifests_is_served(apiserver: ApiServerDouble) -> None:
    assert CRDS, "manifests/ holds no CRDs"
    apis = client.ApisApi(apiserver.admin).get_api_versions()
    served_groups = {g.name for g in apis.groups}
    for crd in CRDS:
        spec = crd["spec"]
        assert spec["group"] in served_groups
        for version in (v["name"] for v in spec["versions"] if v.get("served", True)):
            resources = client.CustomObjectsApi(apiserver.admin).get_api_resources(spec["group"], version)
            names = {r.name for r in resources.resources}
            assert spec["names"]["plural"] in names, f"{spec['names']['plural']}.{spec['group']}/{version}"


def test_webhook_configurations_point_at_the_base_url_with_their_paths() -> None:
    double = Double(PROJECT_MANIFESTS, webhook_base_url="https://127.0.0.1:9443")
    hooks = {h.name: h for h in double.admission.hooks}
    assert hooks, "manifests/webhooks holds no webhooks"
    documents = [d for d in yaml_documents(PROJECT_MANIFESTS) if d.get("kind", "").endswith("WebhookConfiguration")]
    for document in documents:
        for spec in document["webhooks"]:
            path = spec["clientConfig"]["service"]["path"]
            assert hooks[spec["name"]].url == f"https://127.0.0.1:9443{path}"


def release(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "Release",
        "metadata": {"name": "r", "namespace": namespace},
        "spec": {"componentVersionRef": {"name": "cv"}},
    }


def test_catalog_requests_reach_the_catalog_webhook_outside_excluded_namespaces(
    webhook: ScriptedWebhook, ca: TestCA
) -> None:
    with Double(PROJECT_MANIFESTS, webhook_base_url=webhook.url, ca_bundle=ca.cert_pem) as double:
        api = client.CustomObjectsApi(double.admin)
        for namespace in ("default", "kube-system"):
            api.create_namespaced_custom_object(
                "solar.opendefense.cloud", "v1alpha1", namespace, "releases", release(namespace)
            )
        calls = [(path, review["request"]["namespace"]) for path, review in webhook.requests]
        assert calls == [("/validate/catalog", "default")]
