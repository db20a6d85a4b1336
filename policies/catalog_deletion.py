"""Deletion follows intent: catalog entries in use are not deleted, and observers never delete.

A DELETE that the protection finalizers would only hold (the ComponentVersion of a running
Release) is refused up front, so nothing is left hanging in Terminating: the answer names the
referrers and the way out instead. The garbage collector and the namespace controller are
never blocked, whatever they delete (DESIGN.md section 4): blocking them strands whole
namespaces and owner chains in Terminating.
"""

from __future__ import annotations

import functools

from policies.catalog_refs import (
    COMPONENT_VERSIONS_BY_COMPONENT,
    RELEASES_BY_COMPONENT_VERSION,
    live,
    name_some,
    request_key,
    split_key,
)
from policies.decision import Decision, allow, deny
from policies.identity import is_cluster_cleanup
from policies.kinds import COMPONENT_VERSION, RELEASE
from policies.model import AdmissionRequest
from policies.objects import finalizers_of
from policies.rules import Context, RuleFn

CV_PROTECTION_FINALIZER = "solar.opendefense.cloud/componentversion-ref"
"""Put on a ComponentVersion by the SolAr Release controller while a Release references it."""

MSG_OBSERVER_DELETE = (
    "{user} is an observer: it may create and update ComponentVersions but never delete them "
    "(deletion follows intent); a missing artifact turns the entry Available=False instead, "
    "and the retention janitor or an operator removes it"
)
MSG_CV_IN_USE = (
    "referenced by live Releases ({count}): {releases}; "
    "delete those Releases or point them at another ComponentVersion first"
)
MSG_CV_PROTECTED = (
    "it carries the protection finalizer " + CV_PROTECTION_FINALIZER + " and would hang in Terminating; "
    "wait until the Release controller removes it, or remove it yourself if no Release uses this version"
)
MSG_COMPONENT_IN_USE = "it has live ComponentVersions ({count}): {versions}; delete those ComponentVersions first"


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
    releases = live(ctx.view.indexed(RELEASE, RELEASES_BY_COMPONENT_VERSION, request_key(req)))
    if releases:
        return deny(
            MSG_CV_IN_USE.format(count=len(releases), releases=name_some(releases, ctx.config.maxListedReferrers))
        )
    ns, name = split_key(request_key(req))
    cv = req.old_object or ctx.view.get(COMPONENT_VERSION, name, ns)
    if CV_PROTECTION_FINALIZER in finalizers_of(cv):
        return deny(MSG_CV_PROTECTED)
    return allow()


@never_blocks_cluster_cleanup
def component_in_use(req: AdmissionRequest, ctx: Context) -> Decision:
    """A Component goes only after its ComponentVersions: deleting it by hand would orphan them."""
    versions = live(ctx.view.indexed(COMPONENT_VERSION, COMPONENT_VERSIONS_BY_COMPONENT, request_key(req)))
    if versions:
        return deny(
            MSG_COMPONENT_IN_USE.format(
                count=len(versions), versions=name_some(versions, ctx.config.maxListedReferrers)
            )
        )
    return allow()
