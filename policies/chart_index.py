"""The chart index: a HelmClusterAddonChart's ``status.versions[]`` from one look at its OCI repository.

Seed 004 and reference B2/B7. The media type of a chart layer is a fact about one version, so
each tag is examined once (one manifest request) and the verdict is recorded in the chart's
status; the recorded verdicts are also the set of tags already examined, so a steady pass costs
one tag listing and nothing else. This module is the pure half: it says which tags still need a
request, what a fetched manifest means, and what ``status.versions[]`` becomes. The shell
(``webhook/sidecar/chart_index.py``) does the requests and the writes.

Rules a caller may rely on:

- Only semver tags are versions; cosign tags (``.sig``, ``.att``, ``.sbom``) are skipped. Helm
  writes ``+`` as ``_`` in tags, so tag ``1.0.0_build.1`` is version ``1.0.0+build.1``.
- A version needs a request when it has no entry, no verdict (an entry from before verdicts
  existed), or a ResolvePending / RemovedFromRepository entry without a media type; a usable
  entry or an UnsupportedMediaType verdict is never requested again, except in a forced pass.
- A read error never produces a negative verdict: it is ResolvePending for a version with no
  verdict yet, and leaves a recorded verdict as it was.
- A version whose tag is no longer listed is dropped, unless an addon still references it
  (``spec.chart.version`` or ``status.lastAppliedChart.version``): then it stays, marked
  RemovedFromRepository, with its media type, so the running addon stays changeable.
- The list is ordered semver-descending (parsable versions first), so an unchanged catalog
  yields an identical list and the shell writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from policies.charts import (
    CHART_FIELD,
    REPOSITORY_FIELD,
    VERSION_FIELD,
    addon_chart_ref,
    addon_last_applied,
)
from policies.model import Obj
from policies.retention import semver_key

FORCE_RECONCILE_ANNOTATION = "reconcile.helm.deckhouse.io/force"
"""Only its presence matters (B6): a pass then re-examines every tag."""

HELM_CONFIG_MEDIA_TYPES = ("application/vnd.cncf.helm.config.v1+json",)
"""The config media type is what makes an artifact a chart; ``application/tar+gzip`` alone says nothing."""
HELM_LAYER_MEDIA_TYPES = ("application/vnd.cncf.helm.chart.content.v1.tar+gzip", "application/tar+gzip")
"""Supported chart layers in priority order: the first of this list present anywhere in the manifest wins."""
INDEX_MEDIA_TYPES = frozenset(
    {"application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"}
)
COSIGN_SUFFIXES = (".sig", ".att", ".sbom")

MESSAGE_LIMIT = 256
"""Bytes of ``unavailableMessage`` (B2), cut on a character boundary with an ellipsis."""
ELLIPSIS = "…"

MSG_INDEX = "the tag points to an index ({media_type}), not to a chart manifest"
MSG_CONFIG = 'config media type "{media_type}" is not a helm chart config'
MSG_NO_LAYER = "no supported chart layer, the artifact has [{layers}]"
MSG_UNPARSABLE = "the manifest is not valid JSON of an OCI image manifest: {error}"
MSG_REMOVED = "tag {tag} is no longer listed by the repository; kept while an addon references this version"


class UnavailableReason(StrEnum):
    REMOVED = "RemovedFromRepository"
    UNSUPPORTED = "UnsupportedMediaType"
    PENDING = "ResolvePending"
    INVALID_REFERENCE = "InvalidChartReference"
    """Helm HTTP repositories only (``policies.chart_http_index``): the index points at a reference
    the module cannot pull."""


# ---- what one manifest request said ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Usable:
    """A chart: the layer media type Flux must select, and the manifest digest."""

    media_type: str
    digest: str = ""


@dataclass(frozen=True, slots=True)
class Unsupported:
    """The manifest was read and is not a chart: a verdict, kept until a forced pass."""

    message: str


@dataclass(frozen=True, slots=True)
class Pending:
    """The request failed (5xx, 429, timeout, transport): no verdict."""

    message: str


@dataclass(frozen=True, slots=True)
class Vanished:
    """404: the tag disappeared between listing and request; treated as not listed."""


Examination = Usable | Unsupported | Pending | Vanished


def cut_message(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` within ``limit`` UTF-8 bytes, cut on a character boundary with ``…`` appended when cut.

    Registry text is untrusted: a lone surrogate (JSON may escape one) becomes ``?``, so the result
    always encodes, both here and when the status is sent to the API.
    """
    data = text.encode(errors="replace")
    if len(data) <= limit:
        return data.decode()
    room = limit - len(ELLIPSIS.encode())
    return data[:room].decode(errors="ignore") + ELLIPSIS


