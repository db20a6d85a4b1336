"""How a rule is declared, what it receives, and the per-family rule tables.

A rule is a pure function ``(AdmissionRequest, Context) -> Decision``. It is registered in its
family module's ``RULES`` table by a :class:`Rule` entry naming the kind, operations and whether
it mutates. The shell looks rules up by (family, mutating, kind, operation) in a dict built
once from those tables: no if-chains, and a reader finds a rule by its resource's name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from policies.config import DEFAULT_CONFIG, PolicyConfig
from policies.decision import Decision
from policies.model import AdmissionRequest, GroupKind, Operation
from policies.view import IndexFn, View


@dataclass(frozen=True, slots=True)
class Context:
    """Everything besides the request that a rule may consult. ``now`` is timezone-aware UTC."""

    view: View
    now: datetime
    config: PolicyConfig = DEFAULT_CONFIG


RuleFn = Callable[[AdmissionRequest, Context], Decision]

ALL_WRITES = frozenset({Operation.CREATE, Operation.UPDATE, Operation.DELETE})


@dataclass(frozen=True, slots=True)
class Rule:
    """A registered rule. ``name`` (``family.subject-what``) appears in denials, logs and metrics."""

    name: str
    kind: GroupKind
    operations: frozenset[Operation]
    fn: RuleFn
    mutating: bool = False
    needs_view: bool = True
    """If True the rule reads cluster state and is refused with 503 while the view is unsynced."""
    sub_resources: frozenset[str] = frozenset({""})
    """Which subresources the rule sees; the main resource is ``""``."""


@dataclass(frozen=True, slots=True)
class Family:
    """One rule family: the kinds it guards (DESIGN.md section 3) and its rules."""

    name: str
    kinds: frozenset[GroupKind]
    rules: Sequence[Rule]
    indexes: Mapping[GroupKind, Mapping[str, IndexFn]] = field(default_factory=dict)


RuleKey = tuple[bool, GroupKind, Operation, str]


@dataclass(frozen=True, slots=True)
class RuleTable:
    """Rules of one family keyed by (mutating, kind, operation, subresource), in declaration order."""

    family: Family
    by_key: Mapping[RuleKey, tuple[Rule, ...]]

    @classmethod
    def build(cls, family: Family) -> RuleTable:
        table: dict[RuleKey, list[Rule]] = {}
        for rule in family.rules:
            if rule.kind not in family.kinds:
                raise ValueError(f"rule {rule.name} guards {rule.kind}, which family {family.name} does not serve")
            for op in rule.operations:
                for sub in rule.sub_resources:
                    table.setdefault((rule.mutating, rule.kind, op, sub), []).append(rule)
        return cls(family, {k: tuple(v) for k, v in table.items()})

    def lookup(self, mutating: bool, kind: GroupKind, op: Operation, sub_resource: str) -> tuple[Rule, ...]:
        return self.by_key.get((mutating, kind, op, sub_resource), ())


def merge_indexes(families: Iterable[Family]) -> dict[GroupKind, dict[str, IndexFn]]:
    """All index functions declared by ``families``, for building a view."""
    merged: dict[GroupKind, dict[str, IndexFn]] = {}
    for fam in families:
        for kind, fns in fam.indexes.items():
            merged.setdefault(kind, {}).update(fns)
    return merged
