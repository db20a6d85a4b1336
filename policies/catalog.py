"""Catalog family (solar.opendefense.cloud): creation follows the registry, deletion follows intent.

Every rule about Component, ComponentVersion, Release, Target, Registry, RegistryBinding,
ReleaseBinding and ReferenceGrant lives here (DESIGN.md section 5, "Catalog").
"""

from __future__ import annotations

from collections.abc import Iterable

from policies.decision import Decision, allow, deny
from policies.kinds import CATALOG_KINDS, COMPONENT_VERSION, RELEASE
from policies.model import AdmissionRequest, Obj, Operation
from policies.objects import condition, dig, is_terminating, namespace_of
from policies.rules import Context, Family, Rule

AVAILABLE = "Available"

# --- indexes -------------------------------------------------------------------------------------

RELEASES_BY_COMPONENT_VERSION = "componentVersion"


def release_component_version_key(release: Obj) -> str:
    """``namespace/name`` of the ComponentVersion a Release references (namespace defaults to its own)."""
    ref = dig(release, "spec", "componentVersionRef", default={})
    ns = ref.get("namespace") or namespace_of(release)
    return f"{ns}/{ref.get('name', '')}"


def _releases_by_cv(release: Obj) -> Iterable[str]:
    if dig(release, "spec", "componentVersionRef", "name"):
        yield release_component_version_key(release)


INDEXES = {RELEASE: {RELEASES_BY_COMPONENT_VERSION: _releases_by_cv}}

# --- Release: bind only to an available ComponentVersion ------------------------------------------

MSG_CV_UNAVAILABLE = (
    "ComponentVersion {cv} is Available=False ({reason}) since {since}: {detail}; "
    "bind the Release to an available version"
)
MSG_CV_TERMINATING = "ComponentVersion {cv} is being deleted; bind the Release to another version"
WARN_CV_NOT_FOUND = "ComponentVersion {cv} not found yet; the Release waits until it exists"
WARN_CV_UNKNOWN = "ComponentVersion {cv} availability is Unknown ({reason}); the binding may not render"
WARN_CV_UNCHECKED = "ComponentVersion {cv} has not been checked for availability yet"


def release_binding(req: AdmissionRequest, ctx: Context) -> Decision:
    """A new or changed ``spec.componentVersionRef`` must point at a usable ComponentVersion.

    An unchanged reference is never blocked, so a running Release keeps reconciling while its
    artifact is red. Unknown or not-yet-discovered entries pass with a warning because GitOps
    may apply the Release before discovery creates the entry.
    """
    release = req.object or {}
    key = release_component_version_key(release)
    if req.operation is Operation.UPDATE and key == release_component_version_key(req.old_object or {}):
        return allow()
    ns, _, name = key.partition("/")
    cv = ctx.view.get(COMPONENT_VERSION, name, ns)
    if cv is None:
        return allow(WARN_CV_NOT_FOUND.format(cv=key))
    if is_terminating(cv):
        return deny(MSG_CV_TERMINATING.format(cv=key))
    cond = condition(cv, AVAILABLE)
    if cond is None:
        return allow(WARN_CV_UNCHECKED.format(cv=key))
    status = cond.get("status")
    if status == "False":
        return deny(
            MSG_CV_UNAVAILABLE.format(
                cv=key,
                reason=cond.get("reason") or "no reason",
                since=cond.get("lastTransitionTime") or "an unknown time",
                detail=cond.get("message") or "the backing artifact is missing",
            )
        )
    if status != "True":
        return allow(WARN_CV_UNKNOWN.format(cv=key, reason=cond.get("reason") or "no reason"))
    return allow()


RULES = (Rule("catalog.release-binding", RELEASE, frozenset({Operation.CREATE, Operation.UPDATE}), release_binding),)

FAMILY = Family("catalog", CATALOG_KINDS, RULES, INDEXES)
