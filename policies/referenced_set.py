"""The referenced set: every artifact a ComponentVersion still present keeps, computed fail-closed.

Seed 000: the set is every retained live ComponentVersion, green or red (a red entry the
janitor has not reaped keeps its artifact), terminating ones too (they still exist). It is
*complete* only when the view is synced and every entry's coordinates resolved; one entry
without coordinates could be the only claim on some artifact, so then nothing is complete.
The sidecar hands :func:`collect` a fresh list of entries read from the apiserver (not its
cache), so an entry created while a watch was down is in the set; :func:`compute` is the same
over a view, for tests and offline use.

The two results are distinct types so an incomplete one cannot be published by mistake:
:class:`ReferencedSet` (complete; has :meth:`~ReferencedSet.to_json` and is what reclamation
accepts) and :class:`IncompleteSet` (reasons only; no JSON, nothing to publish).

What an entry keeps in its registry: the repository's tag for its version, the digest of a full
digest label, and ``status.availability.resolvedDigest`` (the manifest the tag last resolved to,
which stays addressable by digest even after the tag moves).

ConfigMap JSON (key :data:`CONFIGMAP_KEY`), keys and lists sorted, so equal sets serialize alike::

    {"complete": true, "computedAt": "2026-11-29T12:30:05Z", "generation": 7,
     "registries": {"registry.example:5000": {"ocm/component-descriptors/example.com/demo":
         {"digests": ["sha256:..."], "tags": ["1.0.0", "1.2.3.build-ci.42"]}}}}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from policies.artifacts import Unresolved, registry_key, resolve_artifact
from policies.kinds import COMPONENT, COMPONENT_VERSION
from policies.model import Obj
from policies.objects import dig, format_time, namespace_of, parse_time
from policies.view import View

CONFIGMAP_KEY = "referenced-set.json"

MSG_UNSYNCED = "the cluster cache is not live (not synced yet, or a watch is down); the set would miss entries"


@dataclass(frozen=True, slots=True)
class Keep:
    """What one repository keeps: tags and digests, each sorted."""

    tags: tuple[str, ...] = ()
    digests: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        return {"digests": list(self.digests), "tags": list(self.tags)}


Registries = Mapping[str, Mapping[str, Keep]]


@dataclass(frozen=True, slots=True)
class ReferencedSet:
    """A complete referenced set: the only kind that may be published or reclaimed against.

    ``registries`` maps registry (:func:`~policies.artifacts.registry_key`: lower case, no default
    port) -> repository -> :class:`Keep`, read-only at both levels.
    """

    generation: int
    computed_at: datetime
    registries: Registries = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        frozen = {host: MappingProxyType(dict(repos)) for host, repos in self.registries.items()}
        object.__setattr__(self, "registries", MappingProxyType(frozen))

    complete = True

    def keep(self, registry: str, repository: str) -> Keep:
        """What ``repository`` of ``registry`` (a :func:`~policies.artifacts.registry_key`) keeps."""
        return self.registries.get(registry, {}).get(repository, Keep())

    def to_json(self) -> dict[str, Any]:
        return {
            "complete": True,
            "computedAt": format_time(self.computed_at),
            "generation": self.generation,
            "registries": {
                host: {repo: keep.to_json() for repo, keep in sorted(repos.items())}
                for host, repos in sorted(self.registries.items())
            },
        }

    def dumps(self) -> str:
        """The ConfigMap value: deterministic JSON (sorted keys, no whitespace)."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    def same_content(self, other: ReferencedSet | None) -> bool:
        """Equal keeps, whatever the generation and time: the shell republishes only on a difference."""
        return other is not None and self.registries == other.registries

    def merged_with(self, other: ReferencedSet | IncompleteSet) -> ReferencedSet | IncompleteSet:
        """A set keeping everything this one or ``other`` keeps; ``other`` itself when it is incomplete.

        Reclamation plans against the set it was handed merged with one computed after listing
        the registry, so an entry created in between keeps its artifact (the generation stays this one's).
        """
        if isinstance(other, IncompleteSet):
            return other
        registries: dict[str, dict[str, Keep]] = {}
        for host in sorted({*self.registries, *other.registries}):
            mine, theirs = self.registries.get(host, {}), other.registries.get(host, {})
            registries[host] = {
                repo: _union(mine.get(repo, Keep()), theirs.get(repo, Keep())) for repo in sorted({*mine, *theirs})
            }
        return ReferencedSet(self.generation, self.computed_at, registries)

    @classmethod
    def loads(cls, text: str) -> ReferencedSet:
        """Read back a published set (the last one the shell published); raises ValueError if not one."""
        raw = json.loads(text)
        computed_at = parse_time(raw.get("computedAt")) if isinstance(raw, Mapping) else None
        if not isinstance(raw, Mapping) or raw.get("complete") is not True or computed_at is None:
            raise ValueError("not a complete referenced set")
        registries = {
            str(host): {
                str(repo): Keep(tuple(sorted(keep.get("tags", ()))), tuple(sorted(keep.get("digests", ()))))
                for repo, keep in repos.items()
            }
            for host, repos in (raw.get("registries") or {}).items()
        }
        return cls(int(raw.get("generation", 0)), computed_at, registries)


