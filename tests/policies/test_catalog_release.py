"""Release rules: the binding gate, uniqueName immutability, and ReferenceGrant warnings."""

from __future__ import annotations

import dataclasses

import pytest

from policies.families import TABLES
from policies.kinds import RELEASE
from policies.model import Operation
from tests.policies.test_catalog_support import (
    NS,
    OTHER_NS,
    allowed,
    changed,
    component_version,
    context,
    denied,
    reference_grant,
    registry,
    registry_binding,
    release,
    release_binding,
    request,
    target,
    validate,
)

GREEN = ("True", "ArtifactResolved", "sha256:1f2e resolved")
RED = ("False", "ArtifactMissing", "manifest not found after 3 checks")
UNKNOWN = ("Unknown", "CheckFailed", "registry answered 503")

RED_MESSAGE = (
    "ComponentVersion team-a/demo-v1 is Available=False (ArtifactMissing) since 2026-11-28T09:15:00Z: "
    "manifest not found after 3 checks; bind the Release to an available version"
)


@pytest.mark.parametrize(
    ("cv", "expected"),
    [
        pytest.param(component_version(available=GREEN), allowed(), id="available"),
        pytest.param(component_version(available=RED), denied("catalog.release-binding", RED_MESSAGE), id="red"),
        pytest.param(
            component_version(available=("False", "", "")),
            denied(
                "catalog.release-binding",
                "ComponentVersion team-a/demo-v1 is Available=False (no reason) since 2026-11-28T09:15:00Z: "
                "the backing artifact is missing; bind the Release to an available version",
            ),
            id="red-without-reason",
        ),
        pytest.param(
            component_version(available=UNKNOWN),
            allowed(
                "ComponentVersion team-a/demo-v1 availability is Unknown (CheckFailed); the binding may not render"
            ),
            id="unknown",
        ),
        pytest.param(
            component_version(),
            allowed("ComponentVersion team-a/demo-v1 has not been checked for availability yet"),
            id="no-condition-yet",
        ),
        pytest.param(
            None,
            allowed("ComponentVersion team-a/demo-v1 not found yet; the Release waits until it exists"),
            id="not-discovered-yet",
        ),
        pytest.param(
            component_version(available=GREEN, terminating=True),
            denied(
                "catalog.release-binding",
                "ComponentVersion team-a/demo-v1 is being deleted; bind the Release to another version",
            ),
            id="terminating",
        ),
    ],
)
def test_release_create_binds_only_to_a_usable_component_version(cv, expected):
    ctx = context(*([cv] if cv else []))
    assert validate(request(Operation.CREATE, release()), ctx) == expected


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            release(), changed(release(), "spec", "values", value={"replicas": 3}), allowed(), id="unchanged-ref-red-cv"
        ),
        pytest.param(
            release(),
            changed(release(), "spec", "componentVersionRef", "namespace", value=NS),
            allowed(),
            id="same-ref-spelt-out",
        ),
        pytest.param(
            release(cv="demo-v2"),
            release(),
            denied("catalog.release-binding", RED_MESSAGE),
            id="rebind-to-red",
        ),
        pytest.param(release(), release(cv="demo-v2"), allowed(), id="rebind-from-red-to-green"),
    ],
)
def test_release_update_is_judged_only_when_the_reference_changes(old, new, expected):
    ctx = context(component_version(available=RED), component_version("demo-v2", available=GREEN))
    assert validate(request(Operation.UPDATE, new, old), ctx) == expected


def test_release_status_updates_are_never_judged():
    """The status subresource carries no catalog rule, so a controller can always report."""
    assert TABLES["catalog"].lookup(False, RELEASE, Operation.UPDATE, "status") == ()
    ctx = context(component_version(available=RED))
    req = request(Operation.UPDATE, release(), release(cv="demo-v2"), sub_resource="status")
    assert validate(req, ctx) == allowed()


@pytest.mark.parametrize(
    ("old_name", "new_name", "expected"),
    [
        pytest.param(None, "web", allowed(), id="set-first-time"),
        pytest.param("web", "web", allowed(), id="unchanged"),
        pytest.param(None, None, allowed(), id="never-set"),
        pytest.param(
            "web",
            "web-2",
            denied(
                "catalog.release-unique-name",
                'spec.uniqueName is immutable once set (was "web", now "web-2"); '
                "create a new Release to deploy under another uniqueName",
                422,
            ),
            id="changed",
        ),
        pytest.param(
            "web",
            None,
            denied(
                "catalog.release-unique-name",
                'spec.uniqueName is immutable once set (was "web", now ""); '
                "create a new Release to deploy under another uniqueName",
                422,
            ),
            id="removed",
        ),
    ],
)
def test_release_unique_name_is_immutable_once_set(old_name, new_name, expected):
    ctx = context(component_version(available=GREEN))
    req = request(Operation.UPDATE, release(unique_name=new_name), release(unique_name=old_name))
    assert validate(req, ctx) == expected


