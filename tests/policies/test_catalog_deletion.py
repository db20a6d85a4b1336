"""Deletion follows intent: ComponentVersion and Component DELETE gating, by identity."""

from __future__ import annotations

import pytest

from policies.config import PolicyConfig
from policies.identity import Identities
from policies.model import Operation, UserInfo
from tests.policies.test_catalog_support import (
    ADMIN,
    ALICE,
    DISCOVERY,
    GC,
    NS,
    NS_CONTROLLER,
    OTHER_NS,
    WARDEN,
    allowed,
    component,
    component_version,
    context,
    denied,
    release,
    request,
    validate,
)

PROTECTION = "solar.opendefense.cloud/componentversion-ref"
OBSERVER_MESSAGE = (
    "system:serviceaccount:solar-system:solar-discovery is an observer: it may create and update "
    "ComponentVersions but never delete them (deletion follows intent); a missing artifact turns the entry "
    "Available=False instead, and the retention janitor or an operator removes it"
)
PROTECTED_MESSAGE = (
    "it carries the protection finalizer solar.opendefense.cloud/componentversion-ref and would hang in "
    "Terminating; wait until the Release controller removes it, or remove it yourself if no Release uses this version"
)


def in_use(count: int, releases: str) -> str:
    return (
        f"referenced by live Releases ({count}): {releases}; "
        "delete those Releases or point them at another ComponentVersion first"
    )


SEVEN = [release(f"r{i}") for i in (3, 1, 7, 5, 2)] + [
    release("r4", OTHER_NS, cv_ns=NS),
    release("r6", OTHER_NS, cv_ns=NS),
]


@pytest.mark.parametrize(
    ("user", "releases", "finalizers", "expected"),
    [
        pytest.param(ALICE, [], (), allowed(), id="unused"),
        pytest.param(
            ALICE,
            [release("web")],
            (),
            denied("catalog.componentversion-in-use", in_use(1, "team-a/web")),
            id="one-release",
        ),
        pytest.param(
            ADMIN,
            SEVEN,
            (PROTECTION,),
            denied(
                "catalog.componentversion-in-use",
                in_use(7, "team-a/r1, team-a/r2, team-a/r3, team-a/r5, team-a/r7 and 2 more"),
            ),
            id="seven-releases-five-named",
        ),
        pytest.param(
            ALICE,
            SEVEN[:5],
            (),
            denied(
                "catalog.componentversion-in-use", in_use(5, "team-a/r1, team-a/r2, team-a/r3, team-a/r5, team-a/r7")
            ),
            id="exactly-five",
        ),
        pytest.param(ALICE, [release("web", terminating=True)], (), allowed(), id="release-terminating"),
        pytest.param(ALICE, [release("web", cv="demo-v2")], (), allowed(), id="release-of-another-version"),
        pytest.param(ALICE, [release("web", OTHER_NS)], (), allowed(), id="same-name-other-namespace"),
        pytest.param(
            ALICE, [], (PROTECTION,), denied("catalog.componentversion-in-use", PROTECTED_MESSAGE), id="finalizer-only"
        ),
        pytest.param(
            ALICE,
            [],
            ("solar.opendefense.cloud/componentversion-finalizer",),
            allowed(),
            id="own-finalizer-does-not-protect",
        ),
        pytest.param(WARDEN, [], (), allowed(), id="warden-janitor-unused"),
        pytest.param(
            DISCOVERY, [], (), denied("catalog.componentversion-observer-delete", OBSERVER_MESSAGE), id="observer"
        ),
        pytest.param(
            DISCOVERY,
            [release("web")],
            (PROTECTION,),
            denied("catalog.componentversion-observer-delete", OBSERVER_MESSAGE),
            id="observer-in-use",
        ),
        pytest.param(GC, SEVEN, (PROTECTION,), allowed(), id="garbage-collector"),
        pytest.param(NS_CONTROLLER, SEVEN, (PROTECTION,), allowed(), id="namespace-controller"),
    ],
)
def test_component_version_delete(user, releases, finalizers, expected):
    cv = component_version(finalizers=finalizers)
    ctx = context(cv, *releases)
    assert validate(request(Operation.DELETE, old=cv, user=user), ctx) == expected


