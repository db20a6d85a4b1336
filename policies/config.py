"""Policy configuration: identities, family switches, thresholds and intervals.

Loaded by the shell from ``--config FILE`` (YAML) and handed to rules inside their
:class:`~policies.rules.Context`. Unknown keys are errors, so a typo never silently falls back
to a default. Every key is documented in ``docs/configuration.md``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from policies.identity import Identities
from policies.sidecar_config import SidecarConfig


class Families(BaseModel):
    """Which rule families are served; a switched-off family admits everything with no warning."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    catalog: bool = True
    packages: bool = True
    charts: bool = True


class PolicyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    identities: Identities = Field(default_factory=Identities)
    families: Families = Field(default_factory=Families)
    failOpenWhenUnsynced: bool = False
    """Admit (with a warning) instead of 503 while the cache has not synced."""
    maxListedReferrers: int = Field(default=5, ge=1)
    """How many referrers a denial names before it says "and N more"."""
    sidecar: SidecarConfig = Field(default_factory=SidecarConfig)
    """The sidecar loops' switches, intervals and thresholds (docs/sidecar.md)."""


DEFAULT_CONFIG = PolicyConfig()
