"""Charts family (helm.deckhouse.io HelmClusterAddon, HelmClusterAddonChart, HelmClusterAddonRepository).

The rules of DESIGN.md section 5 ("Charts") are registered in ``RULES``.
"""

from __future__ import annotations

from policies.kinds import CHARTS_KINDS
from policies.rules import Family, Rule

RULES: tuple[Rule, ...] = ()

FAMILY = Family("charts", CHARTS_KINDS, RULES)
