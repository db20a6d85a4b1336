"""End to end: apiserver double + the real webhook server over TLS + the project's manifests.

The webhook server reads cluster state through the informer cache, which lists and watches the same
double; requests go through the official `kubernetes` client, exactly as kubectl's would.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from policies.catalog import MSG_CV_UNAVAILABLE
from policies.kinds import COMPONENT_VERSION, NAMESPACE
from policies.model import GroupKind, Obj
from policies.view import View, staleness_of
from tests.kube.conftest import NS, WARDEN
from tests.support.apiserver import ApiServerDouble
from tests.support.apiserver.fixtures import PROJECT_MANIFESTS
from tests.support.server import ServerThread, free_port, make_certs, wait_until
from webhook.kube.cache import InformerCache
from webhook.kube.client import Kube
from webhook.kube.writes import Writer

ALICE = "alice@example.com"
SOLAR, V1 = "solar.opendefense.cloud", "v1alpha1"
SINCE = "2026-11-28T09:15:00Z"
VALIDATING = "catalog.validate.catalog-warden.io"


class LateView:
    """The server needs its view at construction, the double the server's URL: bind the cache afterwards."""

    def __init__(self) -> None:
        self.target: View | None = None

    @property
    def synced(self) -> bool:
        return self.target is not None and self.target.synced

    def staleness(self) -> str:
        return staleness_of(self.target)

    def get(self, kind: GroupKind, name: str, namespace: str = "") -> Obj | None:
        assert self.target is not None
        return self.target.get(kind, name, namespace)

    def list(
        self, kind: GroupKind, namespace: str | None = None, labels: Mapping[str, str] | None = None
    ) -> Sequence[Obj]:
        assert self.target is not None
        return self.target.list(kind, namespace, labels)

    def indexed(self, kind: GroupKind, index: str, key: str) -> Sequence[Obj]:
        assert self.target is not None
        return self.target.indexed(kind, index, key)


def cv_body() -> dict[str, Any]:
    return {
        "apiVersion": f"{SOLAR}/{V1}",
        "kind": "ComponentVersion",
        "metadata": {"name": "demo-v1", "namespace": NS, "labels": {"solar.opendefense.cloud/component": "demo"}},
        "spec": {"tag": "v1", "componentRef": {"name": "demo"}},
    }


def release_body(name: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": f"{SOLAR}/{V1}",
        "kind": "Release",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"componentVersionRef": {"name": "demo-v1"}},
    }


def create_release(double: ApiServerDouble, name: str = "web") -> dict[str, Any]:
    api = client.CustomObjectsApi(double.api_client(ALICE, ["team-a-editors"]))
    return api.create_namespaced_custom_object(SOLAR, V1, NS, "releases", release_body(name))


def rejection(double: ApiServerDouble) -> tuple[int, str]:
    with pytest.raises(client.ApiException) as err:
        create_release(double)
    return err.value.status, json.loads(err.value.body)["message"]


@dataclass
class Cluster:
    double: ApiServerDouble
    cache: InformerCache
    server: ServerThread
    warden: Kube


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    certs = make_certs(tmp_path / "certs")
    view = LateView()
    server = ServerThread(certs, view=view)  # type: ignore[arg-type]
    double = ApiServerDouble(
        PROJECT_MANIFESTS, webhook_base_url=server.endpoint.url, ca_bundle=(certs / "ca.crt").read_bytes()
    ).start()
    warden = Kube(double.api_client(WARDEN))
    cache = InformerCache(warden).start()
    view.target = cache
    try:
        warden.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        with server:  # waits for /readyz: TLS up and the cache synced
            yield Cluster(double, cache, server, warden)
    finally:
        cache.stop()
        double.stop()


def test_release_binding_to_a_red_component_version_is_rejected_with_the_webhooks_message(cluster: Cluster) -> None:
    cv = cluster.warden.create(COMPONENT_VERSION, cv_body())
    red = {
        "conditions": [
            {
                "type": "Available",
                "status": "False",
                "reason": "ArtifactMissing",
                "message": "manifest unknown for tag v1",
                "lastTransitionTime": SINCE,
            }
        ]
    }
    assert Writer(cluster.warden).patch_status(COMPONENT_VERSION, cv, red)
    wait_until(
        lambda: (cluster.cache.get(COMPONENT_VERSION, "demo-v1", NS) or {}).get("status") == red,
        what="the red status in the cache",
    )

    status, message = rejection(cluster.double)

    detail = MSG_CV_UNAVAILABLE.format(
        cv=f"{NS}/demo-v1", reason="ArtifactMissing", since=SINCE, detail="manifest unknown for tag v1"
    )
    assert status == 403
    assert message == (
        f'admission webhook "{VALIDATING}" denied the request: '
        f"Release {NS}/web denied by catalog.release-binding: {detail}"
    )
    assert cluster.double.failures == []


def test_with_the_webhook_down_failure_policy_fail_rejects_as_the_apiserver_does(cluster: Cluster) -> None:
    cluster.warden.create(COMPONENT_VERSION, cv_body())
    cluster.server.__exit__(None, None, None)  # the webhook server goes away
    status, message = rejection(cluster.double)
    url = f"{cluster.server.endpoint.url}/validate/catalog?timeout=5s"
    host = url.split("/")[2]
    assert status == 500
    assert message == (
        f'Internal error occurred: failed calling webhook "{VALIDATING}": '
        f'failed to call webhook: Post "{url}": dial tcp {host}: connect: connection refused'
    )


def test_with_the_webhook_down_failure_policy_ignore_lets_it_pass(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    shutil.copytree(PROJECT_MANIFESTS, manifests)
    validating = manifests / "webhooks" / "validating.yaml"
    config = yaml.safe_load(validating.read_text())
    for hook in config["webhooks"]:
        hook["failurePolicy"] = "Ignore"
    validating.write_text(yaml.safe_dump(config))
    certs = make_certs(tmp_path / "certs")
    down = f"https://127.0.0.1:{free_port()}"  # nothing listens there
    with ApiServerDouble(manifests, webhook_base_url=down, ca_bundle=(certs / "ca.crt").read_bytes()) as double:
        Kube(double.admin).create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        created = create_release(double)
        assert created["metadata"]["name"] == "web"
        assert [name for name, _request in double.webhook_calls] == [VALIDATING]  # called, failed, ignored
