"""ReferenceGrants as the SolAr controllers match them (ADR-012): who may refer into a namespace.

A grant lives in the namespace of the object *referenced* and admits referencing objects of the
kinds and namespaces in ``spec.from[]`` to objects of the kinds in ``spec.to[]`` (group
``solar.opendefense.cloud`` on both sides; ``to`` names no object, so it admits every object of
that kind in the namespace). Matching is by group, kind and the referencing namespace, nothing more.
Admission (``catalog_refs``) asks about one namespace (:func:`granting`); the sidecar's credential
choice (``registry_credentials``) asks where one namespace may refer to (:func:`granted_namespaces`,
through the :data:`GRANTS_BY_REFERRER` index, so a pass over many entries does not scan every grant
for each).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from policies.kinds import REFERENCE_GRANT, SOLAR
from policies.model import GroupKind, Obj
from policies.objects import dig, name_of, namespace_of
from policies.view import View

GRANTS_BY_REFERRER = "referenceGrantsByReferrer"
"""ReferenceGrant index: ``group/kind/namespace`` of each ``spec.from[]`` entry."""


def _entries(grant: Obj, side: str) -> Iterable[Mapping[str, str]]:
    entries = dig(grant, "spec", side, default=())
    return (e for e in (entries if isinstance(entries, list) else ()) if isinstance(e, Mapping))


def referrer_key(source: GroupKind, namespace: str) -> str:
    return f"{source.group}/{source.kind}/{namespace}"


def _grants_by_referrer(grant: Obj) -> Iterable[str]:
    for e in _entries(grant, "from"):
        group, kind, namespace = e.get("group"), e.get("kind"), e.get("namespace")
        if isinstance(group, str) and isinstance(kind, str) and isinstance(namespace, str):
            yield referrer_key(GroupKind(group, kind), namespace)


def _admits_to(grant: Obj, target: GroupKind) -> bool:
    return any(e.get("group") == SOLAR and e.get("kind") == target.kind for e in _entries(grant, "to"))


def _admits(grant: Obj, source: GroupKind, source_ns: str, target: GroupKind) -> bool:
    return referrer_key(source, source_ns) in set(_grants_by_referrer(grant)) and _admits_to(grant, target)


def granting(view: View, source: GroupKind, source_ns: str, target: GroupKind, target_ns: str) -> Obj | None:
    """The first ReferenceGrant (by name) in ``target_ns`` admitting ``source`` objects of ``source_ns``."""
    grants = sorted(view.list(REFERENCE_GRANT, namespace=target_ns), key=name_of)
    return next((g for g in grants if _admits(g, source, source_ns, target)), None)


def is_granted(view: View, source: GroupKind, source_ns: str, target: GroupKind, target_ns: str) -> bool:
    """True when a ReferenceGrant in ``target_ns`` admits ``source`` objects of ``source_ns``."""
    return granting(view, source, source_ns, target, target_ns) is not None


def granted_namespaces(view: View, source: GroupKind, source_ns: str, target: GroupKind) -> dict[str, Obj]:
    """Every namespace whose grants admit ``source`` objects of ``source_ns`` to ``target``, with the
    first such grant by name (the view must carry :data:`GRANTS_BY_REFERRER`, as the families' do)."""
    found: dict[str, Obj] = {}
    if source.group != SOLAR:
        return found
    for grant in view.indexed(REFERENCE_GRANT, GRANTS_BY_REFERRER, referrer_key(source, source_ns)):
        namespace = namespace_of(grant)  # the index holds only grants whose ``from`` names the referrer
        if _admits_to(grant, target) and (namespace not in found or name_of(grant) < name_of(found[namespace])):
            found[namespace] = grant
    return found


INDEXES: Mapping[GroupKind, Mapping[str, Callable[[Obj], Iterable[str]]]] = {
    REFERENCE_GRANT: {GRANTS_BY_REFERRER: _grants_by_referrer}
}
