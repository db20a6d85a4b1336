"""Configuration of the sidecar loops (availability, referenced set, reclamation, retention).

Hung under ``PolicyConfig.sidecar`` by the lead; loaded from the same ``--config`` YAML. Unknown
keys are errors (a typo never falls back to a default). Durations are Go-style strings as
Kubernetes users write them (``5m``, ``1h30m``, ``90s``, ``500ms``) or a number of seconds.
Every key is documented in ``docs/sidecar.md``.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

from policies.availability import Thresholds, go_duration

_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")

BAD_DURATION = "invalid duration {value!r}: use a Go duration such as 90s, 5m or 1h30m, or a number of seconds"
NEGATIVE_DURATION = "invalid duration {value!r}: must not be negative"


def parse_duration(value: Any) -> timedelta:
    """A Go ``time.ParseDuration`` string, a number of seconds, or a timedelta; never negative."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise ValueError(BAD_DURATION.format(value=value))
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_go(value.strip())
    else:
        raise ValueError(BAD_DURATION.format(value=value))
    if seconds < 0:
        raise ValueError(NEGATIVE_DURATION.format(value=value))
    return timedelta(seconds=seconds)


def _parse_go(text: str) -> float:
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    if body == "0":
        return 0.0
    total, at = 0.0, 0
    for match in _GO_PART.finditer(body):
        if match.start() != at:
            break
        total += float(match.group(1)) * _GO_UNITS[match.group(2)]
        at = match.end()
    if not body or at != len(body):
        raise ValueError(BAD_DURATION.format(value=text))
    return sign * total


Duration = Annotated[timedelta, BeforeValidator(parse_duration), PlainSerializer(go_duration, return_type=str)]


def _positive(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError("must be greater than 0")
    return value


Interval = Annotated[Duration, AfterValidator(_positive)]
"""How often a loop runs: a :data:`Duration` greater than zero."""


class AvailabilityConfig(BaseModel):
    """The availability loop: how often, and when a run of 404s becomes ``Available=False``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    interval: Interval = timedelta(minutes=5)
    """Time between passes (a Registry's ``spec.scanInterval`` is not used: that is discovery's)."""
    misses: int = Field(default=3, ge=1)
    """Consecutive 404s before ``Available=False``."""
    grace: Duration = timedelta(minutes=10)
    """Time since the first of those misses before ``Available=False``."""
    concurrency: int = Field(default=8, ge=1, le=256)
    """Manifest lookups in flight per pass."""

    def thresholds(self) -> Thresholds:
        return Thresholds(self.misses, self.grace)


class ReferencedSetConfig(BaseModel):
    """Where the referenced set is published (a ConfigMap in the warden's namespace)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    enabled: bool = True
    configMap: str = Field(default="catalog-warden-referenced-set", min_length=1, max_length=253)
    namespace: str = Field(default="catalog-warden", min_length=1, max_length=63)


class ReclaimConfig(BaseModel):
    """Reclamation limits; whether a registry is reclaimed at all is its ``catalog-warden.io/reclaim`` annotation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    safetyAge: Duration = timedelta(hours=24)
    """Never remove an artifact younger than this (discovery may not have created its entry yet)."""
    perPassCap: int = Field(default=100, ge=0)
    """At most this many removals per registry and pass; 0 plans but removes nothing."""
    dryRun: bool = False
    """Log the plan (and emit Events) without removing anything."""
    maxRemovalShare: float = Field(default=0.5, ge=0.0, le=1.0)
    """The circuit breaker holds a plan that would remove more than this share of a repository's
    tags until an operator confirms it; 1 turns this check off, 0 holds every removal."""


class RetentionConfig(BaseModel):
    """The retention janitor: which red entries may be deleted, how many per sweep. Off by default.

    Deletion is opt-in: a missing artifact only turns an entry red, and removing catalog entries
    is a policy an operator chooses (seed 000, "deletion follows intent").
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    """Run the janitor after each availability pass."""
    interval: Interval = timedelta(hours=1)
    """Least time between two sweeps (sweeps ride on the sidecar's passes)."""
    minRedAge: Duration = timedelta(hours=168)
    """How long ``Available=False`` must have held (since its ``lastTransitionTime``)."""
    keepLast: int = Field(default=3, ge=0)
    """The newest N ComponentVersions of each Component are never deleted, red or not."""
    excludedNamespaces: tuple[str, ...] = ()
    """Namespaces the janitor never deletes in."""
    maxDeletesPerSweep: int = Field(default=50, ge=0)
    """At most this many deletions per sweep (oldest red first); 0 plans but deletes nothing."""
    dryRun: bool = False
    """Plan and emit Events (``would delete``) without deleting."""


class ChartIndexConfig(BaseModel):
    """The chart indexer (seed 004): verdicts per OCI chart tag in HelmClusterAddonChart status. On by default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool | None = None
    """Follows ``families.charts.mode`` (on exactly in standalone); an explicit value must agree with it."""
    interval: Interval = timedelta(minutes=5)
    """Least time between two passes over the repositories (operator-helm's ``ChartsSyncInterval``)."""
    concurrency: int = Field(default=8, ge=1, le=256)
    """Manifest requests in flight per repository (one attempt each)."""


class PackagesConfig(BaseModel):
    """Package revision bookkeeping (revision numbers, publish record, latest label, finalizer)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool | None = None
    """Follows ``families.packages.mode``: on in standalone, off alongside Porch (whose own controllers do
    this work); an explicit value must agree with the mode (``PolicyConfig`` refuses one that does not)."""


class SidecarConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    availability: AvailabilityConfig = Field(default_factory=AvailabilityConfig)
    referencedSet: ReferencedSetConfig = Field(default_factory=ReferencedSetConfig)
    reclaim: ReclaimConfig = Field(default_factory=ReclaimConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    packages: PackagesConfig = Field(default_factory=PackagesConfig)
    chartIndex: ChartIndexConfig = Field(default_factory=ChartIndexConfig)
