"""Issue 11's watch cut on the real control plane: a ``catalog-warden serve`` process whose
kubeconfig goes through a TCP proxy in front of kube-apiserver, alone behind the webhook Service.

The promise under test: while its cache is stale the server never allows what it cannot check.
The proxy is cut mid-run (an RST on every connection, new ones hang): ``/readyz`` turns 503
naming every stale kind within the configured ``informer.maxWatchGap``; deleting an in-use
ComponentVersion is refused 503 ("cluster state is stale"), and so is a Release binding. A
Release created during the cut, admitted by another replica whose cache is live (the session's
server, briefly put behind the Service instead), binds a second ComponentVersion this server
cannot know about: deleting that one is refused 503 too, never allowed. After the heal the cache
recovers by itself (``/readyz`` 200) and both deletes are refused 403, naming their Releases,
the one created during the cut included.

Which server kube-apiserver calls is forced, not hoped for: only one endpoint is ready at a time
(its resolver skips the others), and the connections it kept alive to the one taken out are closed
(the session's server is stopped; this server sits behind a second proxy, cut and healed at once).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from policies.catalog_deletion import MSG_CV_IN_USE
from policies.kinds import COMPONENT_VERSION, RELEASE
from tests.cluster.faults import kubeconfig_via, upstream_of
from tests.kube.tcp_proxy import TcpProxy
from tests.support.controlplane.cluster import NAMESPACE, SERVER_ACCOUNT, Cluster, ServerProcess, wait_for
from webhook.kube.cache import DEFAULT_KINDS
from webhook.kube.client import ApiError, Kube, NotFound

SOLAR = "solar.opendefense.cloud/v1alpha1"
VALIDATING = "catalog.validate.catalog-warden.io"
MAX_WATCH_GAP = 1.0
INFORMER = {"maxWatchGap": f"{MAX_WATCH_GAP:.0f}s", "watchTimeout": "5s", "requestTimeout": "1s"}
"""Bounds small enough for a test (docs/configuration.md ``informer.*``)."""
STALE = "cluster state is stale ("
STALE_SLACK = 10.0
"""Seconds past ``maxWatchGap`` allowed for the probe to say so on a busy 2-core machine."""


def cv(name: str, ns: str) -> dict[str, object]:
    return {"apiVersion": SOLAR, "kind": "ComponentVersion", "metadata": {"name": name, "namespace": ns},
            "spec": {"componentRef": {"name": "demo"}, "tag": name}}  # fmt: skip


def release(name: str, version: str, ns: str) -> dict[str, object]:
    return {"apiVersion": SOLAR, "kind": "Release", "metadata": {"name": name, "namespace": ns},
            "spec": {"componentVersionRef": {"name": version}}}  # fmt: skip


@dataclass
class Cut:
    """The proxied server ``watcher``, its two proxies, and the session's server ``other``."""

    cluster: Cluster
    watcher: ServerProcess
    apiserver: TcpProxy
    """Between ``watcher``'s cache and kube-apiserver: the one the test cuts."""
    front: TcpProxy
    """Between kube-apiserver and ``watcher``'s webhook port: cut and healed to close kept-alive calls."""
    other: ServerProcess

    def route_to_watcher(self) -> None:
        self.cluster.point_service_at(self.watcher.name, self.front.port)
        self.cluster.point_service_at(self.other.name, self.other.port, ready=False)
        self.other.stop()  # its kept-alive connections from kube-apiserver close with it

    def route_to_other(self) -> None:
        self.other.start()
        self.cluster.point_service_at(self.other.name, self.other.port)
        self.cluster.point_service_at(self.watcher.name, self.front.port, ready=False)
        self.front.cut()  # closes kube-apiserver's kept-alive connections to watcher
        self.front.heal()


@pytest.fixture
def cut(cluster: Cluster, server: ServerProcess, new_server: Callable[..., ServerProcess],
        tmp_path: Path) -> Iterator[Cut]:  # fmt: skip
    config = tmp_path / "config"  # the shipped ConfigMap as mounted, plus one file with the test's bounds
    shutil.copytree(cluster.config, config)
    (config / "zz-informer.yaml").write_text(yaml.safe_dump({"informer": INFORMER}))
    with TcpProxy(upstream_of(cluster.plane.url)) as apiserver:
        kubeconfig = kubeconfig_via(
            cluster.service_account(NAMESPACE, SERVER_ACCOUNT), f"https://127.0.0.1:{apiserver.port}",
            tmp_path / "server.kubeconfig",
        )  # fmt: skip
        args = ["--kubeconfig", str(kubeconfig), "--config", str(config)]
        watcher = new_server("watch-cut", endpoint=False, args=args)
        with TcpProxy(("127.0.0.1", watcher.port)) as front:
            watcher.start()
            state = Cut(cluster, watcher, apiserver, front, server)
            try:
                state.route_to_watcher()
                cluster.wait_webhook()  # answered: by watcher, the only server running
                yield state
            finally:
                cluster.remove_endpoint(watcher.name)
                cluster.point_service_at(server.name, server.port)
                if not server.alive:
                    server.start()
                cluster.wait_webhook()


