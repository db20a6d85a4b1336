"""End to end: the real ``catalog-warden serve`` process, its informer cache watching the apiserver
double through a TCP proxy that the test cuts.

The promise under test: while the server's cache is stale it never allows what it cannot check.
A Release bound to a ComponentVersion after the cut is invisible to the server; deleting that
ComponentVersion must then be refused (503, naming the stale kinds) and, once the cut heals and
the cache relisted by itself, refused as in use (403). Readiness is false for exactly as long.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from kubernetes import client

from policies.catalog_deletion import MSG_CV_IN_USE
from policies.kinds import COMPONENT_VERSION, NAMESPACE, RELEASE
from tests.kube.conftest import NS, WARDEN
from tests.kube.tcp_proxy import TcpProxy
from tests.kube.test_e2e_binding import ALICE, SOLAR, V1, VALIDATING, cv_body, rejection, release_body
from tests.support.apiserver import ApiServerDouble
from tests.support.apiserver.fixtures import PROJECT_MANIFESTS
from tests.support.server import Endpoint, ServerProcess, make_certs, wait_until
from webhook.kube.cache import DEFAULT_KINDS
from webhook.kube.client import Kube

INFORMER = {"watchTimeout": "2s", "maxWatchGap": "500ms", "requestTimeout": "500ms"}
"""Bounds small enough for a test (docs/configuration.md ``informer.*``)."""
STALE_DENIAL = (
    f'admission webhook "{VALIDATING}" denied the request: ComponentVersion {NS}/demo-v1 denied by '
    "catalog.componentversion-in-use: cluster state is stale ("
)


@dataclass
class Cut:
    double: ApiServerDouble
    proxy: TcpProxy
    server: Endpoint
    warden: Kube

    def readyz(self) -> httpx.Response:
        return httpx.get(f"{self.server.probe_url}/readyz", timeout=2)

    def delete_cv(self) -> tuple[int, str]:
        api = client.CustomObjectsApi(self.double.api_client(ALICE, ["team-a-editors"]))
        with pytest.raises(client.ApiException) as err:
            api.delete_namespaced_custom_object(SOLAR, V1, NS, "componentversions", "demo-v1")
        return err.value.status, json.loads(err.value.body)["message"]


def kubeconfig(path: Path, server: str, token: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return path


def every_kind_down(why: str) -> bool:
    return all(f"{kind} watch down since " in why for kind in DEFAULT_KINDS)


@contextlib.contextmanager
def admitted_elsewhere(double: ApiServerDouble) -> Iterator[None]:
    """Writes admitted by another replica, whose cache is live (this one's is not): no webhook call here."""
    hooks = list(double.admission.hooks)
    double.admission.hooks.clear()
    try:
        yield
    finally:
        double.admission.hooks[:] = hooks


@pytest.fixture
def cut(tmp_path: Path) -> Iterator[Cut]:
    certs = make_certs(tmp_path / "certs")
    process = ServerProcess(certs)
    double = ApiServerDouble(
        PROJECT_MANIFESTS, webhook_base_url=process.endpoint.url, ca_bundle=(certs / "ca.crt").read_bytes()
    ).start()
    host, port = double.url.removeprefix("http://").split(":")
    try:
        with TcpProxy((host, int(port))) as proxy:
            token = double.configuration(WARDEN).api_key["authorization"]
            config = tmp_path / "config.yaml"
            config.write_text(yaml.safe_dump({"informer": INFORMER}))
            process.args = [
                "--kubeconfig", str(kubeconfig(tmp_path / "kubeconfig", proxy.url, token)),
                "--config", str(config),
            ]  # fmt: skip
            warden = Kube(double.api_client(WARDEN))
            warden.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            with process as endpoint:  # waits for /readyz: TLS up and the cache synced
                yield Cut(double, proxy, endpoint, warden)
    finally:
        double.stop()


def test_while_the_cache_is_stale_an_in_use_delete_is_refused_and_readiness_is_false(cut: Cut) -> None:
    cut.warden.create(COMPONENT_VERSION, cv_body())
    assert cut.readyz().status_code == 200

    cut.proxy.cut(reset=True)
    wait_until(lambda: cut.readyz().status_code == 503, what="readiness false while the watches are down")
    wait_until(lambda: every_kind_down(cut.readyz().text), what="readiness naming every cut kind")
    assert cut.readyz().text.startswith("cluster state stale: ")

    status, message = rejection(cut.double)  # this replica cannot check a binding either
    assert status == 503
    assert message.startswith(
        f'admission webhook "{VALIDATING}" denied the request: Release {NS}/web denied by '
        "catalog.release-binding: cluster state is stale ("
    ), message
    with admitted_elsewhere(cut.double):
        cut.warden.create(RELEASE, release_body("web"))  # bound after the cut: this cache cannot know

    status, message = cut.delete_cv()
    assert status == 503
    assert message.startswith(STALE_DENIAL), message
    assert message.endswith("), so catalog.componentversion-in-use cannot decide; retry shortly"), message
    assert f"{COMPONENT_VERSION} watch down since " in message
    assert f"{RELEASE} watch down since " in message

    cut.proxy.heal()
    wait_until(lambda: cut.readyz().status_code == 200, what="the cache relisted by itself")
    status, message = cut.delete_cv()
    assert status == 403
    detail = MSG_CV_IN_USE.format(count=1, releases=f"{NS}/web")
    assert message == (
        f'admission webhook "{VALIDATING}" denied the request: ComponentVersion {NS}/demo-v1 denied by '
        f"catalog.componentversion-in-use: {detail}"
    )
    assert cut.warden.get(COMPONENT_VERSION, "demo-v1", NS)["metadata"]["name"] == "demo-v1"
    assert cut.double.failures == []
