"""Packages family (porch.kpt.dev PackageRevision, config.porch.kpt.dev Repository).

Every PackageRevision rule of DESIGN.md section 5 ("Packages") lives here: the lifecycle
transition table, immutable and frozen fields, the latest-revision label, deletion gating and
the two mutations (defaults on CREATE, the publish record on the way into Published).

Upstream porch enforces deletion of a Published revision only with a finalizer, so a refused
delete leaves the object hanging in Terminating with no explanation (kptdev/porch #1113). We
answer at admission instead, with the reason and the way out; the finalizer stays as defence
in depth. Facts about the API are in ``reference/porch-and-deckhouse-apis.md`` part A.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from enum import StrEnum
from typing import Any

from policies.decision import Decision, allow, deny, invalid, mutate
from policies.identity import is_cluster_cleanup
from policies.kinds import PACKAGE_REVISION, PACKAGES_KINDS, PORCH_CONFIG, REPOSITORY
from policies.model import AdmissionRequest, Obj, Operation, UserInfo
from policies.objects import (
    annotations_of,
    dig,
    finalizers_of,
    format_time,
    is_terminating,
    items_at,
    json_type,
    labels_of,
    mapping_at,
    name_of,
    namespace_of,
    parse_time,
)
from policies.patch import Edit
from policies.rules import Context, Family, Rule

# --- vocabulary ----------------------------------------------------------------------------------


class Lifecycle(StrEnum):
    """``spec.lifecycle`` values (the CRD enum); an empty lifecycle counts as Draft."""

    DRAFT = "Draft"
    PROPOSED = "Proposed"
    PUBLISHED = "Published"
    DELETION_PROPOSED = "DeletionProposed"


TRANSITIONS: Mapping[Lifecycle, tuple[Lifecycle, ...]] = {
    Lifecycle.DRAFT: (Lifecycle.PROPOSED,),
    Lifecycle.PROPOSED: (Lifecycle.PUBLISHED, Lifecycle.DRAFT),
    Lifecycle.PUBLISHED: (Lifecycle.DELETION_PROPOSED,),
    Lifecycle.DELETION_PROPOSED: (Lifecycle.PUBLISHED,),
}
"""Where each lifecycle may move on UPDATE (seed 003); staying put is always allowed."""

TRANSITION_WAY_OUT: Mapping[Lifecycle, str] = {
    Lifecycle.DRAFT: "propose it first (spec.lifecycle: Proposed)",
    Lifecycle.PROPOSED: "a Proposed revision is not published: delete it or move it back to Draft",
    Lifecycle.PUBLISHED: "published content is final: create a new Draft revision with spec.source.copyFrom",
    Lifecycle.DELETION_PROPOSED: "published content is final: create a new Draft revision with spec.source.copyFrom",
}
"""The way out printed with a refused transition, by the lifecycle it starts from."""

CREATE_LIFECYCLES: Mapping[str, tuple[Lifecycle, ...]] = {
    "v1alpha1": (Lifecycle.DRAFT,),
    "v1alpha2": (Lifecycle.DRAFT, Lifecycle.PROPOSED),
}
"""What users may create, by request version; package controllers (discovered revisions) may
create any lifecycle. Porch's v1alpha1 strategy creates only Drafts (reference A6, ``value can be
only created as Draft``); its v1alpha2 webhook allows Draft or Proposed (A8)."""

APPROVAL = "approval"
"""The v1alpha1 subresource through which Porch publishes (``packagerevisions/approval``, reference A1, A6)."""

PUBLISHED_LIFECYCLES = frozenset({Lifecycle.PUBLISHED, Lifecycle.DELETION_PROPOSED})
"""Porch's ``LifecycleIsPublished``: the spec is frozen except the lifecycle."""

FINALIZER = "porch.kpt.dev/packagerevisions"

