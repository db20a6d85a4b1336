"""Catalog end to end (issue 4): availability gates new bindings, deletion follows intent.

Every request goes through the official client to the apiserver double, which calls our webhook
server over TLS from the real manifests; the server decides from the informer cache. Messages are
asserted exactly as the user reads them.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from policies import kinds
from policies.catalog import MSG_CV_UNAVAILABLE, WARN_CV_UNCHECKED
from policies.catalog_deletion import (
    CV_PROTECTION_FINALIZER,
    MSG_CV_IN_USE,
    MSG_CV_PROTECTED,
    MSG_OBSERVER_DELETE,
    MSG_REGISTRY_IN_USE,
    MSG_RELEASE_IN_USE,
    PROTECTIONS,
    protected_message,
)
from policies.catalog_refs import COMPONENT_LABEL
from tests.e2e.conftest import OBSERVER, USER, USER_GROUPS, Cluster, Refusal, Resource, denied, refused
from tests.support.server import wait_until

SOLAR = "solar.opendefense.cloud"
COMPONENT = Resource(SOLAR, "v1alpha1", "components", "Component")
COMPONENT_VERSION = Resource(SOLAR, "v1alpha1", "componentversions", "ComponentVersion")
RELEASE = Resource(SOLAR, "v1alpha1", "releases", "Release")

VALIDATE = "catalog.validate.catalog-warden.io"
MISSING_SINCE = "2026-11-29T10:00:00Z"
MISSING_DETAIL = "manifest unknown at registry.example.com/demo:1.0.0 (3 consecutive misses)"


def component_version(name: str, ns: str, component: str = "demo", **extra: Any) -> dict[str, Any]:
    return COMPONENT_VERSION.manifest(name, ns, spec={"componentRef": {"name": component}, "tag": "1.0.0"}, **extra)


def release(name: str, ns: str, cv: str) -> dict[str, Any]:
    return RELEASE.manifest(name, ns, spec={"componentVersionRef": {"name": cv}})


def availability(status: str, reason: str, since: str, message: str = "") -> dict[str, Any]:
    """The status the sidecar writes (DESIGN.md section 3): an Available condition."""
    cond = {"type": "Available", "status": status, "reason": reason, "lastTransitionTime": since}
    if message:
        cond["message"] = message
    return {"status": {"conditions": [cond]}}


def discovered_cv(cluster: Cluster, ns: str, name: str = "demo-1-0-0", **extra: Any) -> dict[str, Any]:
    """A ComponentVersion as discovery creates it, once the cache holds it."""
    created = cluster.as_user(OBSERVER, COMPONENT_VERSION).create(component_version(name, ns, **extra)).object
    return cluster.stack.wait_caught_up(COMPONENT_VERSION.group_kind, created)


def set_availability(cluster: Cluster, ns: str, name: str, status: dict[str, Any]) -> None:
    """Write availability as the warden's sidecar does and wait until the webhook's cache sees it."""
    written = cluster.warden(COMPONENT_VERSION).patch(name, status, ns).object
    cluster.stack.wait_caught_up(COMPONENT_VERSION.group_kind, written)


RED = availability("False", "ArtifactMissing", MISSING_SINCE, MISSING_DETAIL)
GREEN = availability("True", "ArtifactResolved", "2026-11-29T11:00:00Z", "resolved sha256:0123")

RED_MESSAGE = MSG_CV_UNAVAILABLE.format(
    cv="{ns}/demo-1-0-0", reason="ArtifactMissing", since=MISSING_SINCE, detail=MISSING_DETAIL
)


def test_a_red_componentversion_blocks_a_new_release_until_its_artifact_returns(cluster: Cluster, ns: str) -> None:
    discovered_cv(cluster, ns)
    set_availability(cluster, ns, "demo-1-0-0", RED)
    releases = cluster.user(RELEASE)

    refusal = refused(lambda: releases.create(release("web", ns, "demo-1-0-0")))

    expected = RED_MESSAGE.replace("{ns}", ns)
    assert refusal == Refusal(403, denied(VALIDATE, "Release", f"{ns}/web", "catalog.release-binding", expected))
    assert not releases.exists("web", ns)

    set_availability(cluster, ns, "demo-1-0-0", GREEN)
    admitted = releases.create(release("web", ns, "demo-1-0-0"))

    assert admitted.warnings == []
    assert releases.get("web", ns)["spec"] == {"componentVersionRef": {"name": "demo-1-0-0"}}


def test_a_release_bound_before_its_componentversion_turned_red_can_still_be_updated(cluster: Cluster, ns: str) -> None:
    discovered_cv(cluster, ns)
    set_availability(cluster, ns, "demo-1-0-0", GREEN)
    releases = cluster.user(RELEASE)
    releases.create(release("web", ns, "demo-1-0-0"))
    set_availability(cluster, ns, "demo-1-0-0", RED)

    updated = releases.patch("web", {"spec": {"targetNamespace": "web-prod"}}, ns)

    assert updated.warnings == []
    assert updated.object["spec"] == {"componentVersionRef": {"name": "demo-1-0-0"}, "targetNamespace": "web-prod"}
    # the same binding made anew is what the gate refuses
    refusal = refused(lambda: releases.create(release("web-2", ns, "demo-1-0-0")))
    assert refusal.message == denied(
        VALIDATE, "Release", f"{ns}/web-2", "catalog.release-binding", RED_MESSAGE.replace("{ns}", ns)
    )


def test_an_unchecked_componentversion_admits_a_release_with_a_warning(cluster: Cluster, ns: str) -> None:
    discovered_cv(cluster, ns)

    admitted = cluster.user(RELEASE).create(release("web", ns, "demo-1-0-0"))

    assert admitted.warnings == [WARN_CV_UNCHECKED.format(cv=f"{ns}/demo-1-0-0")]


def assert_not_terminating(cluster: Cluster, ns: str, name: str) -> None:
    stored = cluster.user(COMPONENT_VERSION).get(name, ns)
    assert "deletionTimestamp" not in stored["metadata"], stored["metadata"]


def test_deleting_a_componentversion_in_use_is_refused_and_leaves_nothing_terminating(
    cluster: Cluster, ns: str
) -> None:
    discovered_cv(cluster, ns)
    set_availability(cluster, ns, "demo-1-0-0", GREEN)
    created = cluster.user(RELEASE).create(release("web", ns, "demo-1-0-0")).object
    cluster.stack.wait_caught_up(RELEASE.group_kind, created)
    versions = cluster.user(COMPONENT_VERSION)

    refusal = refused(lambda: versions.delete("demo-1-0-0", ns))

    message = MSG_CV_IN_USE.format(count=1, releases=f"{ns}/web")
    rule = "catalog.componentversion-in-use"
    assert refusal == Refusal(403, denied(VALIDATE, "ComponentVersion", f"{ns}/demo-1-0-0", rule, message))
    assert_not_terminating(cluster, ns, "demo-1-0-0")

    # the way out the message names: delete the Release, then the version goes at once
    cluster.user(RELEASE).delete("web", ns)
    cluster.stack.wait_uncached(RELEASE.group_kind, "web", ns)
    versions.delete("demo-1-0-0", ns)
    assert not versions.exists("demo-1-0-0", ns)


def test_a_componentversion_still_protected_by_its_finalizer_is_refused_not_left_terminating(
    cluster: Cluster, ns: str
) -> None:
    discovered_cv(cluster, ns, metadata={"finalizers": [CV_PROTECTION_FINALIZER]})
    versions = cluster.user(COMPONENT_VERSION)

    refusal = refused(lambda: versions.delete("demo-1-0-0", ns))

    rule = "catalog.componentversion-in-use"
    expected = denied(VALIDATE, "ComponentVersion", f"{ns}/demo-1-0-0", rule, MSG_CV_PROTECTED)
    assert (refusal.status, refusal.message) == (403, expected)
    assert_not_terminating(cluster, ns, "demo-1-0-0")


def test_discovery_creates_and_updates_componentversions_but_cannot_delete_them(cluster: Cluster, ns: str) -> None:
    discovery = cluster.as_user(OBSERVER, COMPONENT_VERSION)
    created = discovery.create(component_version("demo-1-0-0", ns))
    assert created.object["metadata"]["labels"] == {COMPONENT_LABEL: "demo"}  # the mutating webhook's label
    discovery.patch("demo-1-0-0", {"metadata": {"annotations": {"solar.opendefense.cloud/seen": "1"}}}, ns)

    refusal = refused(lambda: discovery.delete("demo-1-0-0", ns))

    rule = "catalog.componentversion-observer-delete"
    message = MSG_OBSERVER_DELETE.format(user=OBSERVER)
    assert refusal == Refusal(403, denied(VALIDATE, "ComponentVersion", f"{ns}/demo-1-0-0", rule, message))
    assert_not_terminating(cluster, ns, "demo-1-0-0")
    # the same delete by a person (intent) goes through: nothing else holds this version
    cluster.user(COMPONENT_VERSION).delete("demo-1-0-0", ns)
    assert not cluster.user(COMPONENT_VERSION).exists("demo-1-0-0", ns)


def test_deleting_a_namespace_is_not_blocked_by_entries_in_use(cluster: Cluster, ns: str) -> None:
    cluster.user(COMPONENT).create(COMPONENT.manifest("demo", ns, spec={}))
    discovered_cv(cluster, ns)
    set_availability(cluster, ns, "demo-1-0-0", GREEN)
    created = cluster.user(RELEASE).create(release("web", ns, "demo-1-0-0")).object
    cluster.stack.wait_caught_up(RELEASE.group_kind, created)
    core = cluster.stack.core(USER, USER_GROUPS)
    # protected by hand: what the namespace controller must nevertheless be allowed to delete
    assert refused(lambda: cluster.user(COMPONENT_VERSION).delete("demo-1-0-0", ns)).status == 403
    assert refused(lambda: cluster.user(COMPONENT).delete("demo", ns)).status == 403

    core.delete_namespace(ns)

    def namespace_gone() -> bool:
        try:
            core.read_namespace(ns)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_until(namespace_gone, timeout=10, what=f"namespace {ns} to be gone")
    refusals = [e for e in cluster.stack.apiserver.controllers.errors if f"'{ns}'" in e]
    assert refusals == []
    for resource, name in ((COMPONENT, "demo"), (COMPONENT_VERSION, "demo-1-0-0"), (RELEASE, "web")):
        assert not cluster.user(resource).exists(name, ns), f"{resource.kind} {ns}/{name} survived"


def test_dry_run_requests_get_the_same_answers_and_change_nothing(cluster: Cluster, ns: str) -> None:
    discovered_cv(cluster, ns)
    set_availability(cluster, ns, "demo-1-0-0", RED)
    discovered_cv(cluster, ns, "demo-2-0-0")
    set_availability(cluster, ns, "demo-2-0-0", GREEN)
    releases, versions = cluster.user(RELEASE), cluster.user(COMPONENT_VERSION)

    # refused alike
    refusal = refused(lambda: releases.create(release("web", ns, "demo-1-0-0"), dry_run=True))
    assert refusal.message == denied(
        VALIDATE, "Release", f"{ns}/web", "catalog.release-binding", RED_MESSAGE.replace("{ns}", ns)
    )
    sent = [r for h, r in cluster.stack.apiserver.webhook_calls if h == VALIDATE and r.get("namespace") == ns]
    assert (sent[-1]["name"], sent[-1]["dryRun"]) == ("web", True)

    # admitted alike, and nothing stored
    admitted = releases.create(release("web", ns, "demo-2-0-0"), dry_run=True)
    assert (admitted.warnings, admitted.object["metadata"]["name"]) == ([], "web")
    assert not releases.exists("web", ns)

    # a mutation is answered (the label) but nothing is stored
    preview = cluster.as_user(OBSERVER, COMPONENT_VERSION).create(component_version("demo-3-0-0", ns), dry_run=True)
    assert preview.object["metadata"]["labels"] == {COMPONENT_LABEL: "demo"}
    assert not versions.exists("demo-3-0-0", ns)

    # deletes: the refusal is the same, the admitted one deletes nothing
    releases.create(release("web", ns, "demo-2-0-0"))
    cluster.stack.wait_caught_up(RELEASE.group_kind, releases.get("web", ns))
    refusal = refused(lambda: versions.delete("demo-2-0-0", ns, dry_run=True))
    in_use = MSG_CV_IN_USE.format(count=1, releases=f"{ns}/web")
    rule = "catalog.componentversion-in-use"
    assert refusal.message == denied(VALIDATE, "ComponentVersion", f"{ns}/demo-2-0-0", rule, in_use)
    versions.delete("demo-1-0-0", ns, dry_run=True)
    assert_not_terminating(cluster, ns, "demo-1-0-0")
    assert_not_terminating(cluster, ns, "demo-2-0-0")


REGISTRY = Resource(SOLAR, "v1alpha1", "registries", "Registry")
TARGET = Resource(SOLAR, "v1alpha1", "targets", "Target")
REGISTRY_BINDING = Resource(SOLAR, "v1alpha1", "registrybindings", "RegistryBinding")
PROFILE = Resource(SOLAR, "v1alpha1", "profiles", "Profile")


def cached(cluster: Cluster, resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    created = cluster.user(resource).create(obj).object
    return cluster.stack.wait_caught_up(resource.group_kind, created)


def registry_with_users(cluster: Cluster, ns: str) -> None:
    """A Registry a Target pushes to and a RegistryBinding links, as SolAr's fleet setup has it."""
    cached(
        cluster,
        REGISTRY,
        REGISTRY.manifest("zot", ns, spec={"hostname": "zot:5000", "solarSecretRef": {"name": "push"}}),
    )
    cached(cluster, TARGET, TARGET.manifest("edge-1", ns, spec={"renderRegistryRef": {"name": "zot"}}))
    binding = {"targetRef": {"name": "edge-1"}, "registryRef": {"name": "zot"}}
    cached(cluster, REGISTRY_BINDING, REGISTRY_BINDING.manifest("edge-zot", ns, spec=binding))


