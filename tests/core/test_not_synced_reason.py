"""Readiness names what is missing: stale kinds first, else kinds not loaded yet with their error."""

from __future__ import annotations

from policies.model import GroupKind
from policies.view import MemoryView, not_synced_reason
from webhook.kube.cache import KindLiveness, Liveness

REVISION = GroupKind("porch.kpt.dev", "PackageRevision")
FORBIDDEN = "403 Forbidden: packagerevisions.porch.kpt.dev is forbidden"


class _PendingView(MemoryView):
    def __init__(self, stale: str = "", pending: str = "") -> None:
        super().__init__(synced=False)
        self._stale, self._pending = stale, pending

    def staleness(self) -> str:
        return self._stale

    def pending(self) -> str:
        return self._pending


def test_an_unsynced_view_names_what_it_has_not_loaded_and_why() -> None:
    pending = KindLiveness(REVISION, Liveness.UNLISTED, error=FORBIDDEN).describe()

    assert pending == f"PackageRevision.porch.kpt.dev not listed yet ({FORBIDDEN})"
    assert not_synced_reason(_PendingView(pending=pending)) == f"cluster state not synced: {pending}"


def test_staleness_comes_first_and_a_view_that_reports_nothing_says_not_synced() -> None:
    assert not_synced_reason(_PendingView(stale="X watch down", pending="Y not listed yet")) == (
        "cluster state stale: X watch down"
    )
    assert not_synced_reason(_PendingView()) == "cluster state not synced"
    assert not_synced_reason(MemoryView(synced=False)) == "cluster state not synced"
    assert not_synced_reason(MemoryView()) == ""


def test_a_kind_not_listed_for_no_known_reason_says_only_that() -> None:
    assert KindLiveness(REVISION, Liveness.UNLISTED).describe() == "PackageRevision.porch.kpt.dev not listed yet"
