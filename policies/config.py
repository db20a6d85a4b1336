"""Policy configuration: identities, family switches, thresholds and intervals.

Loaded by the shell from ``--config FILE`` (YAML) and handed to rules inside their
:class:`~policies.rules.Context`. Unknown keys are errors, so a typo never silently falls back
to a default. Every key is documented in ``docs/configuration.md``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from policies.identity import Identities
from policies.sidecar_config import Interval, SidecarConfig


def _whole_seconds(value: timedelta) -> timedelta:
    if value < timedelta(seconds=1) or value.total_seconds() != int(value.total_seconds()):
        raise ValueError("must be a whole number of seconds, at least 1s (it is sent as timeoutSeconds)")
    return value


class InformerConfig(BaseModel):
    """When the informer cache counts as live (docs/configuration.md, docs/operations.md "Readiness").

    Used by ``serve`` and ``sidecar`` alike: a kind whose watch has been down longer than
    ``maxWatchGap``, or open but silent longer than ``watchTimeout + maxWatchGap``, is stale, and
    a stale cache is treated as not synced (503 from rules that read it, readiness false, the
    sidecar's loops paused).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    maxWatchGap: Interval = timedelta(seconds=15)
    """How long a kind may be without an open watch (reconnecting, relisting, backing off) and still count as live."""
    watchTimeout: Annotated[Interval, AfterValidator(_whole_seconds)] = timedelta(seconds=60)
    """``timeoutSeconds`` of each watch; plus ``maxWatchGap``, how long a silent (half-open) watch goes unnoticed."""
    requestTimeout: Interval = timedelta(seconds=10)
    """Each list page, and the wait for a watch's response headers. A relist sent into an outage hangs
    this long, so once the apiserver is back the cache recovers within it plus the backoff (at most 10 s)."""


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
    informer: InformerConfig = Field(default_factory=InformerConfig)
    """When the informer cache counts as live (a stale cache is treated as not synced)."""


DEFAULT_CONFIG = PolicyConfig()
