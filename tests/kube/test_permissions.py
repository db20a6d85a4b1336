"""The webhook server's cache needs nothing but list and watch, which is all its ServiceAccount has.

The cache is built as ``catalog-warden serve`` builds it (every kind a rule reads) and connects as
the server's own ServiceAccount; every request the apiserver double saw from it, through the first
sync and the watches that follow, is judged by the manifests' RBAC (tests/support/rbac.py).
"""

from __future__ import annotations

from tests.core.test_manifests import SERVER, rbac
from tests.support.apiserver import ApiServerDouble
from tests.support.rbac import attributes
from tests.support.server import wait_until
from webhook.kube.cache import DEFAULT_KINDS, InformerCache
from webhook.kube.client import Kube


def watched(apiserver: ApiServerDouble) -> set[str]:
    return {r.path for r in apiserver.requests if r.user == SERVER and r.params.get("watch")}


def test_every_request_of_the_server_cache_is_a_list_or_watch_its_role_allows(apiserver: ApiServerDouble) -> None:
    cache = InformerCache(Kube(apiserver.api_client(SERVER))).start()
    try:
        assert cache.wait_synced(10), "the server's cache did not sync"
        wait_until(lambda: len(watched(apiserver)) == len(DEFAULT_KINDS), what="a watch per cached kind")
    finally:
        cache.stop()
    sent = [attributes(r.method, r.path, r.params) for r in apiserver.requests if r.user == SERVER]
    assert sent and {a.verb for a in sent} == {"list", "watch"}
    allowed = rbac()
    assert [str(a) for a in sent if not allowed.allows(SERVER, a)] == []