def test_release_unique_name_may_be_set_on_create():
    ctx = context(component_version(available=GREEN))
    assert validate(request(Operation.CREATE, release(unique_name="web")), ctx) == allowed()


CV_B = component_version(ns=OTHER_NS, available=GREEN)
RELEASE_GRANT = reference_grant(OTHER_NS, "Release", NS, "ComponentVersion")
NOT_GRANTED = "no ReferenceGrant in team-b admits Release from team-a to ComponentVersion demo-v1; it will not resolve"


@pytest.mark.parametrize(
    ("grants", "expected"),
    [
        pytest.param([RELEASE_GRANT], allowed(), id="granted"),
        pytest.param([], allowed(NOT_GRANTED), id="no-grant"),
        pytest.param(
            [reference_grant(OTHER_NS, "Release", "team-c", "ComponentVersion")],
            allowed(NOT_GRANTED),
            id="other-from-ns",
        ),
        pytest.param([reference_grant(OTHER_NS, "Release", NS, "Registry")], allowed(NOT_GRANTED), id="other-to-kind"),
        pytest.param(
            [reference_grant(OTHER_NS, "Target", NS, "ComponentVersion")], allowed(NOT_GRANTED), id="other-from-kind"
        ),
        pytest.param(
            [reference_grant(NS, "Release", NS, "ComponentVersion")], allowed(NOT_GRANTED), id="grant-in-wrong-ns"
        ),
    ],
)
def test_release_cross_namespace_reference_needs_a_grant(grants, expected):
    ctx = context(CV_B, *grants)
    assert validate(request(Operation.CREATE, release(cv_ns=OTHER_NS)), ctx) == expected


def test_release_grant_warning_is_given_when_the_reference_is_set_not_on_every_update():
    ctx = context(CV_B)
    old = release(cv_ns=OTHER_NS)
    assert validate(request(Operation.UPDATE, changed(old, "spec", "values", value={}), old), ctx) == allowed()
    moved = request(Operation.UPDATE, old, release())
    assert validate(moved, context(CV_B, component_version(available=GREEN))) == allowed(NOT_GRANTED)


@pytest.mark.parametrize(
    ("obj", "objs", "warning"),
    [
        pytest.param(
            target(registry_ns=OTHER_NS),
            [registry(ns=OTHER_NS)],
            "no ReferenceGrant in team-b admits Target from team-a to Registry zot; it will not resolve",
            id="target-to-registry",
        ),
        pytest.param(
            release_binding("edge-web", target_ns=OTHER_NS),
            [],
            "no ReferenceGrant in team-b admits ReleaseBinding from team-a to Target edge-1; it will not resolve",
            id="releasebinding-to-target",
        ),
        pytest.param(
            registry_binding("edge-zot", target_ns=OTHER_NS),
            [registry()],
            "no ReferenceGrant in team-b admits RegistryBinding from team-a to Target edge-1; it will not resolve",
            id="registrybinding-to-target",
        ),
    ],
)
def test_other_cross_namespace_references_warn_without_a_grant_and_pass_with_one(obj, objs, warning):
    assert validate(request(Operation.CREATE, obj), context(*objs)) == allowed(warning)
    kind = {"Target": "Registry", "ReleaseBinding": "Target", "RegistryBinding": "Target"}[obj["kind"]]
    grant = reference_grant(OTHER_NS, obj["kind"], NS, kind)
    assert validate(request(Operation.CREATE, obj), context(*objs, grant)) == allowed()


@pytest.mark.parametrize(
    ("req", "objs"),
    [
        pytest.param(request(Operation.CREATE, release()), [component_version(available=RED)], id="red-binding"),
        pytest.param(request(Operation.CREATE, release()), [], id="not-found-warning"),
        pytest.param(request(Operation.CREATE, target()), [registry(solarSecretRef=None)], id="no-push-credentials"),
        pytest.param(
            request(Operation.DELETE, old=component_version()), [component_version(), release()], id="cv-in-use"
        ),
    ],
)
def test_dry_run_requests_get_the_same_answer(req, objs):
    dry = dataclasses.replace(req, dry_run=True)
    assert validate(dry, context(*objs)) == validate(req, context(*objs))
