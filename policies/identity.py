"""Who is asking: the identity sets that rules consult, and how a username matches them.

Identities are configuration, not code (DESIGN.md section 4). An entry ending in ``:`` is a
prefix (``system:serviceaccount:kube-system:`` matches every service account of that
namespace); any other entry must match the username exactly. Group membership never grants an
identity: ``system:masters`` is a user like any other here.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from policies.model import UserInfo

GARBAGE_COLLECTOR = "system:serviceaccount:kube-system:generic-garbage-collector"
NAMESPACE_CONTROLLER = "system:serviceaccount:kube-system:namespace-controller"
CLUSTER_CLEANUP = frozenset({GARBAGE_COLLECTOR, NAMESPACE_CONTROLLER})
"""Never blocked from deleting: blocking them leaves namespaces and owners stuck Terminating."""


def matches(username: str, patterns: Iterable[str]) -> bool:
    """True when ``username`` equals a pattern, or starts with a pattern that ends in ``:``.

    A prefix matches as upstream's CEL ``startsWith`` does (the bare prefix included).
    """
    return any(username.startswith(p) if p.endswith(":") else username == p for p in patterns)


def is_cluster_cleanup(user: UserInfo) -> bool:
    return user.username in CLUSTER_CLEANUP


class Identities(BaseModel):
    """The ``identities`` key of ``--config``; every field has the DESIGN.md default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    warden: str = "system:serviceaccount:catalog-warden:catalog-warden"
    observers: tuple[str, ...] = ("system:serviceaccount:solar-system:solar-discovery",)
    packageControllers: tuple[str, ...] = ("system:serviceaccount:porch-system:porch-controllers",)
    chartModules: tuple[str, ...] = Field(
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