def test_component_version_delete_names_as_many_releases_as_configured():
    cv = component_version()
    ctx = context(cv, *SEVEN, config=PolicyConfig(maxListedReferrers=2))
    assert validate(request(Operation.DELETE, old=cv), ctx) == denied(
        "catalog.componentversion-in-use", in_use(7, "team-a/r1, team-a/r2 and 5 more")
    )


def test_component_version_delete_reads_the_finalizer_from_the_view_without_old_object():
    """Apiservers before 1.15 send no oldObject on DELETE; the cached object is used instead."""
    ctx = context(component_version(finalizers=(PROTECTION,)))
    req = request(Operation.DELETE, old=component_version())
    req = type(req)(**{**{f: getattr(req, f) for f in req.__dataclass_fields__}, "old_object": None})
    assert validate(req, ctx) == denied("catalog.componentversion-in-use", PROTECTED_MESSAGE)


@pytest.mark.parametrize(
    ("username", "expected_rule"),
    [
        pytest.param(
            "system:serviceaccount:arc:conduit", "catalog.componentversion-observer-delete", id="prefix-match"
        ),
        pytest.param("system:serviceaccount:solar-system:solar-discovery", None, id="default-replaced"),
    ],
)
def test_observers_are_configuration(username, expected_rule):
    config = PolicyConfig(identities=Identities(observers=("system:serviceaccount:arc:",)))
    cv = component_version()
    outcome = validate(request(Operation.DELETE, old=cv, user=UserInfo(username)), context(cv, config=config))
    assert outcome.rule == expected_rule


@pytest.mark.parametrize("op", [Operation.CREATE, Operation.UPDATE])
def test_observers_may_create_and_update_component_versions(op):
    cv = component_version()
    req = request(op, cv, cv if op is Operation.UPDATE else None, user=DISCOVERY)
    assert validate(req, context()) == allowed()


def component_in_use(count: int, versions: str) -> str:
    return f"it has live ComponentVersions ({count}): {versions}; delete those ComponentVersions first"


@pytest.mark.parametrize(
    ("user", "versions", "expected"),
    [
        pytest.param(ALICE, [], allowed(), id="no-versions"),
        pytest.param(
            ALICE,
            [component_version("demo-v2"), component_version("demo-v1")],
            denied("catalog.component-in-use", component_in_use(2, "team-a/demo-v1, team-a/demo-v2")),
            id="two-versions",
        ),
        pytest.param(
            ALICE,
            [component_version(component_name=None, labels={"solar.opendefense.cloud/component": "demo"})],
            denied("catalog.component-in-use", component_in_use(1, "team-a/demo-v1")),
            id="found-by-discovery-label",
        ),
        pytest.param(ALICE, [component_version(terminating=True)], allowed(), id="versions-terminating"),
        pytest.param(ALICE, [component_version(ns=OTHER_NS)], allowed(), id="same-name-other-namespace"),
        pytest.param(ALICE, [component_version(component_name="other")], allowed(), id="other-component"),
        pytest.param(
            DISCOVERY,
            [component_version()],
            denied("catalog.component-in-use", component_in_use(1, "team-a/demo-v1")),
            id="observer-too",
        ),
        pytest.param(GC, [component_version()], allowed(), id="garbage-collector"),
        pytest.param(NS_CONTROLLER, [component_version()], allowed(), id="namespace-controller"),
    ],
)
def test_component_delete(user, versions, expected):
    comp = component()
    ctx = context(comp, *versions)
    assert validate(request(Operation.DELETE, old=comp, user=user), ctx) == expected


@pytest.mark.parametrize(
    ("username", "expected_rule"),
    [
        pytest.param("system:serviceaccount:solar:prod-solar-discovery", "catalog.componentversion-observer-delete"),
        pytest.param("system:serviceaccount:team-b:solar-discovery", "catalog.componentversion-observer-delete"),
        pytest.param("system:serviceaccount:team-b:solar-discovery-evil", None),
    ],
)
def test_the_default_observers_are_every_release_of_solar_discovery(username, expected_rule):
    cv = component_version()
    outcome = validate(request(Operation.DELETE, old=cv, user=UserInfo(username)), context(cv))
    assert outcome.rule == expected_rule
