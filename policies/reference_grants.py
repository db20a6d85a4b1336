"""ReferenceGrants as the SolAr controllers match them (ADR-012): who may refer into a namespace.

A grant lives in the namespace of the object *referenced* and admits referencing objects of the
kinds and namespaces in ``spec.from[]`` to objects of the kinds in ``spec.to[]`` (group
``solar.opendefense.cloud`` on both sides; ``to`` names no object, so it admits every object of
that kind in the namespace). Matching is by group, kind and the referencing namespace, nothing more.
Admission (``catalog_refs``) and the sidecar's credential choice (``registry_credentials``) use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from policies.kinds import REFERENCE_GRANT, SOLAR
from policies.model import GroupKind, Obj
from policies.objects import dig, name_of
from policies.view import View


def _entries(grant: Obj, side: str) -> Iterable[Mapping[str, str]]:
    entries = dig(grant, "spec", side, default=())
    return (e for e in (entries if isinstance(entries, list) else ()) if isinstance(e, Mapping))


def granting(view: View, source: GroupKind, source_ns: str, target: GroupKind, target_ns: str) -> Obj | None:
    """The first ReferenceGrant (by name) in ``target_ns`` admitting ``source`` objects of ``source_ns``."""
    for grant in sorted(view.list(REFERENCE_GRANT, namespace=target_ns), key=name_of):
        from_ok = any(
            e.get("group") == SOLAR and e.get("kind") == source.kind and e.get("namespace") == source_ns
            for e in _entries(grant, "from")
        )
        to_ok = any(e.get("group") == SOLAR and e.get("kind") == target.kind for e in _entries(grant, "to"))
        if from_ok and to_ok:
            return grant
    return None


def is_granted(view: View, source: GroupKind, source_ns: str, target: GroupKind, target_ns: str) -> bool:
    """True when a ReferenceGrant in ``target_ns`` admits ``source`` objects of ``source_ns``."""
    return granting(view, source, source_ns, target, target_ns) is not None
