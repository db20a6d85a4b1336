"""References between catalog objects: their keys, the reverse indexes, and ReferenceGrants.

Every catalog reference is ``{name, namespace?}`` where an empty namespace means the
referencing object's own (``ObjectReference`` in the SolAr API), or ``{name}`` for references
that must stay in the same namespace (``LocalObjectReference``). Rules and indexes compute the
``namespace/name`` key the same way through :func:`ref_key`, so an index lookup and a message
always agree on what is referenced.

A cross-namespace reference resolves only when a ReferenceGrant in the referenced object's
namespace admits it (ADR-012); ``policies.reference_grants`` matches them as the SolAr
controllers do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from policies import reference_grants, registry_credentials
from policies.decision import Decision, allow, fit_warning, invalid
from policies.kinds import (
    COMPONENT_VERSION,
    PROFILE,
    REGISTRY,
    REGISTRY_BINDING,
    RELEASE,
    RELEASE_BINDING,
    TARGET,
)
from policies.model import AdmissionRequest, GroupKind, Obj, Operation
from policies.objects import dig, is_terminating, json_type, labels_of, name_of, namespace_of, ref_of
from policies.reference_grants import is_granted
from policies.rules import Context
from policies.view import IndexFn

COMPONENT_LABEL = "solar.opendefense.cloud/component"
"""Label discovery puts on a ComponentVersion: the name of its parent Component."""


def ref_key(obj: Obj | None, *path: str, local: bool = False) -> str:
    """``namespace/name`` of the reference at ``path`` in ``obj``; ``""`` when it names nothing.

    The namespace defaults to ``obj``'s own; ``local=True`` ignores any namespace given (a
    LocalObjectReference always stays in the referencing object's namespace).
    """
    ref = dig(obj, *path, default={})
    if reference_problem(obj, *path) is not None or not isinstance(ref, Mapping) or not ref.get("name"):
        return ""
    ns = namespace_of(obj) if local else (ref.get("namespace") or namespace_of(obj))
    return f"{ns}/{ref['name']}"


MSG_NOT_AN_OBJECT = "{field} must be an object, not {got}"
MSG_NOT_A_REFERENCE = "{field} must be an object such as {{name: demo}}, not {got}"
MSG_NOT_A_STRING = "{field} must be a string, not {got}"
MSG_NAME_REQUIRED = "{field}.name is required"


def reference_problem(obj: Obj | None, *path: str, required: bool = False) -> str | None:
    """Why the reference at ``path`` of ``obj`` is malformed, or None.

    Rules read references by shape; a string where ``{name, namespace?}`` belongs would
    otherwise raise (an internal error, 500) or be taken silently for "no reference". An absent
    or nameless reference is not malformed unless ``required``.
    """
    field = ".".join(path)
    cur: object = obj
    for depth, key in enumerate(path):
        if cur is None:
            break
        if not isinstance(cur, Mapping):
            return MSG_NOT_AN_OBJECT.format(field=".".join(path[:depth]), got=json_type(cur))
        cur = cur.get(key)
    if cur is None:
        return MSG_NAME_REQUIRED.format(field=field) if required else None
    if not isinstance(cur, Mapping):
        return MSG_NOT_A_REFERENCE.format(field=field, got=json_type(cur))
    for part in ("name", "namespace"):
        value = cur.get(part)
        if value is not None and not isinstance(value, str):
            return MSG_NOT_A_STRING.format(field=f"{field}.{part}", got=json_type(value))
    return MSG_NAME_REQUIRED.format(field=field) if required and not cur.get("name") else None


def new_reference_problem(req: AdmissionRequest, *path: str, required: bool = False) -> str | None:
    """:func:`reference_problem` of the request's object, ratcheted: on UPDATE only a changed field counts.

    An object stored before the webhook (or its CRD) existed keeps passing while the malformed
    field is left alone, so controllers can still add finalizers to it.
    """
    problem = reference_problem(req.object, *path, required=required)
    if problem is None or req.operation is not Operation.UPDATE:
        return problem
    return problem if dig(req.object, *path) != dig(req.old_object, *path) else None


def split_key(key: str) -> tuple[str, str]:
    """``(namespace, name)`` of a ``namespace/name`` key."""
    ns, _, name = key.partition("/")
    return ns, name


def request_key(req: AdmissionRequest) -> str:
    """``namespace/name`` of the request's own object (the name may be empty under generateName)."""
    return f"{req.namespace}/{req.name or name_of(req.subject)}"


def reference_changed(req: AdmissionRequest, *path: str, local: bool = False) -> bool:
    """True on CREATE, or on UPDATE when the reference at ``path`` now names another object.

    Reference checks run only then: an unchanged reference is never re-judged, so controllers
    adding finalizers to existing objects are never blocked by the state of what they reference.
    """
    if req.operation is not Operation.UPDATE:
        return True
    return ref_key(req.object, *path, local=local) != ref_key(req.old_object, *path, local=local)


def live(objs: Iterable[Obj]) -> list[Obj]:
    """The objects not being deleted, sorted by ``namespace/name`` so messages are deterministic."""
    return sorted((o for o in objs if not is_terminating(o)), key=ref_of)