@dataclass(frozen=True, slots=True)
class IncompleteSet:
    """A computation that must not be published: the last published set stands, nothing is reclaimed."""

    computed_at: datetime
    reasons: tuple[str, ...]

    complete = False

    def summary(self, limit: int = 3) -> str:
        """The first few reasons and a count of the rest, for logs and Events."""
        shown = "; ".join(self.reasons[:limit])
        rest = len(self.reasons) - limit
        return f"{shown}; and {rest} more" if rest > 0 else shown


def collect(
    versions: Iterable[Obj], components: Mapping[tuple[str, str], Obj], generation: int, now: datetime, synced: bool
) -> ReferencedSet | IncompleteSet:
    """The set from ComponentVersions and their Components (keyed by ``(namespace, name)``)."""
    reasons: list[str] = [] if synced else [MSG_UNSYNCED]
    tags: dict[tuple[str, str], set[str]] = {}
    digests: dict[tuple[str, str], set[str]] = {}
    for cv in versions:
        name = str(dig(cv, "spec", "componentRef", "name", default=""))
        ref = resolve_artifact(cv, components.get((namespace_of(cv), name)))
        if isinstance(ref, Unresolved):
            reasons.append(str(ref))
            continue
        where = (registry_key(ref.registry, ref.plain_http), ref.repository)
        tags.setdefault(where, set()).add(ref.tag)
        found = digests.setdefault(where, set())
        found.update(d for d in (ref.digest, _resolved_digest(cv)) if d)
    if reasons:
        return IncompleteSet(now, tuple(sorted(reasons)))
    registries: dict[str, dict[str, Keep]] = {}
    for (host, repo), kept in sorted(tags.items()):
        registries.setdefault(host, {})[repo] = Keep(tuple(sorted(kept)), tuple(sorted(digests[(host, repo)])))
    return ReferencedSet(generation, now, registries)


def compute(view: View, generation: int, now: datetime) -> ReferencedSet | IncompleteSet:
    """:func:`collect` over every ComponentVersion and Component in ``view``."""
    components = {(namespace_of(c), str(dig(c, "metadata", "name", default=""))): c for c in view.list(COMPONENT)}
    return collect(view.list(COMPONENT_VERSION), components, generation, now, view.synced)


def _union(a: Keep, b: Keep) -> Keep:
    return Keep(tuple(sorted({*a.tags, *b.tags})), tuple(sorted({*a.digests, *b.digests})))


def _resolved_digest(cv: Obj) -> str:
    value = str(dig(cv, "status", "availability", "resolvedDigest", default=""))
    return value if ":" in value else ""
