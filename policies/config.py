"""Policy configuration: identities, family switches, thresholds and intervals.

Loaded by the shell from ``--config FILE`` (YAML) and handed to rules inside their
:class:`~policies.rules.Context`. Unknown keys are errors, so a typo never silently falls back
to a default. Every key is documented in ``docs/configuration.md``.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

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


class Mode(StrEnum):
    """How a family is installed (DESIGN.md section 3, docs/compatibility.md)."""

    ALONGSIDE = "alongside"
    """The upstream server serves the family's groups: only our webhooks, and the loops upstream lacks."""
    STANDALONE = "standalone"
    """Our CRDs serve the groups and the sidecar does the upstream controllers' work too."""


class FamilyConfig(BaseModel):
    """One family: whether its rules are served, and how it is installed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    """``false`` admits every request of the family without evaluating it."""
    mode: Mode = Mode.ALONGSIDE


def _family_shorthand(value: Any) -> Any:
    """``families.<name>: true|false`` is short for ``{enabled: true|false}`` (the older form)."""
    return {"enabled": value} if isinstance(value, bool) else value


FamilyField = Annotated[FamilyConfig, BeforeValidator(_family_shorthand)]


class Families(BaseModel):
    """Which rule families are served, and the install mode of each."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    catalog: FamilyField = Field(default_factory=FamilyConfig)
    packages: FamilyField = Field(default_factory=FamilyConfig)
    charts: FamilyField = Field(default_factory=FamilyConfig)

    def of(self, name: str) -> FamilyConfig:
        """The family's settings; an unknown name reads as the defaults."""
        value = getattr(self, name, None)
        return value if isinstance(value, FamilyConfig) else FamilyConfig()

    def enabled(self, name: str) -> bool:
        return self.of(name).enabled

    def standalone(self, name: str) -> bool:
        return self.of(name).mode is Mode.STANDALONE


UPSTREAM_LOOPS: tuple[tuple[str, str, str, str], ...] = (
    ("packages", "packages", "the package bookkeeping", "Porch's own controllers"),
    ("charts", "chartIndex", "the chart index", "operator-helm's controllers"),
)
"""(family, sidecar section, the work, who does it upstream): the loops that do an upstream
controller's work, so they run exactly when their family is standalone. Their
``sidecar.<section>.enabled`` may be left out; a value that contradicts the mode is an error
naming both keys (one switch, never two that disagree)."""

MSG_LOOP_CONTRADICTS = (
    "sidecar.{section}.enabled: {value} contradicts families.{family}.mode: {mode} ({why}); "
    "the mode switches this loop: remove sidecar.{section}.enabled or change families.{family}.mode"
)
WHY_BY_MODE: dict[bool, str] = {
    True: "nothing else does {work} there",
    False: "{upstream} do {work} there",
}


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

    @model_validator(mode="after")
    def _loops_follow_the_modes(self) -> Self:
        for family, section, work, upstream in UPSTREAM_LOOPS:
            value = getattr(self.sidecar, section).enabled
            standalone = self.families.standalone(family)
            if value is not None and value != standalone:
                mode = self.families.of(family).mode.value
                why = WHY_BY_MODE[standalone].format(work=work, upstream=upstream)
                raise ValueError(
                    MSG_LOOP_CONTRADICTS.format(
                        section=section, value=str(value).lower(), family=family, mode=mode, why=why
                    )
                )
        return self

    def runs_upstream_loop(self, family: str) -> bool:
        """Whether the sidecar does ``family``'s upstream controller work (its mode is standalone)."""
        return self.families.standalone(family)


DEFAULT_CONFIG = PolicyConfig()
