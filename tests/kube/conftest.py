"""Fixtures for the cluster-connection tests: the apiserver double over the real manifests/,
a `Kube` for the warden, a request recorder, and informer caches that are always stopped."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from policies.kinds import NAMESPACE
from tests.support.apiserver import ApiServerDouble
from tests.support.apiserver.fixtures import apiserver  # noqa: F401  (the double, webhooks cleared)
from webhook.kube.cache import InformerCache
from webhook.kube.client import Kube

NS = "team-a"
WARDEN = "system:serviceaccount:catalog-warden:catalog-warden"
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")


@dataclass(frozen=True)
class Call:
    verb: str
    plural: str
    name: str
    sub: str
    params: dict[str, str]
    body: Any


@dataclass
class Recorder:
    """Every verb the double served (what the double *saw*, not what a client meant to send).

    The double keeps no request log of its own, so its `Api` verbs are wrapped on the instance.
    """

    calls: list[Call] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, verb: str, plural: str | None = None) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.verb == verb and (plural is None or c.plural == plural)]

    def all(self) -> list[Call]:
        with self.lock:
            return list(self.calls)


def record(double: ApiServerDouble) -> Recorder:
    recorder = Recorder()
    api = double.api
    for verb in VERBS:
        original = getattr(api, verb)

        @functools.wraps(original)
        def wrapper(target: Any, *args: Any, _verb: str = verb, _original: Callable = original) -> Any:
            # get(target); list/watch(target, params); create/update/patch/delete(target, body, ..., params)
            params = args[-1] if args else {}
            body = args[0] if _verb in ("create", "update", "patch", "delete") else None
            with recorder.lock:
                recorder.calls.append(Call(_verb, target.resource.plural, target.name, target.sub, dict(params), body))
            return _original(target, *args)

        setattr(api, verb, wrapper)
    return recorder


@pytest.fixture
def recorder(apiserver: ApiServerDouble) -> Recorder:  # noqa: F811
    return record(apiserver)


@pytest.fixture
def kube(apiserver: ApiServerDouble) -> Kube:  # noqa: F811
    """The warden's connection, with a namespace `team-a` to work in."""
    k = Kube(apiserver.api_client(WARDEN))
    k.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    return k


@pytest.fixture
def admin(apiserver: ApiServerDouble) -> Kube:  # noqa: F811
    """Another client (a cluster admin): the 'someone else' who changes objects behind the warden's back."""
    return Kube(apiserver.admin)


MakeCache = Callable[..., InformerCache]


@pytest.fixture
def make_cache(kube: Kube) -> Iterator[MakeCache]:
    caches: list[InformerCache] = []

    def make(**kw: Any) -> InformerCache:
        cache = InformerCache(kw.pop("kube", kube), **kw)
        caches.append(cache.start())
        return cache

    yield make
    for cache in caches:
        cache.stop()
        assert not any(t.is_alive() for t in threading.enumerate() if t.name.startswith("informer-")), "leaked"
