"""Catalog family (solar.opendefense.cloud): creation follows the registry, deletion follows intent.

Every rule about Component, ComponentVersion, Release, Target, Registry, RegistryBinding,
ReleaseBinding and ReferenceGrant is registered in ``RULES`` here (DESIGN.md section 5,
"Catalog"). Profile, RenderTask, RenderArtifact and RenderBinding belong to the family (served in
standalone mode, so SolAr's controllers work against our CRDs) but have no rules yet; Profiles are
read, as referrers of Releases. The Release rules live in this module; the others by theme beside it:
``catalog_deletion`` (deletion follows intent), ``catalog_registry`` (credentials and bindings),
``catalog_refs`` (reference keys, indexes, ReferenceGrants) and ``catalog_labels`` (the mutation).
"""

from __future__ import annotations

from policies import catalog_deletion, catalog_labels, catalog_refs, catalog_registry
from policies.catalog_refs import (
    INDEXES,
    RELEASES_BY_COMPONENT_VERSION,
    fit_warning,
    new_reference_problem,
    release_component_version_key,
    split_key,
)
from policies.decision import Decision, allow, deny, invalid
from policies.kinds import (
    CATALOG_KINDS,
    COMPONENT,
    COMPONENT_VERSION,
    REGISTRY,
    REGISTRY_BINDING,
    RELEASE,
    RELEASE_BINDING,
    TARGET,
)
from policies.model import AdmissionRequest, Operation
from policies.objects import condition, dig, is_terminating
from policies.rules import Context, Family, Rule

AVAILABLE = "Available"

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
    if problem := new_reference_problem(req, "spec", "componentVersionRef", required=True):
        return invalid(problem)
    release = req.object or {}
    key = release_component_version_key(release)
    if req.operation is Operation.UPDATE and key == release_component_version_key(req.old_object or {}):
        return allow()
    ns, name = split_key(key)
    cv = ctx.view.get(COMPONENT_VERSION, name, ns)
    if cv is None:
        return allow(fit_warning(WARN_CV_NOT_FOUND, cv=key))
    if is_terminating(cv):
        return deny(MSG_CV_TERMINATING.format(cv=key))
    cond = condition(cv, AVAILABLE)
    if cond is None:
        return allow(fit_warning(WARN_CV_UNCHECKED, cv=key))
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
        return allow(fit_warning(WARN_CV_UNKNOWN, cv=key, reason=cond.get("reason") or "no reason"))
    return allow()


# --- Release: spec.uniqueName is immutable once set ----------------------------------------------

MSG_UNIQUE_NAME_IMMUTABLE = (
    'spec.uniqueName is immutable once set (was "{old}", now "{new}"); '
    "create a new Release to deploy under another uniqueName"
)


def release_unique_name(req: AdmissionRequest, ctx: Context) -> Decision:
    """``spec.uniqueName`` keys the deployment on every Target: changing it would orphan the old one.

    Setting it the first time is allowed (unlike the aggregated SolAr API, which refuses any change).
    """
    old = dig(req.old_object, "spec", "uniqueName", default="")
    new = dig(req.object, "spec", "uniqueName", default="")
    if old and new != old:
        return invalid(MSG_UNIQUE_NAME_IMMUTABLE.format(old=old, new=new))
    return allow()


# --- the table -------------------------------------------------------------------------------------

WRITES = frozenset({Operation.CREATE, Operation.UPDATE})
CREATE = frozenset({Operation.CREATE})
UPDATE = frozenset({Operation.UPDATE})
DELETE = frozenset({Operation.DELETE})

RULES = (
    Rule("catalog.release-binding", RELEASE, WRITES, release_binding),
    Rule("catalog.release-unique-name", RELEASE, UPDATE, release_unique_name, needs_view=False),
    Rule("catalog.release-reference-grant", RELEASE, WRITES, catalog_refs.reference_grant),
    Rule("catalog.releasebinding-reference-grant", RELEASE_BINDING, WRITES, catalog_refs.reference_grant),
    Rule(
        "catalog.componentversion-observer-delete",
        COMPONENT_VERSION,
        DELETE,
        catalog_deletion.componentversion_observer_delete,
        needs_view=False,
    ),
    Rule("catalog.componentversion-in-use", COMPONENT_VERSION, DELETE, catalog_deletion.componentversion_in_use),
    Rule("catalog.component-in-use", COMPONENT, DELETE, catalog_deletion.component_in_use),
    Rule("catalog.release-in-use", RELEASE, DELETE, catalog_deletion.release_in_use),
    Rule("catalog.registry-in-use", REGISTRY, DELETE, catalog_deletion.registry_in_use),
    Rule("catalog.registry-fields", REGISTRY, WRITES, catalog_registry.registry_fields, needs_view=False),
    Rule("catalog.registry-hostname-ambiguous", REGISTRY, WRITES, catalog_registry.registry_hostname_ambiguous),
    Rule("catalog.target-render-registry", TARGET, WRITES, catalog_registry.target_render_registry),
    Rule("catalog.target-reference-grant", TARGET, WRITES, catalog_refs.reference_grant),
    Rule("catalog.registrybinding-ambiguous", REGISTRY_BINDING, WRITES, catalog_registry.registrybinding_ambiguous),
    Rule("catalog.registrybinding-reference-grant", REGISTRY_BINDING, WRITES, catalog_refs.reference_grant),
    Rule(
        "catalog.componentversion-component-label",
        COMPONENT_VERSION,
        CREATE,
        catalog_labels.componentversion_component_label,
        mutating=True,
        needs_view=False,
    ),
)
"""Every catalog rule, in the order the shell runs them: validating ones until the first denial (warnings
add up), mutating ones each on the previous one's output."""

FAMILY = Family("catalog", CATALOG_KINDS, RULES, INDEXES)

__all__ = [
    "AVAILABLE",
    "FAMILY",
    "INDEXES",
    "MSG_CV_TERMINATING",
    "MSG_CV_UNAVAILABLE",
    "MSG_UNIQUE_NAME_IMMUTABLE",
    "RELEASES_BY_COMPONENT_VERSION",
    "RULES",
    "WARN_CV_NOT_FOUND",
    "WARN_CV_UNCHECKED",
    "WARN_CV_UNKNOWN",
    "release_binding",
    "release_component_version_key",
    "release_unique_name",
]