def release_with_profile(cluster: Cluster, ns: str) -> None:
    discovered_cv(cluster, ns)
    cached(cluster, RELEASE, release("web", ns, "demo-1-0-0"))
    spec = {"releaseRef": {"name": "web"}, "targetSelector": {"matchLabels": {"tier": "edge"}}}
    cached(cluster, PROFILE, PROFILE.manifest("fleet", ns, spec=spec))


def test_a_registry_still_used_by_a_target_and_a_binding_is_refused_not_left_terminating(
    cluster: Cluster, ns: str
) -> None:
    registry_with_users(cluster, ns)
    registries = cluster.user(REGISTRY)

    refusal = refused(lambda: registries.delete("zot", ns))

    message = MSG_REGISTRY_IN_USE.format(
        referrers=f"Targets (1): {ns}/edge-1; live RegistryBindings (1): {ns}/edge-zot"
    )
    assert refusal == Refusal(403, denied(VALIDATE, "Registry", f"{ns}/zot", "catalog.registry-in-use", message))
    assert "deletionTimestamp" not in registries.get("zot", ns)["metadata"]

    # the way out: once the referrers are gone the Registry goes at once
    cluster.user(TARGET).delete("edge-1", ns)
    cluster.user(REGISTRY_BINDING).delete("edge-zot", ns)
    cluster.stack.wait_uncached(TARGET.group_kind, "edge-1", ns)
    cluster.stack.wait_uncached(REGISTRY_BINDING.group_kind, "edge-zot", ns)
    registries.delete("zot", ns)
    assert not registries.exists("zot", ns)