LATEST_LABEL_V1ALPHA1 = "kpt.dev/latest-revision"
LATEST_LABEL_V1ALPHA2 = "porch.kpt.dev/latest-revision"
LATEST_LABELS: Mapping[str, str] = {"v1alpha1": LATEST_LABEL_V1ALPHA1, "v1alpha2": LATEST_LABEL_V1ALPHA2}
"""The latest-revision label key by the version a request came in (reference A4)."""

PUBLISHED_BY = "catalog-warden.io/published-by"
PUBLISHED_AT = "catalog-warden.io/published-at"
PUBLISH_RECORD = (PUBLISHED_BY, PUBLISHED_AT)
"""Written by the mutating path on the way into Published; the sidecar moves them into status."""

REPOSITORY_API_VERSION = f"{PORCH_CONFIG}/v1alpha1"


def create_lifecycles(version: str) -> tuple[Lifecycle, ...]:
    """The lifecycles a user may create in ``version``; unknown versions get the storage version's."""
    return CREATE_LIFECYCLES.get(version, CREATE_LIFECYCLES["v1alpha2"])


def porch_serves_v1alpha1(req: AdmissionRequest, ctx: Context) -> bool:
    """A v1alpha1 request answered by Porch's aggregated apiserver (the family runs alongside it)."""
    return req.version == "v1alpha1" and not ctx.config.families.standalone("packages")


def latest_label_key(version: str) -> str:
    """The latest-revision label for the request's version; unknown versions get the storage key."""
    return LATEST_LABELS.get(version, LATEST_LABEL_V1ALPHA2)


def raw_lifecycle(obj: Obj | None) -> str:
    """``spec.lifecycle`` as written, with empty read as Draft (what the mutating path defaults)."""
    return str(dig(obj, "spec", "lifecycle", default="") or Lifecycle.DRAFT)


def lifecycle_of(obj: Obj | None) -> Lifecycle | None:
    """The object's lifecycle, or None for a value outside the enum."""
    try:
        return Lifecycle(raw_lifecycle(obj))
    except ValueError:
        return None


def _names(values: Iterable[str]) -> str:
    return ", ".join(values)


def _privileged(user: UserInfo, ctx: Context) -> bool:
    """The warden and package controllers own the latest-revision label and discovered revisions."""
    return ctx.config.identities.is_warden(user) or ctx.config.identities.is_package_controller(user)


# --- indexes -------------------------------------------------------------------------------------

REVISIONS_BY_UPSTREAM = "upstream"

UPSTREAM_PATHS: tuple[tuple[str, ...], ...] = (
    ("spec", "source", "copyFrom", "name"),
    ("spec", "source", "cloneFrom", "upstreamRef", "name"),
    ("spec", "source", "clone", "cloneFrom", "upstreamRef", "name"),
)
"""Where a v1alpha2 revision names another revision of its namespace as its upstream."""

UPSTREAM_TASK_PATHS: tuple[tuple[str, ...], ...] = (
    ("clone", "upstreamRef", "upstreamRef", "name"),
    ("edit", "sourceRef", "name"),
)
"""The same in v1alpha1 ``spec.tasks[]`` (clone from a registered package, edit = copy). A clone's
``upstreamRef`` is porch's UpstreamPackage ``{type, git, upstreamRef}`` (it becomes v1alpha2
``spec.source.cloneFrom``), so the revision it names is one level further down."""


def upstream_names(revision: Obj) -> Iterable[str]:
    """Names of the revisions ``revision`` was cloned or copied from."""
    for path in UPSTREAM_PATHS:
        name = dig(revision, *path)
        if name:
            yield str(name)
    for task in items_at(revision, "spec", "tasks"):
        for path in UPSTREAM_TASK_PATHS:
            name = dig(task, *path)
            if name:
                yield str(name)


def _revisions_by_upstream(revision: Obj) -> Iterable[str]:
    ns = namespace_of(revision)
    return {f"{ns}/{name}" for name in upstream_names(revision)}


INDEXES = {PACKAGE_REVISION: {REVISIONS_BY_UPSTREAM: _revisions_by_upstream}}

# --- every operation: the shape of the object -----------------------------------------------------

Checker = Callable[[Any], bool]


