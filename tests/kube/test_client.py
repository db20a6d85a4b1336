"""The resource table, the kubeconfig path, and errors as the apiserver reports them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from policies import kinds
from policies.model import GroupKind
from tests.kube.conftest import NS
from tests.support.apiserver import ApiServerDouble
from tests.support.apiserver.fixtures import PROJECT_MANIFESTS
from webhook.kube.cache import DEFAULT_KINDS
from webhook.kube.client import (
    BUILTIN_KINDS,
    RESOURCES,
    Conflict,
    Kube,
    NotFound,
    Resource,
    Unreachable,
    build_api_client,
    resources_from_crds,
)


def cv(name: str) -> dict:
    return {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "ComponentVersion",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"tag": "v1"},
    }


def test_table_is_the_crd_manifests_at_their_storage_versions_plus_the_builtins() -> None:
    from_crds = resources_from_crds(PROJECT_MANIFESTS / "crds")
    assert {k: v for k, v in RESOURCES.items() if k not in BUILTIN_KINDS} == from_crds
    assert from_crds[kinds.PACKAGE_REVISION].version == "v1alpha2"
    assert from_crds[kinds.HELM_CLUSTER_ADDON_CHART].version == "v1alpha1"
    assert set(RESOURCES) >= DEFAULT_KINDS
    assert {kinds.NAMESPACE, kinds.SECRET, kinds.CONFIG_MAP, kinds.EVENT, kinds.LEASE} == BUILTIN_KINDS


@pytest.mark.parametrize(
    ("resource", "args", "path"),
    [
        (RESOURCES[kinds.COMPONENT_VERSION], ("ns", "a", "status"),
         "/apis/solar.opendefense.cloud/v1alpha1/namespaces/ns/componentversions/a/status"),
        (RESOURCES[kinds.COMPONENT_VERSION], ("", "", ""), "/apis/solar.opendefense.cloud/v1alpha1/componentversions"),
        (RESOURCES[kinds.HELM_CLUSTER_ADDON_CHART], ("ignored", "c", ""),
         "/apis/helm.deckhouse.io/v1alpha1/helmclusteraddoncharts/c"),
        (RESOURCES[kinds.EVENT], ("ns", "", ""), "/api/v1/namespaces/ns/events"),
        (RESOURCES[kinds.NAMESPACE], ("", "team", ""), "/api/v1/namespaces/team"),
        (Resource(GroupKind("", "Secret"), "v1", "secrets", True), ("a b", "x/y", ""),
         "/api/v1/namespaces/a%20b/secrets/x%2Fy"),
    ],
)  # fmt: skip
def test_paths(resource: Resource, args: tuple[str, str, str], path: str) -> None:
    assert resource.path(*args) == path


def test_kubeconfig_client_talks_to_the_double_as_its_user(apiserver: ApiServerDouble, tmp_path: Path) -> None:
    token = apiserver.configuration("system:serviceaccount:catalog-warden:catalog-warden").api_key["authorization"]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "double", "cluster": {"server": apiserver.url}}],
                "users": [{"name": "warden", "user": {"token": token}}],
                "contexts": [{"name": "double", "context": {"cluster": "double", "user": "warden"}}],
                "current-context": "double",
            }
        )
    )
    kube = Kube(build_api_client(kubeconfig))
    assert kube.get(kinds.NAMESPACE, "default")["metadata"]["name"] == "default"


def test_errors_are_typed_with_the_apiserver_message(kube: Kube) -> None:
    with pytest.raises(NotFound) as missing:
        kube.get(kinds.COMPONENT_VERSION, "nope", NS)
    assert missing.value.status == 404
    assert missing.value.message == 'componentversions.solar.opendefense.cloud "nope" not found'
    kube.create(kinds.COMPONENT_VERSION, cv("a"))
    with pytest.raises(Conflict) as exists:
        kube.create(kinds.COMPONENT_VERSION, cv("a"))
    assert exists.value.reason == "AlreadyExists"
    assert exists.value.message == 'componentversions.solar.opendefense.cloud "a" already exists'


def test_an_unreachable_server_is_status_zero(apiserver: ApiServerDouble) -> None:
    configuration = apiserver.configuration("nobody")
    configuration.host = "http://127.0.0.1:9"  # discard port: nothing listens
    from kubernetes import client

    kube = Kube(client.ApiClient(configuration))
    with pytest.raises(Unreachable) as err:
        kube.get(kinds.NAMESPACE, "default", timeout=2)
    assert err.value.status == 0
    assert err.value.message.startswith("GET /api/v1/namespaces/default: ")
