"""End-to-end fixtures: one full stack per test module, a fresh namespace per test, and the
small vocabulary the scenarios speak (resources, identities, the denial a user reads).

A stack starts in about half a second, so each module shares one and every test works in its
own namespace (cluster-scoped objects get names unique to the test). After each test the double
must have answered no request with an unexpected 500.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from policies.model import GroupKind, Obj
from tests.support.stack import WARDEN, Stack, warnings_of

USER = "alice"
USER_GROUPS = ("developers", "system:masters")
"""A human with every RBAC right: the webhook, not authorization, is what must stop her."""
OBSERVER = "system:serviceaccount:solar-system:solar-discovery"
PACKAGE_CONTROLLER = "system:serviceaccount:porch-system:porch-controllers"
KUBE_SYSTEM_SA = "system:serviceaccount:kube-system:operator-helm"
GC = "system:serviceaccount:kube-system:generic-garbage-collector"

DENIED = 'admission webhook "{hook}" denied the request: {kind} {ref} denied by {rule}: {message}'
"""What kube-apiserver shows the user (webhookerrors.ToStatusErr) around our framed denial."""


def denied(hook: str, kind: str, ref: str, rule: str, message: str) -> str:
    return DENIED.format(hook=hook, kind=kind, ref=ref, rule=rule, message=message)


@dataclass(frozen=True)
class Resource:
    """One served resource, at the version the tests speak."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def group_kind(self) -> GroupKind:
        return GroupKind(self.group, self.kind)

    def manifest(self, name: str, namespace: str = "", **fields: Any) -> Obj:
        metadata = {"name": name, **({"namespace": namespace} if self.namespaced else {})}
        metadata.update(fields.pop("metadata", {}))
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": metadata, **fields}


@dataclass(frozen=True)
class Answer:
    """A successful write: the object the apiserver returned and the warnings the user saw."""

    object: Obj
    warnings: list[str]


class Objects:
    """The official ``CustomObjectsApi`` as one user, for one resource; namespaced or not alike.

    Every call goes through the client's ``*_with_http_info`` variant so warnings are visible.
    """

    def __init__(self, api: client.CustomObjectsApi, resource: Resource) -> None:
        self.api = api
        self.r = resource

    def _call(self, verb: str, namespace: str, *args: Any, **kw: Any) -> tuple[Any, int, Any]:
        r = self.r
        if r.namespaced:
            method = getattr(self.api, f"{verb}_namespaced_custom_object{kw.pop('_suffix', '')}_with_http_info")
            return method(r.group, r.version, namespace, r.plural, *args, **kw)
        method = getattr(self.api, f"{verb}_cluster_custom_object{kw.pop('_suffix', '')}_with_http_info")
        return method(r.group, r.version, r.plural, *args, **kw)

    @staticmethod
    def _dry(dry_run: bool) -> dict[str, str]:
        return {"dry_run": "All"} if dry_run else {}

    def create(self, obj: Obj, dry_run: bool = False) -> Answer:
        namespace = obj["metadata"].get("namespace", "")
        data, _status, headers = self._call("create", namespace, obj, **self._dry(dry_run))
        return Answer(data, warnings_of(headers))

    def get(self, name: str, namespace: str = "") -> Obj:
        return self._call("get", namespace, name)[0]

    def replace(self, obj: Obj, dry_run: bool = False) -> Answer:
        metadata = obj["metadata"]
        data, _status, headers = self._call(
            "replace", metadata.get("namespace", ""), metadata["name"], obj, **self._dry(dry_run)
        )
        return Answer(data, warnings_of(headers))

    def patch(self, name: str, patch: Any, namespace: str = "", dry_run: bool = False) -> Answer:
        """A merge patch (the client's default for custom objects)."""
        data, _status, headers = self._call("patch", namespace, name, patch, **self._dry(dry_run))
        return Answer(data, warnings_of(headers))

    def patch_status(self, name: str, patch: Any, namespace: str = "") -> Answer:
        data, _status, headers = self._call("patch", namespace, name, patch, _suffix="_status")
        return Answer(data, warnings_of(headers))

    def delete(self, name: str, namespace: str = "", propagation: str | None = None, dry_run: bool = False) -> Answer:
        kw: dict[str, Any] = self._dry(dry_run)
        if propagation:
            kw["propagation_policy"] = propagation
        data, _status, headers = self._call("delete", namespace, name, **kw)
        return Answer(data, warnings_of(headers))

    def exists(self, name: str, namespace: str = "") -> bool:
        try:
            self.get(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str


def refused(action: Callable[[], object]) -> Refusal:
    """Run ``action``, which must fail; return the HTTP status and the Status message the user reads."""
    try:
        action()
    except ApiException as exc:
        body = json.loads(exc.body or "{}")
        return Refusal(int(exc.status or 0), str(body.get("message", "")))
    raise AssertionError("the request was admitted, but it should have been refused")


class Cluster:
    """A started :class:`Stack` with per-user resource handles."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack

    def as_user(self, user: str, resource: Resource, groups: tuple[str, ...] = ()) -> Objects:
        return Objects(self.stack.custom(user, groups), resource)

    def user(self, resource: Resource) -> Objects:
        return self.as_user(USER, resource, USER_GROUPS)

    def warden(self, resource: Resource) -> Objects:
        return self.as_user(WARDEN, resource)

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


def unique_name(request: pytest.FixtureRequest, limit: int = 40) -> str:
    """A DNS label derived from the test's name, so tests sharing a stack never collide."""
    base = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
    return base[:limit].strip("-")


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    return unique_name(request)


@pytest.fixture
def ns(cluster: Cluster, name: str) -> str:
    """A fresh namespace for this test."""
    return cluster.namespace(name)