def _is_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_object(value: Any) -> bool:
    return isinstance(value, Mapping)


def _is_list(value: Any) -> bool:
    return isinstance(value, list)


EXPECTED: Mapping[Checker, str] = {
    _is_object: "an object",
    _is_list: "an array",
    _is_str: "a string",
    _is_number: "a number",
}
"""What each shape check expects, as messages print it."""

SHAPES: tuple[tuple[tuple[str, ...], Checker, Checker | None], ...] = (
    (("metadata",), _is_object, None),
    (("metadata", "labels"), _is_object, _is_str),
    (("metadata", "annotations"), _is_object, _is_str),
    (("metadata", "finalizers"), _is_list, _is_str),
    (("metadata", "ownerReferences"), _is_list, _is_object),
    (("spec",), _is_object, None),
    (("spec", "lifecycle"), _is_str, None),
    (("spec", "repository"), _is_str, None),
    (("spec", "packageName"), _is_str, None),
    (("spec", "workspaceName"), _is_str, None),
    (("spec", "source"), _is_object, None),
    (("spec", "tasks"), _is_list, _is_object),
    (("spec", "revision"), _is_number, None),
)
"""(path, check of the value, check of each member or item): the fields the rules read. A null
value is an absent field (the apiserver prunes nulls the schema does not allow)."""

MSG_SHAPE = "{field} must be {expected}, not {found}"
MSG_SHAPE_STORED = "the stored object: {problem}"


def shape_problem(obj: Obj | None) -> str | None:
    """The first field the rules read that has the wrong JSON type, as a message; None if none."""
    for path, check, member in SHAPES:
        parent = dig(obj, *path[:-1]) if len(path) > 1 else obj
        value = parent.get(path[-1]) if isinstance(parent, Mapping) else None
        if value is None:
            continue
        field = ".".join(path)
        if not check(value):
            return MSG_SHAPE.format(field=field, expected=EXPECTED[check], found=json_type(value))
        if member is None:
            continue
        items = value.items() if isinstance(value, Mapping) else ((f"[{i}]", v) for i, v in enumerate(value))
        for key, item in items:
            if not member(item):
                at = f"{field}{key}" if key.startswith("[") else f"{field}.{key}"
                return MSG_SHAPE.format(field=at, expected=EXPECTED[member], found=json_type(item))
    return None


def revision_shape(req: AdmissionRequest, ctx: Context) -> Decision:
    """A field of the wrong type is a 422 naming it, before any other rule reads it.

    Registered first on both paths: the mutating webhook runs before the apiserver checks the
    CRD schema, so ``spec: "x"`` reaches it, and the rules after this one may rely on the shapes
    in :data:`SHAPES`.
    """
    problem = shape_problem(req.object)
    if problem is None:
        stored = shape_problem(req.old_object)
        problem = MSG_SHAPE_STORED.format(problem=stored) if stored else None
    return invalid(problem) if problem else allow()


# --- CREATE and UPDATE: the lifecycle ------------------------------------------------------------

MSG_LIFECYCLE_UNKNOWN = "spec.lifecycle {value!r} is not a lifecycle; use one of {allowed}"
MSG_CREATE_LIFECYCLE = (
    "spec.lifecycle {value} is not allowed on creation; create the revision as {allowed} "
    "and propose and publish it afterwards"
)
MSG_CREATE_LIFECYCLE_V1ALPHA1 = (
    "spec.lifecycle {value} is not allowed on creation through porch.kpt.dev/v1alpha1, which creates only Drafts; "
    "create the revision as Draft and propose it afterwards"
)
MSG_TRANSITION = "spec.lifecycle cannot change from {old} to {new} (allowed from {old}: {allowed}); {way_out}"


