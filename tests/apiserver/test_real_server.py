"""One end-to-end check of the double against the project's own `catalog-warden serve` (state from YAML)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from policies.catalog import MSG_CV_UNAVAILABLE
from tests.support.apiserver import ApiServerDouble, TestCA
from tests.support.apiserver.fixtures import PROJECT_MANIFESTS

STATE = PROJECT_MANIFESTS.parent / "examples" / "state"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def warden(tmp_path: Path, ca: TestCA) -> Iterator[str]:
    """`catalog-warden serve --state examples/state` on free ports, with a certificate from the test CA."""
    ca.issue().write(tmp_path / "certs")
    port, probe = free_port(), free_port()
    command = [
        sys.executable,
        "-m",
        "webhook.cli",
        "serve",
        "--state",
        str(STATE),
        "--cert-dir",
        str(tmp_path / "certs"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--probe-host",
        "127.0.0.1",
        "--probe-port",
        str(probe),
        "--log-level",
        "error",
    ]
    process = subprocess.Popen(command, cwd=PROJECT_MANIFESTS.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            if process.poll() is not None:
                output = process.stdout.read().decode() if process.stdout else ""
                pytest.fail(f"catalog-warden serve exited with {process.returncode}: {output}")
            try:
                if httpx.get(f"http://127.0.0.1:{probe}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("catalog-warden serve did not become ready within 20 s")
            time.sleep(0.05)
        yield f"https://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def release(component_version: str) -> dict[str, Any]:
    return {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "Release",
        "metadata": {"name": "r", "namespace": "team-a"},
        "spec": {"componentVersionRef": {"name": component_version}},
    }


@pytest.mark.skipif(not (STATE / "catalog.yaml").exists(), reason="examples/state/catalog.yaml not present")
def test_release_bound_to_a_red_component_version_is_rejected_by_the_real_server(warden: str, ca: TestCA) -> None:
    with ApiServerDouble(PROJECT_MANIFESTS, webhook_base_url=warden, ca_bundle=ca.cert_pem) as double:
        client.CoreV1Api(double.admin).create_namespace({"metadata": {"name": "team-a"}})
        api = client.CustomObjectsApi(double.admin)
        with pytest.raises(ApiException) as exc:
            api.create_namespaced_custom_object(
                "solar.opendefense.cloud", "v1alpha1", "team-a", "releases", release("ocm-demo-v1.1.0")
            )
        body = json.loads(exc.value.body)
        detail = MSG_CV_UNAVAILABLE.format(
            cv="team-a/ocm-demo-v1.1.0",
            reason="ArtifactMissing",
            since="2026-11-28T10:15:00Z",
            detail="manifest not found after 3 checks",
        )
        assert (body["code"], body["message"]) == (
            403,
            'admission webhook "catalog.validate.catalog-warden.io" denied the request: '
            f"Release team-a/r denied by catalog.release-binding: {detail}",
        )
        created = api.create_namespaced_custom_object(
            "solar.opendefense.cloud", "v1alpha1", "team-a", "releases", release("ocm-demo-v1.2.0")
        )
        assert created["metadata"]["name"] == "r"
