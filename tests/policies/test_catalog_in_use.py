"""Registry, Release and Component DELETE: still referenced, or still holding SolAr's protection finalizer.

SolAr's controllers put ``registry-ref`` on a Registry that Targets or RegistryBindings use,
``release-ref`` on a Release that Profiles or ReleaseBindings deploy, and ``component-ref`` on a
Component that ComponentVersions belong to (reference/solar-catalog-api.md section 2). A DELETE
they would only hold in Terminating is refused up front, naming the referrers or the finalizer.
"""

from __future__ import annotations

import pytest

from policies.config import PolicyConfig
from policies.model import Operation
from tests.policies.test_catalog_support import (
    ADMIN,
    ALICE,
    DISCOVERY,
    GC,
    NS,
    NS_CONTROLLER,
    OTHER_NS,
    allowed,
    component,
    context,
    denied,
    profile,
    registry,
    registry_binding,
    release,
    request,
    target,
    validate,
)

REGISTRY_REF = "solar.opendefense.cloud/registry-ref"
RELEASE_REF = "solar.opendefense.cloud/release-ref"
COMPONENT_REF = "solar.opendefense.cloud/component-ref"

REGISTRY_PROTECTED = (
    "it carries the protection finalizer solar.opendefense.cloud/registry-ref and would hang in Terminating; "
    "wait until the Target and RegistryBinding controllers remove it, or remove it yourself if no Target or "
    "RegistryBinding uses this Registry"
)
RELEASE_PROTECTED = (
    "it carries the protection finalizer solar.opendefense.cloud/release-ref and would hang in Terminating; "
    "wait until the Profile and ReleaseBinding controllers remove it, or remove it yourself if no Profile or "
    "ReleaseBinding uses this Release"
)
COMPONENT_PROTECTED = (
    "it carries the protection finalizer solar.opendefense.cloud/component-ref and would hang in Terminating; "
    "wait until the ComponentVersion controller removes it, or remove it yourself if no ComponentVersion uses "
    "this Component"
)
REGISTRY_RULE = "catalog.registry-in-use"
RELEASE_RULE = "catalog.release-in-use"


def registry_in_use(referrers: str) -> str:
    return (
        f"referenced by live {referrers}; point the Targets at another Registry and delete the RegistryBindings first"
    )


def release_in_use(count: int, profiles: str) -> str:
    return (
        f"referenced by live Profiles ({count}): {profiles}; "
        "delete those Profiles or point them at another Release first"
    )


SEVEN_TARGETS = [target(f"t{i}") for i in (3, 1, 7, 5, 2)] + [
    target("t4", OTHER_NS, registry_ns=NS),
    target("t6", OTHER_NS, registry_ns=NS),
]


@pytest.mark.parametrize(
    ("user", "referrers", "finalizers", "expected"),
    [
        pytest.param(ALICE, [], (), allowed(), id="unused"),
        pytest.param(
            ALICE,
            [target("edge-1")],
            (),
            denied(REGISTRY_RULE, registry_in_use("Targets (1): team-a/edge-1")),
            id="target",
        ),
        pytest.param(
            ALICE,
            [target("edge-1", OTHER_NS, registry_ns=NS)],
            (),
            denied(REGISTRY_RULE, registry_in_use("Targets (1): team-b/edge-1")),
            id="target-in-another-namespace",
        ),
        pytest.param(
            ALICE,
            [registry_binding("edge-zot")],
            (),
            denied(REGISTRY_RULE, registry_in_use("RegistryBindings (1): team-a/edge-zot")),
            id="registrybinding",
        ),
        pytest.param(
            ADMIN,
            [*SEVEN_TARGETS, registry_binding("b2"), registry_binding("b1")],
            (REGISTRY_REF,),
            denied(
                REGISTRY_RULE,
                registry_in_use(
                    "Targets (7): team-a/t1, team-a/t2, team-a/t3, team-a/t5, team-a/t7 and 2 more; "
                    "live RegistryBindings (2): team-a/b1, team-a/b2"
                ),
            ),
            id="both-kinds-five-named-each",
        ),
        pytest.param(
            ALICE,
            [target("edge-1", terminating=True), registry_binding("edge-zot", terminating=True)],
            (),
            allowed(),
            id="referrers-terminating",
        ),
        pytest.param(ALICE, [target("edge-1", registry_name="other")], (), allowed(), id="another-registry"),
        pytest.param(ALICE, [target("edge-1", OTHER_NS)], (), allowed(), id="same-name-in-the-target-namespace"),
        pytest.param(
            ALICE,
            [registry_binding("edge-zot", OTHER_NS)],
            (),
            allowed(),
            id="registrybinding-of-another-namespace",
        ),
        pytest.param(ALICE, [], (REGISTRY_REF,), denied(REGISTRY_RULE, REGISTRY_PROTECTED), id="finalizer-only"),
        pytest.param(
            DISCOVERY,
            [target("edge-1")],
            (),
            denied(REGISTRY_RULE, registry_in_use("Targets (1): team-a/edge-1")),
            id="observer-too",
        ),
        pytest.param(GC, SEVEN_TARGETS, (REGISTRY_REF,), allowed(), id="garbage-collector"),
        pytest.param(NS_CONTROLLER, SEVEN_TARGETS, (REGISTRY_REF,), allowed(), id="namespace-controller"),
    ],
)
def test_registry_delete(user, referrers, finalizers, expected):
    reg = registry()
    if finalizers:
        reg["metadata"]["finalizers"] = list(finalizers)
    ctx = context(reg, *referrers)
    assert validate(request(Operation.DELETE, old=reg, user=user), ctx) == expected