def revision_lifecycle(req: AdmissionRequest, ctx: Context) -> Decision:
    """CREATE only as :data:`CREATE_LIFECYCLES` allows; UPDATE (and v1alpha1 approval) along :data:`TRANSITIONS`.

    Discovered revisions (created by a package controller identity) may start in any lifecycle:
    whether a revision is discovered is decided by identity, never by an absent ``spec.source``.
    """
    new = lifecycle_of(req.object)
    if new is None:
        return invalid(MSG_LIFECYCLE_UNKNOWN.format(value=raw_lifecycle(req.object), allowed=_names(Lifecycle)))
    if req.operation is Operation.CREATE:
        allowed = create_lifecycles(req.version)
        if new in allowed or ctx.config.identities.is_package_controller(req.user):
            return allow()
        message = MSG_CREATE_LIFECYCLE_V1ALPHA1 if req.version == "v1alpha1" else MSG_CREATE_LIFECYCLE
        return deny(message.format(value=new, allowed=" or ".join(allowed)))
    old = lifecycle_of(req.old_object)
    if old is None or old == new or new in TRANSITIONS[old]:
        # An unknown stored value can only move to a valid one: the way out of a broken object.
        return allow()
    return deny(
        MSG_TRANSITION.format(old=old, new=new, allowed=_names(TRANSITIONS[old]), way_out=TRANSITION_WAY_OUT[old])
    )


# --- UPDATE: immutable fields and the frozen spec -------------------------------------------------

FieldGetter = Callable[[Obj | None], Any]


def _spec_field(name: str) -> FieldGetter:
    return lambda obj: dig(obj, "spec", name)


def _creation_task(obj: Obj | None) -> Any:
    tasks = items_at(obj, "spec", "tasks")
    return tasks[0] if tasks else None


IMMUTABLE_COMMON: tuple[tuple[str, FieldGetter], ...] = (
    ("spec.repository", _spec_field("repository")),
    ("spec.packageName", _spec_field("packageName")),
    ("spec.workspaceName", _spec_field("workspaceName")),
)
IMMUTABLE_FIELDS: Mapping[str, tuple[tuple[str, FieldGetter], ...]] = {
    "v1alpha1": (*IMMUTABLE_COMMON, ("spec.tasks[0]", _creation_task)),
    "v1alpha2": (*IMMUTABLE_COMMON, ("spec.source", _spec_field("source"))),
}
"""Immutable fields by request version. v1alpha1 appends edit tasks to drafts, so only its first
(creation) task is the equivalent of v1alpha2's ``spec.source``."""

MSG_IMMUTABLE = "immutable fields changed: {fields}; create a new PackageRevision instead"
MSG_FROZEN = (
    "the spec of a {old} revision is frozen except spec.lifecycle (changed: {fields}); "
    "create a new Draft revision with spec.source.copyFrom to change it"
)


def _changed_spec_keys(old: Obj | None, new: Obj | None) -> list[str]:
    old_spec, new_spec = mapping_at(old, "spec"), mapping_at(new, "spec")
    keys = (set(old_spec) | set(new_spec)) - {"lifecycle"}
    return [f"spec.{k}" for k in sorted(keys) if old_spec.get(k) != new_spec.get(k)]


def revision_immutable(req: AdmissionRequest, ctx: Context) -> Decision:
    """Identity fields never change; a published revision's spec changes only in its lifecycle.

    Applies to every identity: a published package is an immutable artifact (a git tag).
    """
    fields = IMMUTABLE_FIELDS.get(req.version, IMMUTABLE_FIELDS["v1alpha2"])
    changed = [label for label, get in fields if get(req.old_object) != get(req.object)]
    if changed:
        return invalid(MSG_IMMUTABLE.format(fields=_names(changed)))
    old = lifecycle_of(req.old_object)
    if old in PUBLISHED_LIFECYCLES:
        frozen = _changed_spec_keys(req.old_object, req.object)
        if frozen:
            return invalid(MSG_FROZEN.format(old=old, fields=_names(frozen)))
    return allow()


# --- CREATE and UPDATE: the revision number ------------------------------------------------------

REVISION_FIELDS: Mapping[str, tuple[str, ...]] = {"v1alpha1": ("spec", "revision")}
"""Where a main-resource request can write the revision number, by request version.

v1alpha1 holds it in ``spec.revision``, which the conversion stores as v1alpha2
``status.revision``: a plain v1alpha1 update would write status past the status subresource
(and its RBAC). On v1alpha2 the apiserver resets ``status`` on main-resource writes itself."""

