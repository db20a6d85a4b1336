"""Pytest fixtures for tests against the real control plane with catalog-warden installed.

Import them into a directory's ``conftest.py`` (``tests/cluster/conftest.py`` does). One control
plane per session: a directory importing these shares the session's :class:`Cluster` only if the
fixtures are imported once, from a common ``conftest.py``; isolation is a namespace per test
(:func:`ns`) and names unique to the test for cluster-scoped objects (:func:`name`).

A missing prerequisite (kubectl, the control plane build) fails every test that needs the cluster
with one line saying what to run; nothing is skipped.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.support.controlplane.cluster import (
    NAMESPACE,
    SERVER_ACCOUNT,
    SIDECAR_ACCOUNT,
    Cluster,
    ServerProcess,
    SidecarProcess,
    installed,
    missing_prerequisite,
)
from webhook.kube.client import Kube, NotFound

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The control plane with ``manifests/`` applied and one ready server behind the Service.

    Everything lives under pytest's temporary directory (kept for the last three runs), so the
    processes' logs can be read after a failure; etcd's data (64 MB of preallocated WAL) is not kept.
    """
    missing = missing_prerequisite()
    if missing:
        pytest.fail(missing, pytrace=False)
    workdir = tmp_path_factory.mktemp("cluster")
    try:
        with installed(workdir) as started:
            yield started
    finally:
        shutil.rmtree(workdir / "controlplane" / "etcd", ignore_errors=True)


@pytest.fixture
def admin(cluster: Cluster) -> Kube:
    """The project's ``Kube`` client as the cluster admin (``system:masters``)."""
    return cluster.admin


@pytest.fixture
def server(cluster: Cluster) -> ServerProcess:
    """The session's ``catalog-warden serve`` (behind the Service), running and ready.

    A test may stop, kill or restart it; the next test that asks gets it running again, and
    kube-apiserver reaching it, before it starts.
    """
    process = next(p for p in cluster.processes if isinstance(p, ServerProcess))
    if not process.alive:
        process.start()
        cluster.wait_webhook()
    else:
        process.wait_ready()
    return process


@pytest.fixture
def user_kubeconfig(cluster: Cluster) -> Callable[..., Path]:
    """``user_kubeconfig(name, groups=())``: a kubeconfig authenticating as that human (client certificate)."""

    def make(name: str, groups: Sequence[str] = ()) -> Path:
        return cluster.user(name, groups)

    return make


@pytest.fixture
def account_kubeconfig(cluster: Cluster) -> Callable[[str, str], Path]:
    """``account_kubeconfig(namespace, name)``: a bound token of that ServiceAccount (created if missing)."""
    return cluster.ensure_service_account


@pytest.fixture
def kube_as(cluster: Cluster) -> Callable[[Path], Kube]:
    """``kube_as(kubeconfig)``: the project's ``Kube`` client acting with that kubeconfig's identity."""
    return cluster.kube


@pytest.fixture
def server_kube(cluster: Cluster) -> Kube:
    """``Kube`` as the server's ServiceAccount (what ``manifests/deploy/rbac.yaml`` grants it)."""
    return cluster.kube(cluster.service_account(NAMESPACE, SERVER_ACCOUNT))


@pytest.fixture
def warden_kube(cluster: Cluster) -> Kube:
    """``Kube`` as the sidecar's ServiceAccount, the ``warden`` identity."""
    return cluster.kube(cluster.service_account(NAMESPACE, SIDECAR_ACCOUNT))


@pytest.fixture
def kubectl(cluster: Cluster) -> Kubectl:
    """``kubectl(*args, kubeconfig=None, input=None)``: the machine's kubectl (default: as admin).

    Returns the ``CompletedProcess`` (text); never raises on a non-zero exit.
    """
    return cluster.kubectl


@pytest.fixture
def new_server(cluster: Cluster) -> Iterator[Callable[..., ServerProcess]]:
    """``new_server(name, endpoint=False, args=())``: another serve process, stopped after the test."""
    started: list[ServerProcess] = []

    def make(name: str, endpoint: bool = False, args: Sequence[str] = ()) -> ServerProcess:
        process = cluster.server(name, endpoint=endpoint, args=args)
        started.append(process)
        return process

    yield make
    for process in started:
        process.stop()
        cluster.remove_endpoint(process.name)
        cluster.processes.remove(process)


@pytest.fixture
def sidecar(cluster: Cluster) -> Iterator[Callable[..., SidecarProcess]]:
    """``sidecar(name="sidecar", config=None, args=())``: a sidecar process (not started), stopped after the test.

    ``config`` is a ``--config`` file or directory (default: the shipped ConfigMap, mounted as a directory).
    """
    started: list[SidecarProcess] = []

    def make(name: str = "sidecar", config: Path | None = None, args: Sequence[str] = ()) -> SidecarProcess:
        process = cluster.sidecar(name, config, args)
        started.append(process)
        return process

    yield make
    for process in started:
        process.stop()
        cluster.processes.remove(process)


def unique_name(request: pytest.FixtureRequest, limit: int = 40) -> str:
    """A DNS label from the test's name plus a short random suffix (reruns never collide)."""
    base = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[: limit - 6].strip("-")
    return f"{base}-{uuid.uuid4().hex[:5]}"


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    return unique_name(request)


@pytest.fixture
def ns(cluster: Cluster, name: str) -> Iterator[str]:
    """A fresh namespace for this test, deleted afterwards (the namespace controller empties it)."""
    cluster.namespace(name)
    yield name
    with contextlib.suppress(NotFound):
        cluster.admin.request("DELETE", f"/api/v1/namespaces/{name}")
