"""HelmClusterAddonChart helm.deckhouse.io v1alpha1 <-> v1alpha2 (DESIGN.md sections 3 and 7, reference B2).

Upstream changed the meaning of ``status.versions[]`` inside one version: the old shape
``{version, digest, pulled}`` lists usable versions only, the new one
``{version, digest, mediaType, unavailableReason, unavailableMessage}`` lists every examined tag.
Old clients reading new data would take unusable entries for deployable ones, so v1alpha1 shows
usable entries only (``mediaType`` set, or no ``unavailableReason``) and the annotation keeps the
rest, with their positions, for the way back. ``pulled`` has no v1alpha2 field and travels in the
annotation. An entry that comes from v1alpha1 with nothing carried has no verdict in v1alpha2, so
the indexer examines it (seed 004, NeedsExamination).

Carried entries are matched back by position and checked by ``version``: if a v1alpha1 writer
changed the list in between, what no longer matches is dropped rather than attached to the wrong
entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from policies.conversion.carry import MISSING, Draft, payload_field
from policies.conversion.contract import ConversionError, Converter, ConverterKey
from policies.kinds import DECKHOUSE_HELM
from policies.objects import json_type

KIND: Final = "HelmClusterAddonChart"
V1ALPHA1: Final = "v1alpha1"
V1ALPHA2: Final = "v1alpha2"

VERDICT_FIELDS: Final[tuple[str, ...]] = ("mediaType", "unavailableReason", "unavailableMessage")
"""v1alpha2 entry fields v1alpha1 has no place for."""

V1ALPHA1_ONLY_FIELDS: Final[tuple[str, ...]] = ("pulled",)
"""v1alpha1 entry fields v1alpha2 has no place for."""

NOT_A_LIST = "status.versions must be an array, not {found}"
NOT_AN_ENTRY = "status.versions[{index}] must be an object, not {found}"


def is_usable(entry: Mapping[str, Any]) -> bool:
    """Deployable: a supported layer was found, or no reason says otherwise (DESIGN.md section 7)."""
    return bool(entry.get("mediaType")) or not entry.get("unavailableReason")


def to_v1alpha1(obj: Mapping[str, Any]) -> dict[str, Any]:
    """v1alpha2 -> v1alpha1: usable entries only; verdicts and unusable entries are carried."""
    draft = Draft(obj)
    back = draft.take(restores_to=V1ALPHA1)
    carried: dict[str, Any] = {}
    versions = _versions(draft)
    if versions is not MISSING:
        listed: list[Any] = []
        hidden: list[list[Any]] = []
        verdicts: list[list[Any]] = []
        for index, entry in enumerate(versions):
            if not isinstance(entry, Mapping):
                raise ConversionError(NOT_AN_ENTRY.format(index=index, found=json_type(entry)))
            if not is_usable(entry):
                hidden.append([index, entry])
                continue
            entry, fields = _split(entry, VERDICT_FIELDS)
            if fields:
                verdicts.append([len(listed), entry.get("version"), fields])
            listed.append(entry)
        _attach(listed, payload_field(back, "pulled", list, []))
        draft.put(("status", "versions"), listed)
        if hidden:
            carried["hidden"] = hidden
        if verdicts:
            carried["verdicts"] = verdicts
    return draft.finish(carried, from_version=V1ALPHA2)


def to_v1alpha2(obj: Mapping[str, Any]) -> dict[str, Any]:
    """v1alpha1 -> v1alpha2: carried verdicts and unusable entries return to their places."""
    draft = Draft(obj)
    back = draft.take(restores_to=V1ALPHA2)
    carried: dict[str, Any] = {}
    versions = _versions(draft)
    if versions is not MISSING:
        derived: list[Any] = []
        pulled: list[list[Any]] = []
        for index, entry in enumerate(versions):
            if not isinstance(entry, Mapping):
                raise ConversionError(NOT_AN_ENTRY.format(index=index, found=json_type(entry)))
            entry, fields = _split(entry, V1ALPHA1_ONLY_FIELDS)
            if fields:
                pulled.append([index, entry.get("version"), fields])
            derived.append(entry)
        _attach(derived, payload_field(back, "verdicts", list, []))
        draft.put(("status", "versions"), _interleave(derived, payload_field(back, "hidden", list, [])))
        if pulled:
            carried["pulled"] = pulled
    return draft.finish(carried, from_version=V1ALPHA1)


def _versions(draft: Draft) -> Any:
    versions = draft.get("status", "versions")
    if versions is MISSING or versions is None:
        return MISSING
    if not isinstance(versions, list):
        raise ConversionError(NOT_A_LIST.format(found=json_type(versions)))
    return versions


def _split(entry: Mapping[str, Any], names: tuple[str, ...]) -> tuple[Mapping[str, Any], dict[str, Any]]:
    """(entry without ``names``, the ``names`` it had); the entry itself when it had none."""
    fields = {name: entry[name] for name in names if name in entry}
    if not fields:
        return entry, fields
    return {k: v for k, v in entry.items() if k not in fields}, fields


def _attach(entries: list[Any], carried: list[Any]) -> None:
    """Merge carried fields ``[position, version, fields]`` into ``entries`` (replaced, not mutated).

    The recorded position is a fast path; when a writer of the other version inserted or removed
    entries, the fields follow their version (versions are unique within a chart). A version that
    is gone, or that appears more than once, gets nothing back.
    """
    positions: dict[Any, list[int]] | None = None
    for item in carried:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], int) and isinstance(item[2], dict)):
            continue
        position, version, fields = item
        if not (0 <= position < len(entries) and entries[position].get("version") == version):
            if positions is None:
                positions = {}
                for i, entry in enumerate(entries):
                    positions.setdefault(entry.get("version"), []).append(i)
            found = positions.get(version, [])
            if len(found) != 1:
                continue
            position = found[0]
        entries[position] = {**entries[position], **fields}


def _interleave(derived: list[Any], hidden: list[Any]) -> list[Any]:
    """Put carried unusable entries back at their recorded indexes, in between the listed ones."""
    if not hidden:
        return derived
    result: list[Any] = []
    rest = iter(derived)
    for item in hidden:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int)):
            continue
        index, entry = item
        while len(result) < index:
            nxt = next(rest, MISSING)
            if nxt is MISSING:
                break
            result.append(nxt)
        result.append(entry)
    result.extend(rest)
    return result


CONVERTERS: Final[dict[ConverterKey, Converter]] = {
    (DECKHOUSE_HELM, KIND, V1ALPHA1, V1ALPHA2): to_v1alpha2,
    (DECKHOUSE_HELM, KIND, V1ALPHA2, V1ALPHA1): to_v1alpha1,
}