MSG_REVISION_CREATE = (
    "spec.revision {value} is assigned by the package controllers on publish (stored as v1alpha2 status.revision); "
    "omit it or set it to 0"
)
MSG_REVISION_UPDATE = (
    "spec.revision is assigned by the package controllers on publish (stored as v1alpha2 status.revision) "
    "and cannot be changed ({old} to {new})"
)


def revision_number(req: AdmissionRequest, ctx: Context) -> Decision:
    """Users cannot choose the revision number: 0 (or absent) until the controllers assign it.

    The warden and package controllers are exempt (discovered revisions carry their number).
    """
    path = REVISION_FIELDS.get(req.version)
    if path is None or _privileged(req.user, ctx):
        return allow()
    new = dig(req.object, *path, default=0)
    if req.operation is Operation.CREATE:
        return allow() if new == 0 else deny(MSG_REVISION_CREATE.format(value=new))
    old = dig(req.old_object, *path, default=0)
    return allow() if new == old else deny(MSG_REVISION_UPDATE.format(old=old, new=new))


# --- CREATE and UPDATE: the latest-revision label -------------------------------------------------

MSG_LABEL_CREATE = (
    'label {key}={value!r} is managed by the package controllers; omit it or set it to "false" on creation'
)
MSG_LABEL_UPDATE = "label {key} is managed by the package controllers and cannot be changed ({old!r} to {new!r})"
MSG_LABEL_CREATE_V1ALPHA1 = (
    "label {key}={value!r} is managed by porch and cannot be set on a porch.kpt.dev/v1alpha1 creation; omit it"
)

CREATE_LABEL_VALUES: Mapping[tuple[str, str], tuple[str | None, ...]] = {
    ("v1alpha1", LATEST_LABEL_V1ALPHA1): (None,),
}
"""The values a user's CREATE may carry per (request version, label); otherwise absent or "false".
Porch's v1alpha1 strategy refuses the label on create whatever its value (reference A4)."""


def revision_latest_label(req: AdmissionRequest, ctx: Context) -> Decision:
    """Users cannot claim "latest": the label is computed from the published revisions.

    Both keys are checked whatever the request version (v1alpha1 ``kpt.dev/...``, v1alpha2
    ``porch.kpt.dev/...``), so neither can be used to smuggle a value past the other.
    """
    if _privileged(req.user, ctx):
        return allow()
    new_labels = labels_of(req.object)
    for key in LATEST_LABELS.values():
        value = new_labels.get(key)
        if req.operation is Operation.CREATE:
            allowed = CREATE_LABEL_VALUES.get((req.version, key), (None, "false"))
            if value not in allowed:
                message = MSG_LABEL_CREATE if "false" in allowed else MSG_LABEL_CREATE_V1ALPHA1
                return deny(message.format(key=key, value=value))
            continue
        old = labels_of(req.old_object).get(key, "")
        if (value or "") != old:
            return deny(MSG_LABEL_UPDATE.format(key=key, old=old, new=value or ""))
    return allow()


# --- CREATE and UPDATE: the publish record --------------------------------------------------------

MSG_RECORD_SET = (
    "annotation {key} records who published the revision and is written by catalog-warden; remove it from the request"
)


def _is_publish(req: AdmissionRequest) -> bool:
    """The approve step: into Published from a lifecycle that was not published yet."""
    return (
        req.operation is Operation.UPDATE
        and lifecycle_of(req.object) is Lifecycle.PUBLISHED
        and lifecycle_of(req.old_object) not in PUBLISHED_LIFECYCLES
    )


