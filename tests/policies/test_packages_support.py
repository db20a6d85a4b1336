"""Builders shared by the packages policy tests (no tests of its own).

Objects are plain dicts as the apiserver sends them; requests go through the real rule table
(``policies.families.TABLES``), so a rule missing from ``RULES`` fails the tests that expect it.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import jsonpatch

from policies.config import PolicyConfig
from policies.decision import Decision
from policies.families import INDEXES, TABLES
from policies.identity import GARBAGE_COLLECTOR, NAMESPACE_CONTROLLER
from policies.kinds import PACKAGE_REVISION, REPOSITORY
from policies.model import AdmissionRequest, Operation, UserInfo
from policies.packages import RULES
from policies.rules import Context
from policies.view import MemoryView
from tests.support.objects import changed  # noqa: F401 - re-exported for the rule tests

NS = "team-a"
REPO = "blueprints"
REPO_UID = "5d1c3a52-0000-4000-8000-000000000001"
NAME = "blueprints.nginx.v1"
NOW = datetime(2026, 11, 29, 12, 30, 5, tzinfo=UTC)

ALICE = UserInfo("alice@example.com", ("team-a-editors",))
CONTROLLER = UserInfo("system:serviceaccount:porch-system:porch-controllers")
WARDEN = UserInfo("system:serviceaccount:catalog-warden:catalog-warden")
GC = UserInfo(GARBAGE_COLLECTOR)
NS_CONTROLLER = UserInfo(NAMESPACE_CONTROLLER)
ADMIN = UserInfo("kubernetes-admin", ("system:masters",))


def repository(name: str = REPO, ns: str = NS, uid: str = REPO_UID, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "config.porch.kpt.dev/v1alpha1",
        "kind": "Repository",
        "metadata": {"name": name, "namespace": ns, "uid": uid, **meta},
        "spec": {"type": "git", "git": {"repo": "https://git.example.com/blueprints.git", "branch": "main"}},
    }


def revision(
    lifecycle: str | None = "Draft",
    *,
    name: str = NAME,
    ns: str = NS,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    version: str = "v1alpha2",
    **spec: Any,
) -> dict[str, Any]:
    """A PackageRevision; ``spec`` keys override the defaults (``source=None`` drops the key)."""
    body: dict[str, Any] = {"repository": REPO, "packageName": "nginx", "workspaceName": "v1"}
    body["source" if version == "v1alpha2" else "tasks"] = (
        {"init": {"description": "nginx"}} if version == "v1alpha2" else [{"type": "init", "init": {}}]
    )
    if lifecycle is not None:
        body["lifecycle"] = lifecycle
    body.update(spec)
    body = {k: v for k, v in body.items() if v is not None}
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": f"porch.kpt.dev/{version}", "kind": "PackageRevision", "metadata": meta, "spec": body}


def view(*objs: dict[str, Any], synced: bool = True) -> MemoryView:
    v = MemoryView(INDEXES, synced=synced)
    for obj in objs:
        v.put(REPOSITORY if obj["kind"] == "Repository" else PACKAGE_REVISION, obj)
    return v


def context(*objs: dict[str, Any], mode: str = "alongside") -> Context:
    """A context over ``objs``; ``mode`` is the packages family's install mode."""
    return Context(view=view(*objs), now=NOW, config=PolicyConfig(families={"packages": {"mode": mode}}))


def request(
    op: Operation,
    obj: dict[str, Any] | None = None,
    old: dict[str, Any] | None = None,
    *,
    user: UserInfo = ALICE,
    version: str = "v1alpha2",
    sub_resource: str = "",
) -> AdmissionRequest:
    subject = obj if obj is not None else old or {}
    return AdmissionRequest(
        uid="3f9a0f0e-0000-4000-8000-00000000abcd",
        operation=op,
        kind=PACKAGE_REVISION,
        version=version,
        name=subject["metadata"]["name"],
        namespace=subject["metadata"]["namespace"],
        object=obj,
        old_object=old,
        user=user,
        sub_resource=sub_resource,
    )


def rule(name: str) -> Any:
    """The rule function registered under ``name`` in ``policies.packages.RULES``."""
    return next(r.fn for r in RULES if r.name == name)


def validate(req: AdmissionRequest, ctx: Context) -> tuple[str, Decision] | None:
    """Run the validating rules as the shell does; the first denial and its rule name, else None."""
    for r in TABLES["packages"].lookup(False, req.kind, req.operation, req.sub_resource):
        decision = r.fn(req, ctx)
        if not decision.allowed:
            return r.name, decision
    return None


def mutate_all(req: AdmissionRequest, ctx: Context) -> tuple[dict[str, Any], list[str]]:
    """Run the mutating rules in declaration order, each on the previous one's output.

    Every patch is applied with ``jsonpatch`` to the object it was computed for, which is what
    the shell and the apiserver do; returns the final object and all warnings.
    """
    obj = copy.deepcopy(dict(req.object or {}))
    warnings: list[str] = []
    for r in TABLES["packages"].lookup(True, req.kind, req.operation, req.sub_resource):
        step = AdmissionRequest(**{**_fields(req), "object": obj})
        decision = r.fn(step, ctx)
        assert decision.allowed, (r.name, decision)
        obj = jsonpatch.apply_patch(obj, list(decision.patch))
        warnings.extend(decision.warnings)
    return obj, warnings


def patches(req: AdmissionRequest, ctx: Context) -> list[dict[str, Any]]:
    """Every patch operation the mutating rules return for ``req`` (each on its own input)."""
    ops: list[dict[str, Any]] = []
    for r in TABLES["packages"].lookup(True, req.kind, req.operation, req.sub_resource):
        ops.extend(r.fn(req, ctx).patch)
    return ops


def _fields(req: AdmissionRequest) -> dict[str, Any]:
    return {f: getattr(req, f) for f in AdmissionRequest.__dataclass_fields__}