def examine_manifest(descriptor_media_type: str, content: bytes, digest: str = "") -> Usable | Unsupported:
    """B7's three checks on one manifest, in order: not an index, a chart config, a supported layer."""
    try:
        manifest = json.loads(content)
    except (ValueError, RecursionError) as exc:  # registry content is untrusted: deep nesting is not a crash
        return Unsupported(cut_message(MSG_UNPARSABLE.format(error=exc)))
    if not isinstance(manifest, Mapping):
        return Unsupported(MSG_UNPARSABLE.format(error=f"a JSON {type(manifest).__name__}, not an object"))
    media_type = descriptor_media_type or str(manifest.get("mediaType") or "")
    if media_type in INDEX_MEDIA_TYPES or "manifests" in manifest:
        return Unsupported(cut_message(MSG_INDEX.format(media_type=media_type or "no media type")))
    config = manifest.get("config")
    config_type = str(config.get("mediaType") or "") if isinstance(config, Mapping) else ""
    if config_type not in HELM_CONFIG_MEDIA_TYPES:
        return Unsupported(cut_message(MSG_CONFIG.format(media_type=config_type)))
    raw_layers = manifest.get("layers")
    entries = raw_layers if isinstance(raw_layers, list) else []
    layers = [str(layer.get("mediaType") or "") for layer in entries if isinstance(layer, Mapping)]
    for candidate in HELM_LAYER_MEDIA_TYPES:
        if candidate in layers:
            return Usable(candidate, digest)
    return Unsupported(cut_message(MSG_NO_LAYER.format(layers=", ".join(layers))))


# ---- tags and versions ----------------------------------------------------------------------------


def tag_of(version: str) -> str:
    """Helm's tag for a version: build metadata ``+`` becomes ``_`` (OCI tags cannot hold ``+``)."""
    return version.replace("+", "_")


def version_of(tag: str) -> str | None:
    """The chart version a tag stands for, or None for a cosign or non-semver tag."""
    if tag.endswith(COSIGN_SUFFIXES):
        return None
    version = tag.replace("_", "+")
    return version if semver_key(version) is not None else None


def listed_versions(tags: Iterable[str]) -> dict[str, str]:
    """version -> tag for every tag that is a chart version (the first tag wins if two map to one version)."""
    found: dict[str, str] = {}
    for tag in sorted(tags):
        version = version_of(tag)
        if version is not None:
            found.setdefault(version, tag)
    return found


def _entries_by_version(existing: Sequence[Any] | None) -> dict[str, Mapping[str, Any]]:
    entries: dict[str, Mapping[str, Any]] = {}
    for entry in existing or ():
        if isinstance(entry, Mapping) and isinstance(entry.get("version"), str) and entry["version"]:
            entries.setdefault(entry["version"], entry)
    return entries


def _has_verdict(entry: Mapping[str, Any]) -> bool:
    """A usable entry, or an UnsupportedMediaType verdict: both are final until a forced pass."""
    return bool(entry.get("mediaType")) or entry.get("unavailableReason") == UnavailableReason.UNSUPPORTED


def needs_examination(entry: Mapping[str, Any] | None, force: bool = False) -> bool:
    """Whether a listed version needs a manifest request this pass (seed 004 ``NeedsExamination``)."""
    return force or entry is None or not _has_verdict(entry)


def tags_to_examine(tags: Iterable[str], existing: Sequence[Any] | None, force: bool = False) -> list[str]:
    """The listed tags whose versions need a manifest request, in tag order."""
    entries = _entries_by_version(existing)
    return sorted(
        tag for version, tag in listed_versions(tags).items() if needs_examination(entries.get(version), force)
    )


# ---- which versions addons still use ---------------------------------------------------------------


def _text(ref: Mapping[str, Any], field: str) -> str:
    value = ref.get(field)
    return value if isinstance(value, str) else ""