def revision_publish_record(req: AdmissionRequest, ctx: Context) -> Decision:
    """Nobody but the warden writes the publish record, except the record of their own publish.

    Without this a user could pre-set ``published-by`` on a Draft and the mutating path, which
    only fills an absent record, would keep the forged name.
    """
    if ctx.config.identities.is_warden(req.user):
        return allow()
    new, old = annotations_of(req.object), annotations_of(req.old_object)
    publishing = _is_publish(req)
    for key in PUBLISH_RECORD:
        if new.get(key) == old.get(key):
            continue
        if publishing and key in new and _record_value_ok(key, new[key], req.user):
            continue
        return deny(MSG_RECORD_SET.format(key=key))
    return allow()


def _record_value_ok(key: str, value: str, user: UserInfo) -> bool:
    return value == user.username if key == PUBLISHED_BY else parse_time(value) is not None


# --- DELETE ---------------------------------------------------------------------------------------

MSG_DELETE_PUBLISHED = (
    "a Published revision must be proposed for deletion before it is deleted: set spec.lifecycle to "
    "DeletionProposed, then delete it (Repository {repo} still exists)"
)
MSG_DELETE_UPSTREAM = (
    "the revision is the upstream of {referrers}; delete those revisions first (they were cloned or copied from it)"
)


def repository_ref(revision: Obj) -> str:
    """``namespace/name`` of the Repository a revision belongs to (always its own namespace)."""
    return f"{namespace_of(revision)}/{dig(revision, 'spec', 'repository', default='')}"


def _owner_repository_uid(revision: Obj) -> str | None:
    for ref in items_at(revision, "metadata", "ownerReferences"):
        if (
            isinstance(ref, Mapping)
            and _is_repository_ref(ref)
            and ref.get("name") == dig(revision, "spec", "repository")
        ):
            return ref.get("uid") or None
    return None


def _is_repository_ref(ref: Obj) -> bool:
    return ref.get("kind") == REPOSITORY.kind and str(ref.get("apiVersion", "")).startswith(f"{PORCH_CONFIG}/")


def own_repository(revision: Obj, ctx: Context) -> Obj | None:
    """The revision's Repository when present and the owner it names (same uid), else None.

    A Repository deleted and re-created under the same name is a different repository: the
    revisions of the old one are garbage and may go.
    """
    repo = ctx.view.get(REPOSITORY, str(dig(revision, "spec", "repository", default="")), namespace_of(revision))
    if repo is None:
        return None
    owner_uid = _owner_repository_uid(revision)
    return repo if owner_uid is None or owner_uid == dig(repo, "metadata", "uid") else None


def repository_exists(revision: Obj, ctx: Context) -> bool:
    """True when the revision's Repository is present, and is the owner it names (:func:`own_repository`)."""
    return own_repository(revision, ctx) is not None


def revision_delete_published(req: AdmissionRequest, ctx: Context) -> Decision:
    """A Published revision is deleted only after DeletionProposed, unless its Repository is gone.

    The garbage collector and namespace controller always pass: blocking them would leave the
    cascade from a deleted Repository or namespace stuck.
    """
    revision = req.old_object or {}
    if is_cluster_cleanup(req.user) or lifecycle_of(revision) is not Lifecycle.PUBLISHED:
        return allow()
    if not repository_exists(revision, ctx):
        return allow()
    return deny(MSG_DELETE_PUBLISHED.format(repo=repository_ref(revision)))


def _listed(refs: Sequence[str], limit: int) -> str:
    shown = ", ".join(refs[:limit])
    return f"{shown} and {len(refs) - limit} more" if len(refs) > limit else shown


def revision_delete_upstream(req: AdmissionRequest, ctx: Context) -> Decision:
    """A revision that live revisions were cloned or copied from cannot be deleted; names them."""
    if is_cluster_cleanup(req.user):
        return allow()
    revision = req.old_object or {}
    key = f"{namespace_of(revision)}/{name_of(revision)}"
    referrers = sorted(
        f"PackageRevision {namespace_of(r)}/{name_of(r)}"
        for r in ctx.view.indexed(PACKAGE_REVISION, REVISIONS_BY_UPSTREAM, key)
        if not is_terminating(r) and name_of(r) != name_of(revision)
    )
    if not referrers:
        return allow()
    return deny(MSG_DELETE_UPSTREAM.format(referrers=_listed(referrers, ctx.config.maxListedReferrers)))