SEVEN_PROFILES = [profile(f"p{i}") for i in (3, 1, 7, 5, 2, 4, 6)]


@pytest.mark.parametrize(
    ("user", "profiles", "finalizers", "expected"),
    [
        pytest.param(ALICE, [], (), allowed(), id="unused"),
        pytest.param(
            ALICE, [profile("fleet")], (), denied(RELEASE_RULE, release_in_use(1, "team-a/fleet")), id="one-profile"
        ),
        pytest.param(
            ADMIN,
            SEVEN_PROFILES,
            (RELEASE_REF,),
            denied(RELEASE_RULE, release_in_use(7, "team-a/p1, team-a/p2, team-a/p3, team-a/p4, team-a/p5 and 2 more")),
            id="seven-profiles-five-named",
        ),
        pytest.param(ALICE, [profile("fleet", terminating=True)], (), allowed(), id="profile-terminating"),
        pytest.param(ALICE, [profile("fleet", release_name="api")], (), allowed(), id="another-release"),
        pytest.param(ALICE, [profile("fleet", OTHER_NS)], (), allowed(), id="profile-of-another-namespace"),
        pytest.param(ALICE, [], (RELEASE_REF,), denied(RELEASE_RULE, RELEASE_PROTECTED), id="finalizer-only"),
        pytest.param(
            ALICE,
            [],
            ("solar.opendefense.cloud/release-finalizer",),
            allowed(),
            id="own-finalizer-does-not-protect",
        ),
        pytest.param(GC, SEVEN_PROFILES, (RELEASE_REF,), allowed(), id="garbage-collector"),
        pytest.param(NS_CONTROLLER, SEVEN_PROFILES, (RELEASE_REF,), allowed(), id="namespace-controller"),
    ],
)
def test_release_delete(user, profiles, finalizers, expected):
    rel = release("web", finalizers=finalizers)
    ctx = context(rel, *profiles)
    assert validate(request(Operation.DELETE, old=rel, user=user), ctx) == expected


def test_release_delete_names_as_many_profiles_as_configured():
    rel = release("web")
    ctx = context(rel, *SEVEN_PROFILES, config=PolicyConfig(maxListedReferrers=2))
    assert validate(request(Operation.DELETE, old=rel), ctx) == denied(
        RELEASE_RULE, release_in_use(7, "team-a/p1, team-a/p2 and 5 more")
    )


def test_a_profile_in_another_namespace_naming_the_release_and_a_namespace_is_still_local():
    """``spec.releaseRef`` is a LocalObjectReference: a namespace written into it is ignored, as SolAr does."""
    stray = profile("fleet", OTHER_NS)
    stray["spec"]["releaseRef"]["namespace"] = NS
    rel = release("web")
    assert validate(request(Operation.DELETE, old=rel), context(rel, stray)) == allowed()


@pytest.mark.parametrize(
    ("user", "finalizers", "expected"),
    [
        pytest.param(ALICE, (COMPONENT_REF,), denied("catalog.component-in-use", COMPONENT_PROTECTED), id="finalizer"),
        pytest.param(ALICE, (), allowed(), id="no-finalizer"),
        pytest.param(GC, (COMPONENT_REF,), allowed(), id="garbage-collector"),
        pytest.param(NS_CONTROLLER, (COMPONENT_REF,), allowed(), id="namespace-controller"),
    ],
)
def test_component_delete_with_its_protection_finalizer(user, finalizers, expected):
    comp = component(finalizers=finalizers)
    assert validate(request(Operation.DELETE, old=comp, user=user), context(comp)) == expected