def referenced_versions(addons: Iterable[Obj], repository: str, chart: str) -> frozenset[str]:
    """Versions of (repository, chart) that addons select or last applied.

    Both count: they differ during an upgrade. A last-applied reference belongs to this chart
    when its own repository and chart (or, where it leaves them out, the addon's) match.
    """
    found: set[str] = set()
    for addon in addons:
        spec = addon_chart_ref(addon)
        for ref, fallback in ((spec, {}), (addon_last_applied(addon), spec)):
            repo = _text(ref, REPOSITORY_FIELD) or _text(fallback, REPOSITORY_FIELD)
            name = _text(ref, CHART_FIELD) or _text(fallback, CHART_FIELD)
            version = _text(ref, VERSION_FIELD)
            if version and repo == repository and name == chart:
                found.add(version)
    return frozenset(found)


# ---- the merge ------------------------------------------------------------------------------------


def _usable_entry(version: str, verdict: Usable) -> dict[str, Any]:
    entry: dict[str, Any] = {"version": version}
    if verdict.digest:
        entry["digest"] = verdict.digest
    entry["mediaType"] = verdict.media_type
    return entry


def _negative_entry(version: str, reason: UnavailableReason, message: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"version": version, "unavailableReason": str(reason)}
    if message:
        entry["unavailableMessage"] = cut_message(message)
    return entry


def _kept_media(old: Mapping[str, Any] | None) -> dict[str, Any]:
    """digest and mediaType of an old usable entry, which a referenced version must not lose."""
    if not old or not old.get("mediaType"):
        return {}
    kept = {k: old[k] for k in ("digest", "mediaType") if old.get(k)}
    return kept


def _carried(old: Mapping[str, Any]) -> dict[str, Any]:
    """A known verdict carried over without a request; a RemovedFromRepository marker is cleared."""
    if old.get("unavailableReason") == UnavailableReason.REMOVED:
        return {"version": old["version"], **_kept_media(old)}
    return dict(old)


def _listed_entry(
    version: str, old: Mapping[str, Any] | None, examination: Examination | None, referenced: bool
) -> dict[str, Any] | None:
    """The entry of a version whose tag is listed; None when its tag vanished (404) mid-pass."""
    match examination:
        case None:
            return _carried(old) if old is not None else None
        case Usable():
            return _usable_entry(version, examination)
        case Unsupported(message):
            entry = _negative_entry(version, UnavailableReason.UNSUPPORTED, message)
            return {**entry, **_kept_media(old)} if referenced else entry
        case Pending(message):
            if old is not None and _has_verdict(old):
                return _carried(old)
            return _negative_entry(version, UnavailableReason.PENDING, message)
        case Vanished():
            return None


def _removed_entry(version: str, old: Mapping[str, Any]) -> dict[str, Any]:
    entry = _negative_entry(version, UnavailableReason.REMOVED, MSG_REMOVED.format(tag=tag_of(version)))
    return {**entry, **_kept_media(old)}


def version_order(entry: Mapping[str, Any]) -> tuple[Any, ...]:
    """Sort key for descending order: parsable semver first, then precedence, then the text (total order)."""
    version = str(entry.get("version", ""))
    key = semver_key(version)
    return (key is not None, key or (), version)


def desired_versions(
    tags: Iterable[str],
    existing: Sequence[Any] | None,
    examined: Mapping[str, Examination],
    referenced: frozenset[str],
) -> list[dict[str, Any]]:
    """``status.versions[]`` after a pass.

    ``tags`` is the repository's listing, ``existing`` the chart's current ``status.versions``,
    ``examined`` maps each tag requested this pass to its outcome, ``referenced`` the versions
    addons still use (:func:`referenced_versions`).
    """
    entries = _entries_by_version(existing)
    listed = listed_versions(tags)
    result: dict[str, dict[str, Any]] = {}
    for version, tag in listed.items():
        entry = _listed_entry(version, entries.get(version), examined.get(tag), version in referenced)
        if entry is not None:
            result[version] = entry
    for version, old in entries.items():
        if version not in result and version in referenced:
            result[version] = _removed_entry(version, old)
    return sorted(result.values(), key=version_order, reverse=True)


def pending_count(versions: Iterable[Mapping[str, Any]]) -> int:
    """Listed versions still without a verdict (for logs and metrics; never an error)."""
    return sum(1 for v in versions if v.get("unavailableReason") == UnavailableReason.PENDING)