# --- mutating -------------------------------------------------------------------------------------

WARN_REPOSITORY_UNKNOWN = "Repository {repo} not found yet; its owner reference is added once it exists"
WARN_OTHER_CONTROLLER = "owner {owner} is already the controller; no controller reference to Repository {repo} added"


def _owner_references(edit: Edit, ctx: Context) -> str | None:
    """Set the controller reference to the Repository in the draft; returns a warning, if any.

    A reference to the same Repository without ``controller``/``blockOwnerDeletion`` or with a
    stale uid is replaced, as porch's own ``hasOwnerReference`` does.
    """
    revision = edit.root
    repo_name = str(dig(revision, "spec", "repository", default=""))
    repo = ctx.view.get(REPOSITORY, repo_name, namespace_of(revision)) if repo_name else None
    if repo is None:
        return WARN_REPOSITORY_UNKNOWN.format(repo=repository_ref(revision))
    desired = {
        "apiVersion": REPOSITORY_API_VERSION,
        "kind": REPOSITORY.kind,
        "name": repo_name,
        "uid": dig(repo, "metadata", "uid", default=""),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    refs = list(items_at(revision, "metadata", "ownerReferences"))
    ours = [r for r in refs if _is_repository_ref(r) and r.get("name") == repo_name]
    others = [r for r in refs if r not in ours]
    if ours == [desired]:
        return None
    controller = next((r for r in others if r.get("controller")), None)
    if controller is not None:
        owner = f"{controller.get('kind')}/{controller.get('name')}"
        return WARN_OTHER_CONTROLLER.format(owner=owner, repo=repository_ref(revision))
    edit.at("metadata")["ownerReferences"] = [*others, desired]
    return None


def revision_lifecycle_default(req: AdmissionRequest, ctx: Context) -> Decision:
    """CREATE and UPDATE: an empty lifecycle becomes Draft.

    v1alpha1 allows ``lifecycle: ""`` while the v1alpha2 storage schema does not; defaulting on
    UPDATE too keeps ``""`` out of storage. The validating rules read an empty lifecycle as Draft
    anyway, so this never changes a verdict, only what is stored.
    """
    if problem := shape_problem(req.object):
        return invalid(problem)
    original = req.object or {}
    if dig(original, "spec", "lifecycle"):
        return allow()
    edit = Edit(original)
    edit.at("spec")["lifecycle"] = Lifecycle.DRAFT.value
    return mutate(original, edit.root)


def revision_defaults(req: AdmissionRequest, ctx: Context) -> Decision:
    """CREATE: the deletion finalizer, the Repository owner, latest label "false" (v1alpha2).

    Each field is only filled when missing, so the rule re-run on its own output changes nothing.
    A v1alpha1 CREATE answered by Porch gets none of them: its strategy refuses the label, and it
    stores a finalizer that only our bookkeeping (off alongside Porch) would ever remove, so the
    revision would hang in Terminating; Porch owns its revisions' metadata itself (reference A4, A7).
    In standalone mode our CRD stores v1alpha1 objects as v1alpha2, so they get what v1alpha2 gets.
    """
    if problem := shape_problem(req.object):
        return invalid(problem)
    original = req.object or {}
    if porch_serves_v1alpha1(req, ctx):
        return allow()
    edit = Edit(original)
    if FINALIZER not in finalizers_of(original):
        edit.at("metadata")["finalizers"] = [*finalizers_of(original), FINALIZER]
    if LATEST_LABEL_V1ALPHA2 not in labels_of(original) and req.version != "v1alpha1":
        edit.at("metadata", "labels")[LATEST_LABEL_V1ALPHA2] = "false"
    warning = _owner_references(edit, ctx)
    return mutate(original, edit.root, *([warning] if warning else []))


def revision_publish_stamp(req: AdmissionRequest, ctx: Context) -> Decision:
    """Into Published: annotate who published and when, for the sidecar to move into status.

    Written only when the record is absent; ``revision_publish_record`` refuses forged ones. Not
    where Porch serves v1alpha1 (it records the publisher in the publish's git commit, and no
    bookkeeping of ours runs there to move the annotation), and never on ``approval`` (the rule is
    registered for the main resource only).
    """
    if problem := shape_problem(req.object):
        return invalid(problem)
    original = req.object or {}
    if porch_serves_v1alpha1(req, ctx):
        return allow()
    if not _is_publish(req) or all(k in annotations_of(original) for k in PUBLISH_RECORD):
        return allow()
    edit = Edit(original)
    record = edit.at("metadata", "annotations")
    record.setdefault(PUBLISHED_BY, req.user.username)
    record.setdefault(PUBLISHED_AT, format_time(ctx.now))
    return mutate(original, edit.root)


# --- the table ------------------------------------------------------------------------------------

CREATE_UPDATE = frozenset({Operation.CREATE, Operation.UPDATE})
UPDATE = frozenset({Operation.UPDATE})
DELETE = frozenset({Operation.DELETE})
CREATE = frozenset({Operation.CREATE})
ALL = frozenset({Operation.CREATE, Operation.UPDATE, Operation.DELETE})

MAIN_RULES = (
    Rule(
        "packages.revision-shape",
        PACKAGE_REVISION,
        ALL,
        revision_shape,
        needs_view=False,
    ),
    Rule(
        "packages.revision-lifecycle",
        PACKAGE_REVISION,
        CREATE_UPDATE,
        revision_lifecycle,
        needs_view=False,
    ),
    Rule(
        "packages.revision-immutable",
        PACKAGE_REVISION,
        UPDATE,
        revision_immutable,
        needs_view=False,
    ),
    Rule(
        "packages.revision-number",
        PACKAGE_REVISION,
        CREATE_UPDATE,
        revision_number,
        needs_view=False,
    ),
    Rule(
        "packages.revision-latest-label",
        PACKAGE_REVISION,
        CREATE_UPDATE,
        revision_latest_label,
        needs_view=False,
    ),
    Rule(
        "packages.revision-publish-record",
        PACKAGE_REVISION,
        CREATE_UPDATE,
        revision_publish_record,
        needs_view=False,
    ),
    Rule("packages.revision-delete-published", PACKAGE_REVISION, DELETE, revision_delete_published),
    Rule("packages.revision-delete-upstream", PACKAGE_REVISION, DELETE, revision_delete_upstream),
    Rule("packages.revision-shape", PACKAGE_REVISION, CREATE_UPDATE, revision_shape, mutating=True, needs_view=False),
    Rule(
        "packages.revision-lifecycle-default",
        PACKAGE_REVISION,
        CREATE_UPDATE,
        revision_lifecycle_default,
        mutating=True,
        needs_view=False,
    ),
    Rule("packages.revision-defaults", PACKAGE_REVISION, CREATE, revision_defaults, mutating=True),
    Rule(
        "packages.revision-publish-stamp",
        PACKAGE_REVISION,
        UPDATE,
        revision_publish_stamp,
        mutating=True,
        needs_view=False,
    ),
)

APPROVAL_RULES = (
    "packages.revision-shape",
    "packages.revision-lifecycle",
    "packages.revision-immutable",
    "packages.revision-number",
    "packages.revision-latest-label",
    "packages.revision-publish-record",
)
"""The validating rules that also judge v1alpha1 ``packagerevisions/approval`` UPDATEs, exactly as a
main-resource lifecycle change: transitions and the identity rules (DESIGN.md section 5). No mutating
rule runs there: Porch records the publisher itself, in the publish's git commit."""


def _on_approval(rule: Rule) -> Rule:
    return replace(rule, operations=UPDATE, sub_resources=frozenset({APPROVAL}))


RULES = (*MAIN_RULES, *(_on_approval(r) for r in MAIN_RULES if r.name in APPROVAL_RULES and not r.mutating))

FAMILY = Family("packages", PACKAGES_KINDS, RULES, INDEXES)
