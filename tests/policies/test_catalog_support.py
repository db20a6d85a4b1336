"""Builders shared by the catalog policy tests (no tests of its own).

Objects are plain dicts as the apiserver sends them. Requests run through the real rule table
(``policies.families.TABLES["catalog"]``) and the view is built with the real ``INDEXES``, so a
rule or an index missing from the family fails the tests that expect it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jsonpatch

from policies.config import PolicyConfig
from policies.decision import Decision
from policies.families import INDEXES, TABLES
from policies.identity import GARBAGE_COLLECTOR, NAMESPACE_CONTROLLER
from policies.kinds import SOLAR
from policies.model import AdmissionRequest, GroupKind, Operation, UserInfo
from policies.rules import Context
from policies.view import MemoryView
from tests.support.objects import changed  # noqa: F401 - re-exported for the rule tests

NS = "team-a"
OTHER_NS = "team-b"
NOW = datetime(2026, 11, 29, 12, 30, 5, tzinfo=UTC)
SINCE = "2026-11-28T09:15:00Z"

ALICE = UserInfo("alice@example.com", ("team-a-editors",))
ADMIN = UserInfo("kubernetes-admin", ("system:masters",))
DISCOVERY = UserInfo("system:serviceaccount:solar-system:solar-discovery")
WARDEN = UserInfo("system:serviceaccount:catalog-warden:catalog-warden")
GC = UserInfo(GARBAGE_COLLECTOR)
NS_CONTROLLER = UserInfo(NAMESPACE_CONTROLLER)

Obj = dict[str, Any]


def _meta(name: str, ns: str, terminating: bool, finalizers: tuple[str, ...], labels: dict[str, str] | None) -> Obj:
    meta: Obj = {"name": name, "namespace": ns}
    if labels is not None:
        meta["labels"] = labels
    if finalizers:
        meta["finalizers"] = list(finalizers)
    if terminating:
        meta["deletionTimestamp"] = "2026-11-29T12:00:00Z"
    return meta


def _obj(kind: str, name: str, ns: str, spec: Obj, **meta: Any) -> Obj:
    return {
        "apiVersion": f"{SOLAR}/v1alpha1",
        "kind": kind,
        "metadata": _meta(name, ns, meta.get("terminating", False), meta.get("finalizers", ()), meta.get("labels")),
        "spec": spec,
    }


def component(name: str = "demo", ns: str = NS, **meta: Any) -> Obj:
    spec = {"scheme": "https", "registry": "zot.example.com:5000", "repository": f"test/opendefense.cloud/{name}"}
    return _obj("Component", name, ns, spec, **meta)


def component_version(
    name: str = "demo-v1",
    ns: str = NS,
    *,
    component_name: str | None = "demo",
    available: tuple[str, str, str] | None = None,
    **meta: Any,
) -> Obj:
    """A ComponentVersion; ``available`` is ``(status, reason, message)`` of its Available condition."""
    spec: Obj = {"tag": "v1", "entrypoint": {"resourceName": "chart", "type": "helm"}}
    if component_name is not None:
        spec["componentRef"] = {"name": component_name}
    cv = _obj("ComponentVersion", name, ns, spec, **meta)
    if available is not None:
        status, reason, message = available
        cv["status"] = {
            "conditions": [
                {
                    "type": "Available",
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": SINCE,
                    "observedGeneration": 1,
                }
            ]
        }
    return cv


def release(name: str = "web", ns: str = NS, *, cv: str = "demo-v1", cv_ns: str | None = None, **extra: Any) -> Obj:
    """A Release; ``unique_name`` sets ``spec.uniqueName``; other keys are metadata (terminating, ...)."""
    ref: Obj = {"name": cv}
    if cv_ns is not None:
        ref["namespace"] = cv_ns
    spec: Obj = {"componentVersionRef": ref, "values": {"replicas": 2}}
    unique_name = extra.pop("unique_name", None)
    if unique_name is not None:
        spec["uniqueName"] = unique_name
    return _obj("Release", name, ns, spec, **extra)


def registry(name: str = "zot", ns: str = NS, *, hostname: str | None = "zot.example.com:5000", **spec: Any) -> Obj:
    """A Registry with push credentials unless ``solarSecretRef=None``; ``spec`` keys override."""
    body: Obj = {"solarSecretRef": {"name": "push-creds"}}
    if hostname is not None:
        body["hostname"] = hostname
    body.update(spec)
    return _obj("Registry", name, ns, {k: v for k, v in body.items() if v is not None})


def target(
    name: str = "edge-1",
    ns: str = NS,
    *,
    registry_name: str | None = "zot",
    registry_ns: str | None = None,
    **meta: Any,
) -> Obj:
    spec: Obj = {}
    if registry_name is not None:
        spec["renderRegistryRef"] = {"name": registry_name, **({"namespace": registry_ns} if registry_ns else {})}
    return _obj("Target", name, ns, spec, **meta)


def registry_binding(
    name: str,
    ns: str = NS,
    *,
    target_name: str = "edge-1",
    registry_name: str = "zot",
    target_ns: str | None = None,
    **meta: Any,
) -> Obj:
    ref: Obj = {"name": target_name, **({"namespace": target_ns} if target_ns else {})}
    return _obj("RegistryBinding", name, ns, {"targetRef": ref, "registryRef": {"name": registry_name}}, **meta)


def release_binding(name: str, ns: str = NS, *, target_name: str = "edge-1", target_ns: str | None = None) -> Obj:
    ref: Obj = {"name": target_name, **({"namespace": target_ns} if target_ns else {})}
    return _obj("ReleaseBinding", name, ns, {"targetRef": ref, "releaseRef": {"name": "web"}})


def profile(name: str = "fleet", ns: str = NS, *, release_name: str = "web", **meta: Any) -> Obj:
    """A Profile deploying ``release_name`` to the Targets labelled ``tier: edge``."""
    spec: Obj = {"releaseRef": {"name": release_name}, "targetSelector": {"matchLabels": {"tier": "edge"}}}
    return _obj("Profile", name, ns, spec, **meta)


def reference_grant(ns: str, from_kind: str, from_ns: str, to_kind: str, name: str = "grant") -> Obj:
    spec = {
        "from": [{"group": SOLAR, "kind": from_kind, "namespace": from_ns}],
        "to": [{"group": SOLAR, "kind": to_kind}],
    }
    return _obj("ReferenceGrant", name, ns, spec)


def kind_of(obj: Obj) -> GroupKind:
    return GroupKind(SOLAR, obj["kind"])


def view(*objs: Obj) -> MemoryView:
    v = MemoryView(INDEXES)
    for obj in objs:
        v.put(kind_of(obj), obj)
    return v


def context(*objs: Obj, config: PolicyConfig | None = None) -> Context:
    return Context(view=view(*objs), now=NOW, config=config or PolicyConfig())


def request(
    op: Operation, obj: Obj | None = None, old: Obj | None = None, *, user: UserInfo = ALICE, sub_resource: str = ""
) -> AdmissionRequest:
    subject = obj if obj is not None else old or {}
    return AdmissionRequest(
        uid="3f9a0f0e-0000-4000-8000-00000000abcd",
        operation=op,
        kind=kind_of(subject),
        version="v1alpha1",
        name=subject["metadata"]["name"],
        namespace=subject["metadata"]["namespace"],
        sub_resource=sub_resource,
        object=obj,
        old_object=old,
        user=user,
    )


@dataclass(frozen=True)
class Outcome:
    """What the validating path answers: the denying rule (or None) and everything it says."""

    rule: str | None
    code: int
    message: str
    warnings: tuple[str, ...]


def validate(req: AdmissionRequest, ctx: Context) -> Outcome:
    """Run the catalog's validating rules as the shell does: first denial wins, warnings add up."""
    warnings: list[str] = []
    for r in TABLES["catalog"].lookup(False, req.kind, req.operation, req.sub_resource):
        decision: Decision = r.fn(req, ctx)
        assert not decision.patch, f"validating rule {r.name} returned a patch"
        if not decision.allowed:
            return Outcome(r.name, decision.code, decision.message, tuple(warnings))
        assert all(len(w) <= 120 for w in decision.warnings), f"{r.name}: warning over 120 characters"
        warnings.extend(decision.warnings)
    return Outcome(None, 200, "", tuple(warnings))


def allowed(*warnings: str) -> Outcome:
    return Outcome(None, 200, "", warnings)


def denied(rule: str, message: str, code: int = 403) -> Outcome:
    return Outcome(rule, code, message, ())


def mutate_all(req: AdmissionRequest, ctx: Context) -> tuple[Obj, list[str]]:
    """Run the mutating rules in declaration order, each on the previous one's output (as the shell does)."""
    obj = copy.deepcopy(dict(req.object or {}))
    warnings: list[str] = []
    for r in TABLES["catalog"].lookup(True, req.kind, req.operation, req.sub_resource):
        step = AdmissionRequest(
            **{**{f: getattr(req, f) for f in AdmissionRequest.__dataclass_fields__}, "object": obj}
        )
        decision = r.fn(step, ctx)
        assert decision.allowed, (r.name, decision)
        obj = jsonpatch.apply_patch(obj, list(decision.patch))
        assert all(len(w) <= 120 for w in decision.warnings), f"{r.name}: warning over 120 characters"
        warnings.extend(decision.warnings)
    return obj, warnings
