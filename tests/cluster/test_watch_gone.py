"""A real 410 Gone to the informer: etcd compacted while the cache's watch is disconnected.

The informer (``webhook.kube.cache.InformerCache``, in process, as admin through a proxy) watches
ReferenceGrants, which kube-apiserver serves without its watch cache
(``launcher.UNCACHED_RESOURCES``), so a watch from a compacted resourceVersion is answered by
etcd's compaction. The interleaving is forced through the proxy: the server ends the watch
(``timeoutSeconds``), the reflector's resume from its last resourceVersion is held at the proxy,
an object is deleted and one created, etcd is compacted past that version, and only then is the
resume let through: it gets 410 ("too old resource version"), and the cache must relist and show
exactly what the apiserver holds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from policies.kinds import REFERENCE_GRANT
from tests.cluster.faults import HoldingProxy, etcd_compact, etcd_revision, kubeconfig_via, upstream_of
from tests.support.controlplane.cluster import Cluster, wait_for
from webhook.kube.cache import InformerCache
from webhook.kube.client import Kube, build_api_client

SOLAR = "solar.opendefense.cloud/v1alpha1"
BOUNDS = {"watch_timeout": 1, "max_watch_gap": 20, "request_timeout": 30, "backoff": (0.05, 0.2)}
"""Watches end every second (so a resume comes soon); a held resume waits up to 21 s for its answer."""


def grant(name: str, ns: str) -> dict[str, object]:
    return {"apiVersion": SOLAR, "kind": "ReferenceGrant", "metadata": {"name": name, "namespace": ns}, "spec": {}}


@pytest.fixture
def proxy(cluster: Cluster) -> Iterator[HoldingProxy]:
    with HoldingProxy(upstream_of(cluster.plane.url)) as p:
        yield p


@pytest.fixture
def cache(cluster: Cluster, proxy: HoldingProxy, tmp_path: Path) -> Iterator[InformerCache]:
    via = kubeconfig_via(cluster.plane.kubeconfig, f"https://127.0.0.1:{proxy.port}", tmp_path / "admin.kubeconfig")
    c = InformerCache(Kube(build_api_client(via)), (REFERENCE_GRANT,), **BOUNDS).start()  # type: ignore[arg-type]
    assert c.wait_synced(30), "the informer did not list ReferenceGrants"
    yield c
    c.stop()


def names(cache: InformerCache, ns: str) -> set[str]:
    return {o["metadata"]["name"] for o in cache.list(REFERENCE_GRANT, ns)}


def test_a_resume_from_a_compacted_version_gets_410_and_the_cache_relists(
    cluster: Cluster, admin: Kube, proxy: HoldingProxy, cache: InformerCache, ns: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.INFO, logger="catalog_warden.cache")
    for name in ("doomed", "kept"):
        admin.create(REFERENCE_GRANT, grant(name, ns))
    wait_for(lambda: names(cache, ns) == {"doomed", "kept"}, "the cache to see both grants")
    relists, failures = cache.relists(REFERENCE_GRANT), cache.failures(REFERENCE_GRANT)

    proxy.hold()
    # The open watch ends within timeoutSeconds; the reflector's resume then waits at the proxy.
    wait_for(lambda: proxy.held() > 0, "the reflector's resumed watch to be held at the proxy")
    version = int(cache.resource_version(REFERENCE_GRANT))
    admin.delete(REFERENCE_GRANT, "doomed", ns)
    admin.create(REFERENCE_GRANT, grant("fresh", ns))
    revision = etcd_revision(cluster.plane.etcd_url)
    etcd_compact(cluster.plane.etcd_url, revision)
    assert version < revision
    assert names(cache, ns) == {"doomed", "kept"}  # nothing reached the cache while held
    proxy.release()

    wait_for(lambda: names(cache, ns) == {"kept", "fresh"}, "the cache to relist after the 410")
    assert cache.relists(REFERENCE_GRANT) == relists + 1
    assert cache.failures(REFERENCE_GRANT) == failures + 1
    expired = [r for r in caplog.records if r.getMessage() == "watch expired, relisting"]
    assert [getattr(r, "fields", None) for r in expired] == [{"kind": str(REFERENCE_GRANT)}]
    wait_for(lambda: cache.synced, "the cache live again")
    listed = admin.list(REFERENCE_GRANT, ns)["items"]
    assert {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in listed} == {
        o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in cache.list(REFERENCE_GRANT, ns)
    }
