"""The informer cache under transport faults: a watch connection reset, closed mid-stream or
blackholed (half-open) between the cache and the apiserver double.

Every fault must end the same way: the kinds it cut count as stale (``synced`` false, the stale
kinds named) while they are down beyond the bound, the reflector threads stay alive, and once the
network heals the cache relists by itself and shows what was written during the fault. The
timing is forced through the proxy's state and the cache's own answers, never by sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3
from kubernetes import client

from policies import kinds
from tests.kube.conftest import NS, WARDEN, MakeCache
from tests.kube.tcp_proxy import TcpProxy
from tests.kube.test_cache import cv, release
from tests.support.apiserver import ApiServerDouble
from tests.support.server import wait_until
from webhook.kube.cache import InformerCache, Liveness
from webhook.kube.client import Kube, Unreachable, WatchStream

KINDS = (kinds.COMPONENT_VERSION, kinds.RELEASE)
BOUNDS: dict[str, Any] = {"watch_timeout": 2, "max_watch_gap": 0.5, "request_timeout": 0.5, "backoff": (0.05, 0.2)}
"""Small enough for a test: a watch may be down 0.5 s, silent 2.5 s; a hung request gives up after 0.5 s."""


@pytest.fixture
def proxy(apiserver: ApiServerDouble) -> Iterator[TcpProxy]:
    host, port = apiserver.url.removeprefix("http://").split(":")
    with TcpProxy((host, int(port))) as p:
        yield p


@pytest.fixture
def proxied(apiserver: ApiServerDouble, kube: Kube, proxy: TcpProxy) -> Kube:
    """The warden's connection, through the proxy (``kube`` first: it creates the namespace)."""
    configuration = apiserver.configuration(WARDEN)
    configuration.host = proxy.url
    return Kube(client.ApiClient(configuration))


def watching(cache: InformerCache) -> bool:
    return all(cache.watches(k) >= 1 for k in cache.kinds()) and cache.synced


def reflectors_alive() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("informer-") and t.is_alive())


@pytest.mark.parametrize("reset", [True, False], ids=["reset", "closed-mid-stream"])
def test_a_cut_watch_goes_stale_then_relists_by_itself(
    admin: Kube, proxied: Kube, proxy: TcpProxy, make_cache: MakeCache, apiserver: ApiServerDouble, reset: bool
) -> None:
    cache = make_cache(kube=proxied, kinds=KINDS, **BOUNDS)
    assert cache.wait_synced(10)
    wait_until(lambda: watching(cache), what="every watch open through the proxy")

    proxy.cut(reset=reset)
    wait_until(lambda: not cache.synced, what="the cache not synced once a cut kind is stale")
    wait_until(lambda: all(k.stale for k in cache.liveness()), what="every cut kind counted stale")
    stale = cache.staleness()
    for kind in KINDS:
        assert f"{kind} watch down since " in stale, stale
    assert {k.state for k in cache.liveness()} == {Liveness.DOWN}
    admin.create(kinds.COMPONENT_VERSION, cv("after-cut"))
    admin.create(kinds.RELEASE, release("bound-after-cut", "after-cut"))
    assert cache.get(kinds.COMPONENT_VERSION, "after-cut", NS) is None
    assert reflectors_alive() == len(KINDS)

    proxy.heal()
    wait_until(
        lambda: cache.synced and cache.get(kinds.RELEASE, "bound-after-cut", NS) is not None,
        what="the cache relisted what was written during the cut",
    )
    assert cache.get(kinds.COMPONENT_VERSION, "after-cut", NS) is not None
    assert cache.staleness() == ""
    assert all(cache.relists(k) >= 1 and cache.failures(k) >= 1 for k in KINDS)
    assert reflectors_alive() == len(KINDS)
    assert apiserver.failures == []


def test_a_blackholed_watch_is_noticed_by_its_silence_and_relisted(
    admin: Kube, proxied: Kube, proxy: TcpProxy, make_cache: MakeCache, apiserver: ApiServerDouble
) -> None:
    cache = make_cache(kube=proxied, kinds=KINDS, **BOUNDS)
    assert cache.wait_synced(10)
    wait_until(lambda: watching(cache), what="every watch open through the proxy")

    proxy.blackhole()  # no RST, no FIN: the open watches just stop carrying bytes
    assert proxy.open_links() == 0
    admin.create(kinds.COMPONENT_VERSION, cv("during-blackhole"))
    wait_until(lambda: not cache.synced, what="the cache not synced once a silent kind is stale")
    wait_until(lambda: all(k.stale for k in cache.liveness()), what="every silent kind counted stale")
    stale = cache.staleness()
    for kind in KINDS:
        assert f"{kind} watch silent since " in stale or f"{kind} watch down since " in stale, stale
    assert cache.get(kinds.COMPONENT_VERSION, "during-blackhole", NS) is None
    assert reflectors_alive() == len(KINDS)

    proxy.heal()  # new connections flow again; the blackholed ones stay dead, only the read timeout ends them
    wait_until(
        lambda: cache.synced and cache.get(kinds.COMPONENT_VERSION, "during-blackhole", NS) is not None,
        what="the cache relisted after the silent watch timed out",
    )
    assert all(cache.failures(k) >= 1 for k in KINDS)
    assert reflectors_alive() == len(KINDS)
    assert apiserver.failures == []


class _Response:
    """A urllib3 response whose body breaks as a dropped chunked stream does."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def stream(self, amt: int | None = None, decode_content: bool = True) -> Iterator[bytes]:
        yield from self.chunks
        raise urllib3.exceptions.ProtocolError("Response ended prematurely")

    def close(self) -> None: ...

    def release_conn(self) -> None: ...

    def shutdown(self) -> None: ...


def test_a_broken_watch_body_raises_the_clients_typed_error() -> None:
    stream = WatchStream(_Response([b'{"type": "BOOKMARK", "object": {}}\n']), "GET /x (watch)")  # type: ignore[arg-type]
    events = iter(stream)
    assert next(events) == {"type": "BOOKMARK", "object": {}}
    with pytest.raises(Unreachable, match=r"^0 Unreachable: GET /x \(watch\): Response ended prematurely$"):
        next(events)


class _RawlyBroken:
    """A watch stream that fails with the raw urllib3 error, as the client raised it before the fix."""

    def __iter__(self) -> Iterator[dict[str, Any]]:
        raise urllib3.exceptions.ProtocolError("Response ended prematurely")
        yield {}

    def close(self) -> None: ...


def test_a_raw_protocol_error_in_the_stream_relists_instead_of_ending_the_thread(
    admin: Kube, kube: Kube, make_cache: MakeCache
) -> None:
    breaks = {"left": 1}
    real_stream = kube.stream

    def stream(path: str, query: Any, timeout: Any = None) -> Any:
        if breaks["left"]:
            breaks["left"] -= 1
            return _RawlyBroken()
        return real_stream(path, query, timeout)

    kube.stream = stream  # type: ignore[method-assign]
    cache = make_cache(kinds=[kinds.COMPONENT_VERSION], backoff=(0.01, 0.05))
    wait_until(lambda: cache.relists(kinds.COMPONENT_VERSION) == 1, what="a relist after the broken stream")
    admin.create(kinds.COMPONENT_VERSION, cv("after"))
    wait_until(lambda: cache.get(kinds.COMPONENT_VERSION, "after", NS) is not None, what="the next watch delivers")
    assert cache.failures(kinds.COMPONENT_VERSION) == 1
    assert reflectors_alive() == 1
    assert cache.synced
