"""Which Registry may lend credentials to a lookup for a ComponentVersion (tenancy), as a table."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from policies.kinds import COMPONENT_VERSION
from policies.model import GroupKind, Obj
from policies.objects import ref_of
from policies.reference_grants import is_granted
from policies.registry_credentials import (
    MSG_NO_REGISTRY,
    MSG_NO_REGISTRY_NO_GRANTS,
    MSG_NO_SECRET,
    MSG_SECRET,
    MSG_WITH_GRANTED_SECRET,
    MSG_WITH_SECRET,
    CheckedWith,
    SecretRead,
    credential_source,
    registry_source,
)
from tests.policies.test_catalog_support import SOLAR, reference_grant, registry, view

H = "reg.example:5000"
X = "team-x"


def reg(ns: str, name: str = "reg", host: str = H, secret: str | None = "creds", **spec: object) -> Obj:
    return registry(name, ns, hostname=host, solarSecretRef={"name": secret} if secret else None, **spec)


def cv_grant(ns: str, from_ns: str = X, name: str = "grant", from_kind: str = "ComponentVersion") -> Obj:
    return reference_grant(ns, from_kind, from_ns, "Registry", name)


@dataclass(frozen=True)
class Case:
    objects: tuple[Obj, ...]
    registry: str
    """``namespace/name`` of the Registry chosen, ``""`` for none (anonymous)."""
    grant: str = ""
    requester: GroupKind | None = COMPONENT_VERSION
    host: str = H


CASES = {
    "the issue: team-a's Registry is not team-x's": Case((reg("team-a"),), ""),
    "nothing anywhere": Case((), ""),
    "own namespace": Case((reg(X), reg("team-a")), f"{X}/reg"),
    "a grant in the Registry's namespace admits team-x": Case(
        (reg("team-a"), cv_grant("team-a")), "team-a/reg", "team-a/grant"
    ),
    "a grant in team-x's own namespace admits nothing": Case((reg("team-a"), cv_grant(X)), ""),
    "a grant for team-y": Case((reg("team-a"), cv_grant("team-a", from_ns="team-y")), ""),
    "a grant for Releases (another purpose)": Case((reg("team-a"), cv_grant("team-a", from_kind="Release")), ""),
    "a grant for Targets (another purpose)": Case((reg("team-a"), cv_grant("team-a", from_kind="Target")), ""),
    "a grant to ComponentVersions, not Registries": Case(
        (reg("team-a"), reference_grant("team-a", "ComponentVersion", X, "ComponentVersion")), ""
    ),
    "a grant of another group": Case(
        (
            reg("team-a"),
            {
                "kind": "ReferenceGrant",
                "metadata": {"name": "g", "namespace": "team-a"},
                "spec": {
                    "from": [{"group": "gateway.networking.k8s.io", "kind": "ComponentVersion", "namespace": X}],
                    "to": [{"group": SOLAR, "kind": "Registry"}],
                },
            },
        ),
        "",
    ),
    "a grant with malformed lists": Case(
        (
            reg("team-a"),
            {
                "kind": "ReferenceGrant",
                "metadata": {"name": "g", "namespace": "team-a"},
                "spec": {"from": 5, "to": "Registry"},
            },
        ),
        "",
    ),
    "own Registry without a Secret wins over a granted one with": Case(
        (reg(X, secret=None), reg("team-a"), cv_grant("team-a")), f"{X}/reg"
    ),
    "host is case-insensitive, a trailing slash ignored": Case((reg(X, host="REG.Example:5000/"),), f"{X}/reg"),
    "another host in the own namespace": Case((reg(X, host="other.example:5000"),), ""),
    "several of one's own: the one with a Secret, then by name": Case(
        (reg(X, "a-plain", secret=None), reg(X, "z-creds"), reg(X, "m-creds")), f"{X}/m-creds"
    ),
    "several granted: the one with a Secret, then by namespace": Case(
        (
            reg("team-b", secret=None),
            cv_grant("team-b"),
            reg("team-d"),
            cv_grant("team-d"),
            reg("team-c"),
            cv_grant("team-c"),
        ),
        "team-c/reg",
        "team-c/grant",
    ),
    "granted and ungranted: only the granted one": Case(
        (reg("team-a"), reg("team-b"), cv_grant("team-b")), "team-b/reg", "team-b/grant"
    ),
    "two grants: the first by name is reported": Case(
        (reg("team-a"), cv_grant("team-a", name="z"), cv_grant("team-a", name="b")), "team-a/reg", "team-a/b"
    ),
    "no requester kind: grants are not consulted": Case((reg("team-a"), cv_grant("team-a")), "", requester=None),
    "no requester kind: the own namespace still counts": Case((reg(X),), f"{X}/reg", requester=None),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_credential_source(case: Case) -> None:
    source = credential_source(view(*case.objects), X, case.host, case.requester)
    assert (source.key, ref_of(source.grant) if source.grant else "") == (case.registry, case.grant)


def test_anonymous_says_why() -> None:
    none = credential_source(view(reg("team-a")), X, "Reg.Example:5000")
    assert none.checked_with() == CheckedWith(
        "checked anonymously: no Registry for reg.example:5000 in namespace team-x or granted to it", anonymous=True
    )
    assert none.checked_with() == CheckedWith(MSG_NO_REGISTRY.format(host=H, namespace=X), anonymous=True)
    assert none.secret is None and not none.plain_http
    chart = credential_source(view(reg("team-a")), "catalog-warden", H, requester=None)
    assert chart.checked_with().text == MSG_NO_REGISTRY_NO_GRANTS.format(host=H, namespace="catalog-warden")


def test_what_the_status_records_for_each_source() -> None:
    own = credential_source(view(reg(X)), X, H)
    assert own.secret == (X, "creds")
    assert own.checked_with() == CheckedWith(
        MSG_WITH_SECRET.format(secret=f"{X}/creds", registry=f"{X}/reg"), anonymous=False
    )
    granted = credential_source(view(reg("team-a"), cv_grant("team-a")), X, H)
    assert granted.secret == ("team-a", "creds"), "a Secret is read only in the lending Registry's namespace"
    assert granted.checked_with().text == MSG_WITH_GRANTED_SECRET.format(
        secret="team-a/creds", registry="team-a/reg", grant="team-a/grant"
    )
    assert granted.checked_with(SecretRead.MISSING) == CheckedWith(
        "checked anonymously: Secret team-a/creds of Registry team-a/reg not found", anonymous=True
    )
    assert granted.checked_with(SecretRead.UNUSABLE, "no password").text == MSG_SECRET[SecretRead.UNUSABLE].format(
        secret="team-a/creds", registry="team-a/reg", error="no password"
    )
    plain = credential_source(view(reg(X, secret=None, plainHTTP=True)), X, H)
    assert plain.plain_http and plain.secret is None
    assert plain.checked_with() == CheckedWith(MSG_NO_SECRET.format(registry=f"{X}/reg"), anonymous=True)


def test_a_registry_acting_on_itself_uses_its_own_secret() -> None:
    source = registry_source(reg("team-a"))
    assert (source.key, source.secret, source.grant) == ("team-a/reg", ("team-a", "creds"), None)


def test_is_granted_is_granting() -> None:
    v = view(cv_grant("team-a"))
    assert is_granted(v, COMPONENT_VERSION, X, GroupKind(SOLAR, "Registry"), "team-a")
    assert not is_granted(v, COMPONENT_VERSION, "team-y", GroupKind(SOLAR, "Registry"), "team-a")
