"""Conversion end to end: the apiserver double calls our ``/convert`` for every non-storage read and write.

One full :class:`Stack` per module (certificates, the double over the project's ``manifests/``,
informer cache, webhook server). Tests speak through the official ``CustomObjectsApi`` in the
version they choose (:class:`Served`), and every object a read returns is checked against the
schema of the version it came in: the double does not prune, so that check stands in for the
pruning a real apiserver would do (see :mod:`tests.e2e_conversion.schemas`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client, watch

from policies.conversion import CONVERSION_DATA
from tests.e2e_conversion.schemas import pruned_paths, schema_of
from tests.support.stack import Stack

Obj = dict[str, Any]

USER = "alice"
USER_GROUPS = ("developers", "system:masters")
"""A human with every RBAC right (package revisions are written by users)."""

SERVER_SET_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")
"""Metadata the apiserver assigns; what a client wrote is compared without these."""

WATCH_TIMEOUT_SECONDS = 10
"""Server-side end of a watch, so a missing event fails the test instead of hanging it."""


@dataclass(frozen=True)
class Kind:
    """A multi-version resource: its group, plural, kind and scope."""

    group: str
    plural: str
    kind: str
    namespaced: bool

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}"

    def manifest(self, version: str, name: str, namespace: str = "", **fields: Any) -> Obj:
        metadata: Obj = {"name": name, **({"namespace": namespace} if self.namespaced else {})}
        metadata.update(fields.pop("metadata", {}))
        return {"apiVersion": self.api_version(version), "kind": self.kind, "metadata": metadata, **fields}


PACKAGE_REVISION = Kind("porch.kpt.dev", "packagerevisions", "PackageRevision", namespaced=True)


def fits(obj: Obj, kind: str) -> Obj:
    """``obj`` after asserting a real apiserver would prune nothing from it in its own version."""
    assert pruned_paths(obj, schema_of(obj["apiVersion"], kind)) == [], f"pruned from {obj['apiVersion']}"
    return obj


class Served:
    """One user's ``CustomObjectsApi`` for one :class:`Kind`, in any served version.

    Every object returned is checked with :func:`fits`; lists check each item.
    """

    def __init__(self, api: client.CustomObjectsApi, kind: Kind) -> None:
        self.api = api
        self.kind = kind

    def _call(self, verb: str, version: str, namespace: str, *args: Any, status: bool = False, **kw: Any) -> Any:
        k, suffix = self.kind, "_status" if status else ""
        if k.namespaced:
            method = getattr(self.api, f"{verb}_namespaced_custom_object{suffix}")
            return method(k.group, version, namespace, k.plural, *args, **kw)
        return getattr(self.api, f"{verb}_cluster_custom_object{suffix}")(k.group, version, k.plural, *args, **kw)

    def _one(self, obj: Obj) -> Obj:
        return fits(obj, self.kind.kind)

    def create(self, obj: Obj) -> Obj:
        version = obj["apiVersion"].partition("/")[2]
        return self._one(self._call("create", version, obj["metadata"].get("namespace", ""), obj))

    def get(self, version: str, name: str, namespace: str = "") -> Obj:
        return self._one(self._call("get", version, namespace, name))

    def list(self, version: str, namespace: str = "", label_selector: str = "") -> Obj:
        listed = self._call("list", version, namespace, label_selector=label_selector)
        for item in listed["items"]:
            self._one(item)
        return listed

    def patch(self, version: str, name: str, patch: Obj, namespace: str = "") -> Obj:
        return self._one(self._call("patch", version, namespace, name, patch))

    def patch_status(self, version: str, name: str, patch: Obj, namespace: str = "") -> Obj:
        return self._one(self._call("patch", version, namespace, name, patch, status=True))

    def replace(self, obj: Obj) -> Obj:
        version, meta = obj["apiVersion"].partition("/")[2], obj["metadata"]
        return self._one(self._call("replace", version, meta.get("namespace", ""), meta["name"], obj))

    def replace_status(self, obj: Obj) -> Obj:
        version, meta = obj["apiVersion"].partition("/")[2], obj["metadata"]
        return self._one(self._call("replace", version, meta.get("namespace", ""), meta["name"], obj, status=True))

    def watch_from(
        self, version: str, resource_version: str, namespace: str = "", label_selector: str = ""
    ) -> Iterator[Obj]:
        """Watch events after ``resource_version`` in ``version``; ends after :data:`WATCH_TIMEOUT_SECONDS`."""
        k = self.kind
        if k.namespaced:
            method, args = self.api.list_namespaced_custom_object, (k.group, version, namespace, k.plural)
        else:
            method, args = self.api.list_cluster_custom_object, (k.group, version, k.plural)
        stream = watch.Watch().stream(
            method,
            *args,
            resource_version=resource_version,
            label_selector=label_selector,
            timeout_seconds=WATCH_TIMEOUT_SECONDS,
        )
        for event in stream:
            self._one(event["object"])
            yield event


def written(obj: Obj) -> Obj:
    """``obj`` without the metadata the apiserver sets, to compare with what a client wrote."""
    metadata = {k: v for k, v in obj["metadata"].items() if k not in SERVER_SET_METADATA}
    return {**obj, "metadata": metadata}


def carried(obj: Obj) -> Obj | None:
    """The decoded conversion-data annotation of ``obj``, or None when it has none."""
    value = (obj["metadata"].get("annotations") or {}).get(CONVERSION_DATA)
    return None if value is None else json.loads(value)


class Cluster:
    """A started :class:`Stack` with per-user, per-kind handles."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack

    def served(self, kind: Kind, user: str, groups: tuple[str, ...] = ()) -> Served:
        return Served(self.stack.custom(user, groups), kind)

    def revisions(self) -> Served:
        return self.served(PACKAGE_REVISION, USER, USER_GROUPS)

    def stored(self, kind: Kind, name: str, namespace: str = "") -> Obj:
        """The object as the double stores it (always the storage version)."""
        found = self.stack.apiserver.store.get((kind.group, kind.plural, namespace if kind.namespaced else "", name))
        assert found is not None, f"{kind.kind} {namespace}/{name} is not stored"
        return found

    def namespace(self, name: str) -> str:
        self.stack.core(USER, USER_GROUPS).create_namespace({"metadata": {"name": name}})
        return name


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with Stack() as started:
        yield started


@pytest.fixture
def cluster(stack: Stack) -> Iterator[Cluster]:
    failures_before = len(stack.apiserver.failures)
    yield Cluster(stack)
    assert stack.apiserver.failures[failures_before:] == [], "the double answered a request with a 500"


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A DNS label from the test's name, so tests sharing a stack never collide."""
    return re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")


@pytest.fixture
def ns(cluster: Cluster, name: str) -> str:
    return cluster.namespace(name)
