"""The shipped manifests on a real kube-apiserver: accepted, Established, CA injected, CEL enforced.

What the double never checked: kube-apiserver validates the CRDs' structural schemas, CEL rules,
selectableFields and conversion config on apply, and evaluates the CEL rules on every write.
"""

from __future__ import annotations

import base64

import pytest

from tests.support.controlplane.cluster import CRD_API, NAMESPACE, NOT_INSTALLED_GROUPS, SERVICE, Cluster, group_of
from webhook.kube.client import ApiError, Kube

REPOSITORIES = "/apis/config.porch.kpt.dev/v1alpha1/namespaces/{ns}/repositories"
WEBHOOK_CONFIGS = "/apis/admissionregistration.k8s.io/v1/{plural}/catalog-warden"


def test_every_shipped_crd_is_accepted_and_established(cluster: Cluster, admin: Kube) -> None:
    shipped = {d["metadata"]["name"] for d in cluster.rendered if d["kind"] == "CustomResourceDefinition"}

    served = {crd["metadata"]["name"]: crd for crd in admin.request("GET", CRD_API)["items"]}

    assert len(shipped) == 17 and set(served) == shipped
    for crd_name, crd in served.items():
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert (conditions.get("NamesAccepted"), conditions.get("Established")) == ("True", "True"), crd_name


def test_only_cert_manager_objects_are_left_out(cluster: Cluster) -> None:
    left_out = sorted((d["kind"], d["metadata"]["name"]) for d in cluster.rendered if d not in cluster.applied)

    assert {group_of(d) for d in cluster.rendered if d not in cluster.applied} == NOT_INSTALLED_GROUPS
    assert left_out == [
        ("Certificate", "catalog-warden-ca"),
        ("Certificate", "catalog-warden-serving"),
        ("Issuer", "catalog-warden-ca"),
        ("Issuer", "catalog-warden-selfsigned"),
    ]


def test_the_ca_is_injected_where_cert_manager_would_and_the_service_kept(cluster: Cluster, admin: Kube) -> None:
    bundle = base64.b64encode((cluster.certs / "ca.crt").read_bytes()).decode()
    configs = [
        (f"{crd['metadata']['name']} conversion", crd["spec"]["conversion"]["webhook"]["clientConfig"])
        for crd in admin.request("GET", CRD_API)["items"]
        if crd["spec"]["conversion"]["strategy"] == "Webhook"
    ]
    for plural in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        hooks = admin.request("GET", WEBHOOK_CONFIGS.format(plural=plural))["webhooks"]
        configs += [(hook["name"], hook["clientConfig"]) for hook in hooks]

    assert len(configs) == 1 + 3 + 2  # PackageRevision (the chart CRD has one version); 3 validating; 2 mutating
    for where, client_config in configs:
        assert client_config["caBundle"] == bundle, where
        service = client_config["service"]
        assert (service["namespace"], service["name"], service["port"]) == (NAMESPACE, SERVICE, 443), where


def repository(name: str, ns: str, branch: str) -> dict[str, object]:
    return {
        "apiVersion": "config.porch.kpt.dev/v1alpha1",
        "kind": "Repository",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"type": "git", "git": {"repo": "https://git.example.com/blueprints.git", "branch": branch}},
    }


def test_a_cel_rule_refuses_changing_a_repository_branch(admin: Kube, ns: str) -> None:
    path = REPOSITORIES.format(ns=ns)
    admin.request("POST", path, body=repository("blueprints", ns, "main"))

    with pytest.raises(ApiError) as refused:
        admin.request(
            "PATCH",
            f"{path}/blueprints",
            body={"spec": {"git": {"branch": "dev"}}},
            content_type="application/merge-patch+json",
        )

    assert (refused.value.status, refused.value.reason) == (422, "Invalid")
    assert refused.value.message == (
        'Repository.config.porch.kpt.dev "blueprints" is invalid: spec.git: Invalid value: spec.git.branch is immutable'
    )
    assert admin.request("GET", f"{path}/blueprints")["spec"]["git"]["branch"] == "main"
