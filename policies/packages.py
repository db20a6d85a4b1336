"""Packages family (porch.kpt.dev PackageRevision, config.porch.kpt.dev Repository).

The lifecycle rules of DESIGN.md section 5 ("Packages") are registered in ``RULES``.
"""

from __future__ import annotations

from policies.kinds import PACKAGES_KINDS
from policies.rules import Family, Rule

RULES: tuple[Rule, ...] = ()

FAMILY = Family("packages", PACKAGES_KINDS, RULES)
