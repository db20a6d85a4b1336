"""PackageRevision porch.kpt.dev v1alpha1 <-> v1alpha2 (DESIGN.md section 7, reference A3/A4).

Upstream serves the two versions from separate stores with no conversion, so an object created
through one is invisible through the other. We serve both from one CRD (v1alpha2 stored) and
convert losslessly. The mapping is data (the tables below); ``docs/conversion.md`` prints it.

Fields both versions hold under the same name pass through untouched (the CRD schemas must
declare them alike). Names that one version gives a meaning to (``spec.tasks`` in v1alpha1,
``spec.source`` and the tables' v1alpha2 paths) are reserved in the other: the apiserver prunes
them from an object before it reaches us, so we do not look for them there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from policies.conversion.carry import MISSING, Draft, Path, payload_field
from policies.conversion.contract import ConversionError, Converter, ConverterKey
from policies.kinds import PORCH
from policies.objects import json_type

KIND: Final = "PackageRevision"
V1ALPHA1: Final = "v1alpha1"
V1ALPHA2: Final = "v1alpha2"

MOVED_FIELDS: Final[tuple[tuple[Path, Path], ...]] = (
    (("spec", "revision"), ("status", "revision")),
    (("status", "publishTimestamp"), ("status", "publishedAt")),
)
"""(v1alpha1 path, v1alpha2 path): the same datum under another name."""

RENAMED_LABELS: Final[tuple[tuple[str, str], ...]] = (("kpt.dev/latest-revision", "porch.kpt.dev/latest-revision"),)
"""(v1alpha1 key, v1alpha2 key); values are copied verbatim."""

V1ALPHA2_ONLY_STATUS: Final[tuple[str, ...]] = (
    "observedGeneration",
    "observedPrrResourceVersion",
    "renderingPrrResourceVersion",
    "creationSource",
    "packageConditions",
)
"""``status`` fields v1alpha1 has no place for; carried in the annotation while in v1alpha1."""


@dataclass(frozen=True, slots=True)
class TaskSource:
    """How the first v1alpha1 task of one type maps onto one ``spec.source`` member.

    ``inner``: the task body field that *is* the source (clone's ``upstreamRef``, edit's
    ``sourceRef``); None when the whole body is. ``renames``: (v1alpha1, v1alpha2) body keys.
    """

    task_type: str
    source_key: str
    inner: str | None = None
    renames: tuple[tuple[str, str], ...] = ()


TASK_SOURCES: Final[tuple[TaskSource, ...]] = (
    TaskSource("init", "init"),
    TaskSource("clone", "cloneFrom", inner="upstreamRef"),
    TaskSource("edit", "copyFrom", inner="sourceRef"),
    TaskSource("upgrade", "upgrade", renames=(("localPackageRevisionRef", "currentPackage"),)),
)
"""Task ``type`` (its body lives under the key of the same name) <-> ``spec.source`` member."""

_BY_TASK_TYPE: Final = {t.task_type: t for t in TASK_SOURCES}
_BY_SOURCE_KEY: Final = {t.source_key: t for t in TASK_SOURCES}

NOT_A_LIST = "spec.tasks must be an array, not {found}"


def to_v1alpha2(obj: Mapping[str, Any]) -> dict[str, Any]:
    """v1alpha1 -> v1alpha2."""
    draft = Draft(obj)
    back = draft.take(restores_to=V1ALPHA2)
    carried: dict[str, Any] = {}
    displaced: dict[str, Any] = {}
    for old, new in RENAMED_LABELS:
        draft.rename_label(old, new, displaced)
    draft.restore_labels(payload_field(back, "labels", dict, {}))
    for v1, v2 in MOVED_FIELDS:
        draft.move(v1, v2)
    _tasks_to_source(draft, back, carried)
    for name, value in payload_field(back, "status", dict, {}).items():
        draft.put(("status", name), value)
    if displaced:
        carried["labels"] = displaced
    return draft.finish(carried, from_version=V1ALPHA1)


def to_v1alpha1(obj: Mapping[str, Any]) -> dict[str, Any]:
    """v1alpha2 -> v1alpha1."""
    draft = Draft(obj)
    back = draft.take(restores_to=V1ALPHA1)
    carried: dict[str, Any] = {}
    displaced: dict[str, Any] = {}
    for old, new in RENAMED_LABELS:
        draft.rename_label(new, old, displaced)
    draft.restore_labels(payload_field(back, "labels", dict, {}))
    for v1, v2 in MOVED_FIELDS:
        draft.move(v2, v1)
    _source_to_tasks(draft, back, carried)
    status_only: dict[str, Any] = {}
    for name in V1ALPHA2_ONLY_STATUS:
        value = draft.pop("status", name)
        if value is not MISSING:
            status_only[name] = value
    if status_only:
        carried["status"] = status_only
    if displaced:
        carried["labels"] = displaced
    return draft.finish(carried, from_version=V1ALPHA2)


def _tasks_to_source(draft: Draft, back: Mapping[str, Any], carried: dict[str, Any]) -> None:
    """``spec.tasks[0]`` becomes ``spec.source``; the rest of the list travels in the annotation.

    A list whose first task has no v1alpha2 source (empty, render, a body of the wrong shape)
    travels whole, and v1alpha2 then has no source.
    """
    tasks = draft.pop("spec", "tasks")
    # Any JSON value: _source_to_tasks carries whatever source no task can express, objects or not.
    whole_source = back.get("source", MISSING)
    if whole_source is not MISSING:
        draft.put(("spec", "source"), whole_source)
    if tasks is MISSING:
        return
    if not isinstance(tasks, list):
        raise ConversionError(NOT_A_LIST.format(found=json_type(tasks)))
    first = tasks[0] if tasks else None
    mapping = _task_mapping(first)
    if mapping is None or not isinstance(first, Mapping):
        carried["tasks"] = tasks
        return
    body = first[mapping.task_type]
    if mapping.inner is not None:
        source = body[mapping.inner]
        body_rest = {k: v for k, v in body.items() if k != mapping.inner}
    else:
        source = _renamed(body, mapping.renames) if mapping.renames else body
        body_rest = {}
    draft.put(("spec", "source"), {mapping.source_key: source})
    task_rest = {k: v for k, v in first.items() if k not in ("type", mapping.task_type)}
    if task_rest:
        carried["task"] = task_rest
    if body_rest:
        carried["taskBody"] = body_rest
    if len(tasks) > 1:
        carried["tasksTail"] = tasks[1:]


def _source_to_tasks(draft: Draft, back: Mapping[str, Any], carried: dict[str, Any]) -> None:
    """``spec.source`` becomes the first task; a source no task can express travels whole."""
    source = draft.pop("spec", "source")
    mapping = _source_mapping(source)
    if mapping is None:
        if source is not MISSING:
            carried["source"] = source
        whole = payload_field(back, "tasks", list, MISSING)
        if whole is not MISSING:
            draft.put(("spec", "tasks"), whole)
        return
    value = source[mapping.source_key]
    if mapping.inner is not None:
        body = {mapping.inner: value, **payload_field(back, "taskBody", dict, {})}
    else:
        body = _renamed(value, tuple((new, old) for old, new in mapping.renames)) if mapping.renames else value
    first = {"type": mapping.task_type, mapping.task_type: body, **payload_field(back, "task", dict, {})}
    draft.put(("spec", "tasks"), [first, *payload_field(back, "tasksTail", list, [])])


def _task_mapping(task: Any) -> TaskSource | None:
    """The source a task maps to: a known ``type`` whose body is an object holding ``inner``."""
    if not isinstance(task, Mapping):
        return None
    task_type = task.get("type")
    mapping = _BY_TASK_TYPE.get(task_type) if isinstance(task_type, str) else None
    if mapping is None:
        return None
    body = task.get(mapping.task_type)
    if not isinstance(body, Mapping) or (mapping.inner is not None and mapping.inner not in body):
        return None
    return None if _holds_a_target_name(body, mapping.renames) else mapping


def _source_mapping(source: Any) -> TaskSource | None:
    """The task a source maps to: exactly one known member and nothing else, of the right shape."""
    if not isinstance(source, Mapping) or len(source) != 1:
        return None
    key = next(iter(source))
    mapping = _BY_SOURCE_KEY.get(key)
    if mapping is None or (mapping.inner is None and not isinstance(source[key], Mapping)):
        return None
    backwards = tuple((new, old) for old, new in mapping.renames)
    return None if mapping.inner is None and _holds_a_target_name(source[key], backwards) else mapping


def _holds_a_target_name(body: Mapping[str, Any], renames: tuple[tuple[str, str], ...]) -> bool:
    """True when a body already holds a name a rename writes: it would be overwritten, or renamed
    back into the other name on the return trip, so such a body travels whole instead."""
    return any(new in body for _, new in renames)


def _renamed(body: Mapping[str, Any], renames: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    table = dict(renames)
    return {table.get(k, k): v for k, v in body.items()}


CONVERTERS: Final[dict[ConverterKey, Converter]] = {
    (PORCH, KIND, V1ALPHA1, V1ALPHA2): to_v1alpha2,
    (PORCH, KIND, V1ALPHA2, V1ALPHA1): to_v1alpha1,
}
