"""The table of rule families served under ``/validate/{family}`` and ``/mutate/{family}``."""

from __future__ import annotations

from collections.abc import Mapping

from policies import catalog, charts, packages
from policies.model import GroupKind
from policies.rules import Family, RuleTable, merge_indexes
from policies.view import IndexFn

FAMILIES: Mapping[str, Family] = {f.name: f for f in (catalog.FAMILY, packages.FAMILY, charts.FAMILY)}

TABLES: Mapping[str, RuleTable] = {name: RuleTable.build(f) for name, f in FAMILIES.items()}

INDEXES: Mapping[GroupKind, Mapping[str, IndexFn]] = merge_indexes(FAMILIES.values())
"""Every index any rule uses; views are built with these."""