def name_some(objs: Sequence[Obj], limit: int) -> str:
    """``a/x, a/y`` or, past ``limit``, ``a/x, a/y and 3 more``: a denial names a few, counts all."""
    shown = ", ".join(ref_of(o) for o in objs[:limit])
    rest = len(objs) - limit
    return f"{shown} and {rest} more" if rest > 0 else shown


# --- indexes ---------------------------------------------------------------------------------

RELEASES_BY_COMPONENT_VERSION = "componentVersion"
REGISTRY_BINDINGS_BY_TARGET = "target"
REGISTRY_BINDINGS_BY_REGISTRY = "registry"
COMPONENT_VERSIONS_BY_COMPONENT = "component"
TARGETS_BY_REGISTRY = "renderRegistry"
PROFILES_BY_RELEASE = "release"


def release_component_version_key(release: Obj) -> str:
    """``namespace/name`` of the ComponentVersion a Release references (namespace defaults to its own)."""
    return ref_key(release, "spec", "componentVersionRef")


def _releases_by_cv(release: Obj) -> Iterable[str]:
    key = release_component_version_key(release)
    if key:
        yield key


def _by_ref(*path: str, local: bool = False) -> Callable[[Obj], Iterable[str]]:
    """An index function: the ``namespace/name`` key of the reference at ``path`` (``ref_key``), if any."""

    def index(obj: Obj) -> Iterable[str]:
        key = ref_key(obj, *path, local=local)
        return (key,) if key else ()

    return index


_bindings_by_target = _by_ref("spec", "targetRef")
_bindings_by_registry = _by_ref("spec", "registryRef", local=True)
_targets_by_registry = _by_ref("spec", "renderRegistryRef")
"""A Target uses the Registry its charts are pushed to (``spec.renderRegistryRef``, may cross namespaces)."""
_profiles_by_release = _by_ref("spec", "releaseRef", local=True)
"""A Profile deploys the Release of its own namespace named by ``spec.releaseRef``."""


def component_key(cv: Obj) -> str:
    """The parent Component of a ComponentVersion: ``spec.componentRef``, else discovery's label."""
    key = ref_key(cv, "spec", "componentRef", local=True)
    if key:
        return key
    label = labels_of(cv).get(COMPONENT_LABEL, "")
    return f"{namespace_of(cv)}/{label}" if label else ""


def _cvs_by_component(cv: Obj) -> Iterable[str]:
    key = component_key(cv)
    if key:
        yield key


INDEXES: Mapping[GroupKind, Mapping[str, IndexFn]] = {
    RELEASE: {RELEASES_BY_COMPONENT_VERSION: _releases_by_cv},
    REGISTRY_BINDING: {
        REGISTRY_BINDINGS_BY_TARGET: _bindings_by_target,
        REGISTRY_BINDINGS_BY_REGISTRY: _bindings_by_registry,
    },
    COMPONENT_VERSION: {COMPONENT_VERSIONS_BY_COMPONENT: _cvs_by_component},
    TARGET: {TARGETS_BY_REGISTRY: _targets_by_registry},
    PROFILE: {PROFILES_BY_RELEASE: _profiles_by_release},
    **registry_credentials.INDEXES,
    **reference_grants.INDEXES,
}


# --- ReferenceGrants -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GrantedReference:
    """A reference field that may cross namespaces only with a ReferenceGrant (ADR-012)."""

    path: tuple[str, ...]
    to: GroupKind


GRANTED_REFERENCES: Mapping[GroupKind, GrantedReference] = {
    RELEASE: GrantedReference(("spec", "componentVersionRef"), COMPONENT_VERSION),
    TARGET: GrantedReference(("spec", "renderRegistryRef"), REGISTRY),
    RELEASE_BINDING: GrantedReference(("spec", "targetRef"), TARGET),
    REGISTRY_BINDING: GrantedReference(("spec", "targetRef"), TARGET),
}
"""The From/To pairs of the SolAr controllers, keyed by the referencing kind."""

WARN_NOT_GRANTED = (
    "no ReferenceGrant in {to_ns} admits {from_kind} from {from_ns} to {to_kind} {to_name}; it will not resolve"
)


def reference_grant(req: AdmissionRequest, ctx: Context) -> Decision:
    """Warn when a new or changed cross-namespace reference has no ReferenceGrant to resolve it.

    A warning, not a denial: the grant may be applied right after (GitOps order), and the
    controllers report ``NotGranted`` in status until it is. Same-namespace references need none.
    """
    spec = GRANTED_REFERENCES[req.kind]
    if problem := new_reference_problem(req, *spec.path):
        return invalid(problem)
    if not reference_changed(req, *spec.path):
        return allow()
    key = ref_key(req.object, *spec.path)
    to_ns, to_name = split_key(key)
    if not key or to_ns == req.namespace:
        return allow()
    if is_granted(ctx.view, req.kind, req.namespace, spec.to, to_ns):
        return allow()
    return allow(
        fit_warning(
            WARN_NOT_GRANTED,
            to_ns=to_ns,
            from_kind=req.kind.kind,
            from_ns=req.namespace,
            to_kind=spec.to.kind,
            to_name=to_name,
        )
    )
