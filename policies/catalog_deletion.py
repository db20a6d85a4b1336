"""Deletion follows intent: catalog entries in use are not deleted, and observers never delete.

A DELETE that the protection finalizers would only hold (the ComponentVersion of a running
Release, the Registry a Target pushes to) is refused up front, so nothing is left hanging in
Terminating: the answer names the referrers and the way out instead. SolAr's controllers put a
protection finalizer on each object something references (``PROTECTION_FINALIZERS``); an object
carrying one is in use even when our cache shows no referrer (the referrer may be in a namespace
or a state we do not index), so its DELETE is refused too, naming the finalizer. The garbage
collector and the namespace controller are never blocked, whatever they delete (DESIGN.md
section 4): blocking them strands whole namespaces and owner chains in Terminating.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from policies.catalog_refs import (
    COMPONENT_VERSIONS_BY_COMPONENT,
    PROFILES_BY_RELEASE,
    REGISTRY_BINDINGS_BY_REGISTRY,
    RELEASES_BY_COMPONENT_VERSION,
    TARGETS_BY_REGISTRY,
    live,
    name_some,
    request_key,
    split_key,
)
from policies.decision import Decision, allow, deny
from policies.identity import is_cluster_cleanup
from policies.kinds import COMPONENT, COMPONENT_VERSION, PROFILE, REGISTRY, REGISTRY_BINDING, RELEASE, TARGET
from policies.model import AdmissionRequest, GroupKind, Obj
from policies.objects import finalizers_of
from policies.rules import Context, RuleFn


@dataclass(frozen=True, slots=True)
class Protection:
    """A SolAr protection finalizer: who puts it on the object, and who uses the object meanwhile."""

    finalizer: str
    held_by: str
    """The controllers that add and remove it (the message says whom to wait for)."""
    users: str
    """What references the object (the message says when removing it by hand is safe)."""
    noun: str


PROTECTIONS: Mapping[GroupKind, Protection] = {
    COMPONENT_VERSION: Protection(
        "solar.opendefense.cloud/componentversion-ref", "the Release controller removes", "Release", "version"
    ),
    COMPONENT: Protection(
        "solar.opendefense.cloud/component-ref",
        "the ComponentVersion controller removes",
        "ComponentVersion",
        "Component",
    ),
    RELEASE: Protection(
        "solar.opendefense.cloud/release-ref",
        "the Profile and ReleaseBinding controllers remove",
        "Profile or ReleaseBinding",
        "Release",
    ),
    REGISTRY: Protection(
        "solar.opendefense.cloud/registry-ref",
        "the Target and RegistryBinding controllers remove",
        "Target or RegistryBinding",
        "Registry",
    ),
}
"""The protection finalizers of reference/solar-catalog-api.md section 2, by the kind they sit on.
Self-finalizers (``release-finalizer``, ``profile-finalizer`` ...) are not here: their controller
removes them on deletion, so they never hold an object that is merely in use."""

PROTECTION_FINALIZERS = frozenset(p.finalizer for p in PROTECTIONS.values())

CV_PROTECTION_FINALIZER = PROTECTIONS[COMPONENT_VERSION].finalizer
"""Put on a ComponentVersion by the SolAr Release controller while a Release references it."""

MSG_PROTECTED = (
    "it carries the protection finalizer {finalizer} and would hang in Terminating; "
    "wait until {held_by} it, or remove it yourself if no {users} uses this {noun}"
)

MSG_OBSERVER_DELETE = (
    "{user} is an observer: it may create and update ComponentVersions but never delete them "
    "(deletion follows intent); a missing artifact turns the entry Available=False instead, "
    "and the retention janitor or an operator removes it"
)
MSG_CV_IN_USE = (
    "referenced by live Releases ({count}): {releases}; "
    "delete those Releases or point them at another ComponentVersion first"
)
MSG_COMPONENT_IN_USE = "it has live ComponentVersions ({count}): {versions}; delete those ComponentVersions first"
MSG_REGISTRY_IN_USE = (
    "referenced by live {referrers}; point the Targets at another Registry and delete the RegistryBindings first"
)
MSG_RELEASE_IN_USE = (
    "referenced by live Profiles ({count}): {profiles}; delete those Profiles or point them at another Release first"
)


def protected_message(kind: GroupKind) -> str:
    """The denial for an object of ``kind`` that still carries its protection finalizer."""
    p = PROTECTIONS[kind]
    return MSG_PROTECTED.format(finalizer=p.finalizer, held_by=p.held_by, users=p.users, noun=p.noun)


MSG_CV_PROTECTED = protected_message(COMPONENT_VERSION)


def never_blocks_cluster_cleanup(fn: RuleFn) -> RuleFn:
    """Wrap a DELETE rule so the garbage collector and namespace controller always pass it."""

    def rule(req: AdmissionRequest, ctx: Context) -> Decision:
        return allow() if is_cluster_cleanup(req.user) else fn(req, ctx)

    return functools.wraps(fn)(rule)


@never_blocks_cluster_cleanup
def componentversion_observer_delete(req: AdmissionRequest, ctx: Context) -> Decision:
    """Observers (registry discovery) reflect the registry into the catalog; they never delete."""
    if ctx.config.identities.is_observer(req.user):
        return deny(MSG_OBSERVER_DELETE.format(user=req.user.username))
    return allow()


@never_blocks_cluster_cleanup
def componentversion_in_use(req: AdmissionRequest, ctx: Context) -> Decision:
    """A ComponentVersion used by a live Release, or still protected by its finalizer, stays.

    The Releases are found through the reverse index, so the answer is the same whether or not
    the Release controller has added its finalizer yet (it may lag behind the binding).
    """
    releases = _referrers(ctx, RELEASE, RELEASES_BY_COMPONENT_VERSION, request_key(req))
    if releases:
        return deny(
            MSG_CV_IN_USE.format(count=len(releases), releases=name_some(releases, ctx.config.maxListedReferrers))
        )
    return _unless_protected(req, ctx)


def _unless_protected(req: AdmissionRequest, ctx: Context) -> Decision:
    """Deny when the object being deleted still carries its kind's protection finalizer.

    The object is the request's ``oldObject`` (the apiserver sends it on DELETE), else the cache's.
    """
    ns, name = split_key(request_key(req))
    obj = req.old_object or ctx.view.get(req.kind, name, ns)
    if PROTECTIONS[req.kind].finalizer in finalizers_of(obj):
        return deny(protected_message(req.kind))
    return allow()


def _referrers(ctx: Context, kind: GroupKind, index: str, key: str) -> list[Obj]:
    return live(ctx.view.indexed(kind, index, key))


@never_blocks_cluster_cleanup
def component_in_use(req: AdmissionRequest, ctx: Context) -> Decision:
    """A Component goes only after its ComponentVersions: deleting it by hand would orphan them."""
    versions = _referrers(ctx, COMPONENT_VERSION, COMPONENT_VERSIONS_BY_COMPONENT, request_key(req))
    if versions:
        return deny(
            MSG_COMPONENT_IN_USE.format(
                count=len(versions), versions=name_some(versions, ctx.config.maxListedReferrers)
            )
        )
    return _unless_protected(req, ctx)


REGISTRY_REFERRERS = (
    ("Targets", TARGET, TARGETS_BY_REGISTRY),
    ("RegistryBindings", REGISTRY_BINDING, REGISTRY_BINDINGS_BY_REGISTRY),
)
"""What uses a Registry, as SolAr's ``removeRegistryRefFinalizer`` counts it: Targets pushing to it
(``spec.renderRegistryRef``, any namespace) and RegistryBindings of its namespace (``spec.registryRef``)."""


@never_blocks_cluster_cleanup
def registry_in_use(req: AdmissionRequest, ctx: Context) -> Decision:
    """A Registry that live Targets push to or RegistryBindings link stays.

    Deleting it would leave the Targets unable to render (``RegistryResolved=False``) or, with
    SolAr's controllers running, hang in Terminating behind ``registry-ref`` until they are gone.
    """
    key = request_key(req)
    limit = ctx.config.maxListedReferrers
    found = [(label, _referrers(ctx, kind, index, key)) for label, kind, index in REGISTRY_REFERRERS]
    parts = [f"{label} ({len(objs)}): {name_some(objs, limit)}" for label, objs in found if objs]
    if parts:
        return deny(MSG_REGISTRY_IN_USE.format(referrers="; live ".join(parts)))
    return _unless_protected(req, ctx)


@never_blocks_cluster_cleanup
def release_in_use(req: AdmissionRequest, ctx: Context) -> Decision:
    """A Release that live Profiles deploy stays: deleting it would undeploy it from every matched Target.

    With SolAr's controllers running the delete would also hang behind ``release-ref`` (which the
    Profile and ReleaseBinding controllers hold), so that finalizer is refused as well.
    """
    profiles = _referrers(ctx, PROFILE, PROFILES_BY_RELEASE, request_key(req))
    if profiles:
        return deny(
            MSG_RELEASE_IN_USE.format(count=len(profiles), profiles=name_some(profiles, ctx.config.maxListedReferrers))
        )
    return _unless_protected(req, ctx)