def refusal(call: Callable[[], object]) -> tuple[int, str]:
    """The apiserver's refusal of ``call`` (status, message); fails the test if it was allowed."""
    try:
        call()
    except ApiError as exc:
        return exc.status, exc.message
    raise AssertionError("allowed, but it must have been refused")


def status_of(call: Callable[[], object]) -> int:
    """The status of ``call``'s refusal; 0 when it was allowed."""
    try:
        call()
    except ApiError as exc:
        return exc.status
    return 0


def answered(call: Callable[[], object]) -> tuple[int, str]:
    """Like :func:`refusal`, retried while kube-apiserver still dials a server just taken out
    (its EndpointSlice informer lags by milliseconds): such a call fails in the dial, a 500."""
    seen: list[tuple[int, str]] = []

    def done() -> bool:
        seen[:] = [refusal(call)]
        return not (seen[0][0] == 500 and "failed calling webhook" in seen[0][1])

    wait_for(done, "an answer from the routed server")
    return seen[0]


def admitted(call: Callable[[], object]) -> None:
    """Run ``call`` until admitted, retried while the server just taken out is still called
    (a 503 from its stale cache, or a 500 from a refused dial)."""

    def done() -> bool:
        try:
            call()
        except ApiError as exc:
            if exc.status in (500, 503):
                return False
            raise
        return True

    wait_for(done, "the live replica to admit it")


def stale_readiness(watcher: ServerProcess) -> bool:
    status, body = watcher.readiness()
    return status == 503 and all(f"{kind} watch down since " in body for kind in DEFAULT_KINDS)


def stale_denial(kind: str, ref: str, rule: str) -> str:
    return f'admission webhook "{VALIDATING}" denied the request: {kind} {ref} denied by {rule}: {STALE}'


def in_use(ref: str, releases: str) -> str:
    detail = MSG_CV_IN_USE.format(count=1, releases=releases)
    return (
        f'admission webhook "{VALIDATING}" denied the request: ComponentVersion {ref} denied by '
        f"catalog.componentversion-in-use: {detail}"
    )


def test_while_the_cache_is_stale_in_use_deletes_are_refused_and_after_the_heal_it_recovers(
    cut: Cut, admin: Kube, ns: str
) -> None:
    def delete(name: str) -> Callable[[], object]:
        return lambda: admin.delete(COMPONENT_VERSION, name, ns)

    def dry_run_delete(name: str) -> Callable[[], object]:
        path = admin.resource(COMPONENT_VERSION).path(ns, name)
        return lambda: admin.request("DELETE", path, query=[("dryRun", "All")], body={})

    for name in ("demo-v1", "demo-v2"):
        admin.create(COMPONENT_VERSION, cv(name, ns))
    admin.create(RELEASE, release("web", "demo-v1", ns))
    wait_for(lambda: status_of(dry_run_delete("demo-v1")) == 403, "the watcher's cache to see Release web")
    assert cut.watcher.readiness() == (200, "ok")

    cut.apiserver.cut(reset=True)
    started = time.monotonic()
    wait_for(lambda: stale_readiness(cut.watcher), "/readyz naming every kind stale", MAX_WATCH_GAP + STALE_SLACK)
    assert time.monotonic() - started >= MAX_WATCH_GAP  # not before the bound either
    assert cut.watcher.readiness()[1].startswith("cluster state stale: ")

    status, message = refusal(delete("demo-v1"))
    assert status == 503
    assert message.startswith(stale_denial("ComponentVersion", f"{ns}/demo-v1", "catalog.componentversion-in-use"))
    assert message.endswith("), so catalog.componentversion-in-use cannot decide; retry shortly"), message
    assert f"{COMPONENT_VERSION} watch down since " in message and f"{RELEASE} watch down since " in message
    status, message = refusal(lambda: admin.create(RELEASE, release("late", "demo-v2", ns)))
    assert status == 503
    assert message.startswith(stale_denial("Release", f"{ns}/late", "catalog.release-binding")), message

    # Another replica, whose cache is live, admits the binding; this one's cache cannot know it.
    cut.route_to_other()
    admitted(lambda: admin.create(RELEASE, release("late", "demo-v2", ns)))
    cut.route_to_watcher()
    assert stale_readiness(cut.watcher)
    status, message = answered(delete("demo-v2"))
    assert status == 503
    assert message.startswith(stale_denial("ComponentVersion", f"{ns}/demo-v2", "catalog.componentversion-in-use"))

    cut.apiserver.heal()
    cut.watcher.wait_ready()  # relisted by itself: requestTimeout plus the backoff (at most 10 s)
    assert cut.watcher.readiness() == (200, "ok")
    assert refusal(delete("demo-v2")) == (403, in_use(f"{ns}/demo-v2", f"{ns}/late"))
    assert refusal(delete("demo-v1")) == (403, in_use(f"{ns}/demo-v1", f"{ns}/web"))
    for name in ("demo-v1", "demo-v2"):
        try:
            assert "deletionTimestamp" not in admin.get(COMPONENT_VERSION, name, ns)["metadata"]
        except NotFound:
            raise AssertionError(f"ComponentVersion {ns}/{name} was deleted") from None