def test_a_release_deployed_by_a_profile_is_refused_and_a_protected_one_too(cluster: Cluster, ns: str) -> None:
    release_with_profile(cluster, ns)
    releases = cluster.user(RELEASE)

    refusal = refused(lambda: releases.delete("web", ns))

    message = MSG_RELEASE_IN_USE.format(count=1, profiles=f"{ns}/fleet")
    assert refusal == Refusal(403, denied(VALIDATE, "Release", f"{ns}/web", "catalog.release-in-use", message))
    cluster.user(PROFILE).delete("fleet", ns)
    cluster.stack.wait_uncached(PROFILE.group_kind, "fleet", ns)
    # SolAr's controllers have not removed release-ref yet: the delete would only hang
    releases.patch("web", {"metadata": {"finalizers": [PROTECTIONS[kinds.RELEASE].finalizer]}}, ns)

    refusal = refused(lambda: releases.delete("web", ns))

    expected = denied(VALIDATE, "Release", f"{ns}/web", "catalog.release-in-use", protected_message(kinds.RELEASE))
    assert (refusal.status, refusal.message) == (403, expected)
    assert "deletionTimestamp" not in releases.get("web", ns)["metadata"]


def test_deleting_a_namespace_is_not_blocked_by_registries_and_releases_in_use(cluster: Cluster, ns: str) -> None:
    registry_with_users(cluster, ns)
    release_with_profile(cluster, ns)
    core = cluster.stack.core(USER, USER_GROUPS)
    assert refused(lambda: cluster.user(REGISTRY).delete("zot", ns)).status == 403
    assert refused(lambda: cluster.user(RELEASE).delete("web", ns)).status == 403

    core.delete_namespace(ns)

    def namespace_gone() -> bool:
        try:
            core.read_namespace(ns)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_until(namespace_gone, timeout=10, what=f"namespace {ns} to be gone")
    refusals = [e for e in cluster.stack.apiserver.controllers.errors if f"'{ns}'" in e]
    assert refusals == []
    for resource, name in ((REGISTRY, "zot"), (TARGET, "edge-1"), (RELEASE, "web"), (PROFILE, "fleet")):
        assert not cluster.user(resource).exists(name, ns), f"{resource.kind} {ns}/{name} survived"


def test_what_solar_controllers_write_into_the_served_render_kinds_is_stored_whole(cluster: Cluster, ns: str) -> None:
    """Standalone mode: SolAr's controllers create Profiles and render bookkeeping in their Go types' shape."""
    from tests.policies.test_catalog_crds import UPSTREAM_SHAPES, without_nulls

    plurals = {"Profile": "profiles", "RenderTask": "rendertasks", "RenderArtifact": "renderartifacts"}
    plurals["RenderBinding"] = "renderbindings"
    for n, shape in enumerate(UPSTREAM_SHAPES):
        resource = Resource(SOLAR, "v1alpha1", plurals[shape["kind"]], shape["kind"])
        obj = {**shape, "metadata": {"name": f"x{n}", "namespace": ns}}
        stored = cluster.user(resource).create(obj).object
        assert without_nulls(stored["spec"]) == without_nulls(shape["spec"]), shape["kind"]  # nothing but nulls lost
        if "status" in shape:
            written = cluster.warden(resource).patch_status(f"x{n}", {"status": shape["status"]}, ns).object
            assert without_nulls(written["status"]) == without_nulls(shape["status"]), shape["kind"]
