"""Who is asking: the identity sets that rules consult, and how a username matches them.

Identities are configuration, not code (DESIGN.md section 4). An entry is one of three forms:

- a **prefix**, ending in ``:``: ``system:serviceaccount:kube-system:`` matches every service
  account of that namespace;
- a **pattern**, containing ``*``: each ``*`` stands for one or more characters other than ``:``,
  so it never reaches across the namespace/name boundary of a service account username, and the
  whole username must match (``system:serviceaccount:*:*-solar-discovery`` matches
  ``prod-solar-discovery`` in any namespace, not ``solar-discovery-evil``); no other character
  is special;
- otherwise an **exact** username.

A glob rather than a regular expression: the one thing operators need (any namespace, any Helm
release name) reads at a glance and cannot be written too broad by a missing anchor or escape.
Entries are checked when the configuration loads (:func:`check_entry`). Group membership never
grants an identity: ``system:masters`` is a user like any other here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from policies.model import UserInfo

GARBAGE_COLLECTOR = "system:serviceaccount:kube-system:generic-garbage-collector"
NAMESPACE_CONTROLLER = "system:serviceaccount:kube-system:namespace-controller"
CLUSTER_CLEANUP = frozenset({GARBAGE_COLLECTOR, NAMESPACE_CONTROLLER})
"""Never blocked from deleting: blocking them leaves namespaces and owners stuck Terminating."""


WILDCARD = "*"
SEGMENT = "[^:]+"
"""What one ``*`` matches: a non-empty run inside one ``:``-separated segment."""


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(SEGMENT.join(re.escape(part) for part in pattern.split(WILDCARD)))


def matches_one(username: str, entry: str) -> bool:
    """Whether ``username`` matches one identity entry (prefix, pattern or exact; see the module doc).

    A prefix matches as upstream's CEL ``startsWith`` does (the bare prefix included).
    """
    if WILDCARD in entry:
        return _compiled(entry).fullmatch(username) is not None
    return username.startswith(entry) if entry.endswith(":") else username == entry


def matches(username: str, patterns: Iterable[str]) -> bool:
    """True when ``username`` matches any entry of ``patterns``."""
    return any(matches_one(username, p) for p in patterns)


MSG_EMPTY = "an identity entry must not be empty"
MSG_PREFIX_PATTERN = (
    "{entry!r} is both a pattern ('*') and a prefix (ends in ':'); "
    "write either a whole username with '*' for a namespace or name, or a prefix without '*'"
)
MSG_DOUBLE_WILDCARD = "{entry!r} has '**'; one '*' already matches a whole namespace or name"


def check_entry(entry: str) -> str:
    """Refuse an entry whose meaning would surprise: empty, a prefix and a pattern at once, or ``**``."""
    if not entry:
        raise ValueError(MSG_EMPTY)
    if WILDCARD in entry and entry.endswith(":"):
        raise ValueError(MSG_PREFIX_PATTERN.format(entry=entry))
    if WILDCARD * 2 in entry:
        raise ValueError(MSG_DOUBLE_WILDCARD.format(entry=entry))
    return entry


Entries = tuple[Annotated[str, AfterValidator(check_entry)], ...]
"""A list of identity entries, each checked at load (the error names the key and the index)."""


def is_cluster_cleanup(user: UserInfo) -> bool:
    return user.username in CLUSTER_CLEANUP


class Identities(BaseModel):
    """The ``identities`` key of ``--config``; every field has the DESIGN.md default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    warden: str = "system:serviceaccount:catalog-warden:catalog-warden"
    observers: Entries = (
        "system:serviceaccount:*:solar-discovery",
        "system:serviceaccount:*:*-solar-discovery",
    )
    """SolAr discovery in any namespace. Its chart names the account ``<release>-solar-discovery``,
    or after the release alone when the release name contains ``solar-discovery``: of those, only
    a release named exactly ``solar-discovery`` matches by default (docs/configuration.md)."""
    packageControllers: Entries = ("system:serviceaccount:porch-system:porch-controllers",)
    chartModules: Entries = Field(
        default=(
            "system:serviceaccount:kube-system:",
            "system:serviceaccount:d8-system:",
            "system:serviceaccount:d8-operator-helm:operator-helm-controller",
            "system:serviceaccount:d8-operator-helm:nelm-source-controller",
            "system:serviceaccount:d8-operator-helm:helm-controller",
            "system:serviceaccount:d8-operator-helm:chart-values-controller",
        )
    )

    def is_warden(self, user: UserInfo) -> bool:
        return user.username == self.warden

    def is_observer(self, user: UserInfo) -> bool:
        return matches(user.username, self.observers)

    def is_package_controller(self, user: UserInfo) -> bool:
        return matches(user.username, self.packageControllers)

    def is_chart_module(self, user: UserInfo) -> bool:
        return self.is_warden(user) or matches(user.username, self.chartModules)
