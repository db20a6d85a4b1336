"""The RBAC evaluator the manifest tests rely on (tests/support/rbac.py) decides as kube-apiserver does."""

from __future__ import annotations

import pytest

from tests.support.rbac import Attributes, Rbac, attributes

SA = "system:serviceaccount:catalog-warden:catalog-warden"


def role(kind: str, name: str, rules: list[dict], namespace: str = "") -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"kind": kind, "metadata": meta, "rules": rules}


def binding(kind: str, role_kind: str, role_name: str, namespace: str = "") -> dict:
    meta = {"name": f"b-{role_name}", **({"namespace": namespace} if namespace else {})}
    return {
        "kind": kind,
        "metadata": meta,
        "roleRef": {"kind": role_kind, "name": role_name},
        "subjects": [{"kind": "ServiceAccount", "name": "catalog-warden", "namespace": "catalog-warden"}],
    }


SECRETS = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
NAMED = {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["one"], "verbs": ["get", "update", "create"]}


def test_a_cluster_role_bound_in_a_namespace_grants_only_there() -> None:
    r = Rbac([role("ClusterRole", "read", [SECRETS]), binding("RoleBinding", "ClusterRole", "read", "team-a")])
    assert r.allows(SA, Attributes("get", "", "secrets", "team-a", "s"))
    assert not r.allows(SA, Attributes("get", "", "secrets", "team-b", "s"))
    assert not r.allows(SA, Attributes("get", "", "secrets", "", "s"))
    assert not r.allows("system:serviceaccount:catalog-warden:other", Attributes("get", "", "secrets", "team-a", "s"))
    assert r.namespaces(SA, "get", "", "secrets") == {"team-a"}


def test_a_cluster_role_binding_grants_everywhere() -> None:
    r = Rbac([role("ClusterRole", "read", [SECRETS]), binding("ClusterRoleBinding", "ClusterRole", "read")])
    assert r.allows(SA, Attributes("get", "", "secrets", "team-b", "s"))
    assert r.namespaces(SA, "get", "", "secrets") == {"*"}


def test_resource_names_never_match_a_request_without_a_name() -> None:
    r = Rbac([role("Role", "named", [NAMED], "ns"), binding("RoleBinding", "Role", "named", "ns")])
    assert r.allows(SA, Attributes("update", "", "configmaps", "ns", "one"))
    assert not r.allows(SA, Attributes("update", "", "configmaps", "ns", "two"))
    assert not r.allows(SA, Attributes("create", "", "configmaps", "ns"))
    assert r.names(SA, "update", "", "configmaps") == {"one"}


def test_a_binding_to_a_missing_role_is_an_error() -> None:
    with pytest.raises(ValueError, match="RoleBinding b-gone refers to a missing Role gone"):
        list(Rbac([binding("RoleBinding", "Role", "gone", "ns")]).grants(SA))


@pytest.mark.parametrize(
    ("method", "path", "params", "expected"),
    [
        ("GET", "/api/v1/namespaces/team-a/secrets/s", {}, Attributes("get", "", "secrets", "team-a", "s")),
        (
            "GET",
            "/apis/solar.opendefense.cloud/v1alpha1/componentversions",
            {},
            Attributes("list", "solar.opendefense.cloud", "componentversions"),
        ),
        (
            "GET",
            "/apis/solar.opendefense.cloud/v1alpha1/componentversions",
            {"watch": "true"},
            Attributes("watch", "solar.opendefense.cloud", "componentversions"),
        ),
        (
            "PATCH",
            "/apis/helm.deckhouse.io/v1alpha1/helmclusteraddoncharts/c/status",
            {},
            Attributes("patch", "helm.deckhouse.io", "helmclusteraddoncharts/status", "", "c"),
        ),
        ("POST", "/api/v1/namespaces/ns/events", {}, Attributes("create", "", "events", "ns")),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l",
            {},
            Attributes("update", "coordination.k8s.io", "leases", "ns", "l"),
        ),
        ("DELETE", "/api/v1/namespaces/ns/configmaps", {}, Attributes("deletecollection", "", "configmaps", "ns")),
        ("GET", "/api/v1/namespaces/ns", {}, Attributes("get", "", "namespaces", "ns", "ns")),
        (
            "GET",
            "/api/v1/namespaces/ns/configmaps",
            {"fieldSelector": "metadata.name=one"},
            Attributes("list", "", "configmaps", "ns", "one"),
        ),
    ],
)
def test_request_attributes(method: str, path: str, params: dict[str, str], expected: Attributes) -> None:
    assert attributes(method, path, params) == expected
