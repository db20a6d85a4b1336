"""The chart index for a Helm HTTP repository: ``status.versions[]`` per chart from its ``index.yaml``.

Reference B2/B7. A Helm HTTP repository lists every chart and version in one document, so one
request per pass (the index) is the whole cost; nothing is examined per version. A version whose
index entry points at a registry (``urls[0]`` is ``oci://host/path[:tag]``) records that reference
as ``ociRef`` with an explicit tag (the version when the index gives none); it has no
``mediaType``, the module examines it at deploy time. A reference the module could never pull
(a digest instead of a tag, no chart path, no tag and no version) is recorded as
``InvalidChartReference`` with the reason, and kept so until the repository fixes its index.

A version no longer in the index is dropped unless an addon still references it; then it stays,
marked RemovedFromRepository, as for OCI repositories (``policies.chart_index``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies.chart_index import MSG_REMOVED, UnavailableReason, cut_message, tag_of, version_order
from policies.charts import OCI_SCHEME

MSG_DIGEST = 'oci reference "{ref}" addresses a digest, which cannot be expressed as a chart version tag'
MSG_NO_PATH = 'oci reference "{ref}" carries no chart path'
MSG_NO_TAG = 'oci reference "{ref}" carries no tag and no version to use instead'
"""upstream's ``SplitOCIRef`` errors (B7), the reference quoted as Go's ``%q`` does."""


@dataclass(frozen=True, slots=True)
class OciRef:
    """``oci://host/path:tag``, the tag always explicit."""

    ref: str


@dataclass(frozen=True, slots=True)
class InvalidRef:
    message: str


def split_oci_ref(url: str, version: str) -> OciRef | InvalidRef:
    """The reference the module would pull for one index entry (upstream ``SplitOCIRef``).

    The tag is looked for after the last ``/`` only, so a registry port is never taken for a tag.
    A version used as the tag is written as Helm pushes it (``+`` as ``_``: OCI tags cannot hold
    ``+``), so the reference is one a registry can answer.
    """
    rest = url.removeprefix(OCI_SCHEME)
    if "@" in rest:
        return InvalidRef(MSG_DIGEST.format(ref=url))
    host, slash, path = rest.partition("/")
    if not slash or not host or not path.strip("/"):
        return InvalidRef(MSG_NO_PATH.format(ref=url))
    head, _, last = rest.rpartition("/")
    name, colon, tag = last.partition(":")
    if not name:
        return InvalidRef(MSG_NO_PATH.format(ref=url))
    if colon and tag:
        return OciRef(url)
    if not version:
        return InvalidRef(MSG_NO_TAG.format(ref=url))
    return OciRef(f"{OCI_SCHEME}{head}/{name}:{tag_of(version)}")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _entry(raw: Mapping[str, Any]) -> dict[str, Any] | None:
    """One ``status.versions[]`` entry from one index entry; None when it has no version."""
    version = _text(raw.get("version"))
    if not version:
        return None
    urls = raw.get("urls")
    first = _text(urls[0]) if isinstance(urls, list) and urls else ""
    if not first.startswith(OCI_SCHEME):
        return {"version": version}
    match split_oci_ref(first, version):
        case OciRef(ref):
            return {"version": version, "ociRef": ref}
        case InvalidRef(message):
            return {
                "version": version,
                "unavailableReason": str(UnavailableReason.INVALID_REFERENCE),
                "unavailableMessage": cut_message(message),
            }
    return None  # pragma: no cover - the match is exhaustive


@dataclass(frozen=True, slots=True)
class IndexedChart:
    """One chart of an ``index.yaml``: its listed versions' entries and its icon."""

    versions: tuple[dict[str, Any], ...]
    icon_url: str = ""


def read_index(document: Any) -> dict[str, IndexedChart]:
    """chart name -> what the index lists for it; malformed parts are skipped, never an error.

    The index is untrusted input: a chart whose entries are not a list, an entry that is not a
    mapping or has no version, are left out (the rest of the index still counts).
    """
    entries = document.get("entries") if isinstance(document, Mapping) else None
    if not isinstance(entries, Mapping):
        return {}
    charts: dict[str, IndexedChart] = {}
    read: dict[int, IndexedChart] = {}
    for name, listed in entries.items():
        if not isinstance(name, str) or not name or not isinstance(listed, list):
            continue
        if id(listed) in read:  # a YAML alias: the same list again, read once (no alias amplification)
            charts[name] = read[id(listed)]
            continue
        found: dict[str, dict[str, Any]] = {}
        icon = ""
        for raw in listed:
            if not isinstance(raw, Mapping):
                continue
            entry = _entry(raw)
            if entry is not None and entry["version"] not in found:
                found[entry["version"]] = entry
                icon = icon or _text(raw.get("icon"))
        ordered = sorted(found.values(), key=version_order, reverse=True)
        charts[name] = read[id(listed)] = IndexedChart(tuple(ordered), icon)
    return charts


def desired_http_versions(
    listed: Sequence[Mapping[str, Any]], existing: Sequence[Any] | None, referenced: Iterable[str]
) -> list[dict[str, Any]]:
    """``status.versions[]`` after a pass: the index's entries, plus referenced versions it dropped."""
    result = {str(e["version"]): dict(e) for e in listed}
    keep = frozenset(referenced)
    for old in existing or ():
        if not isinstance(old, Mapping):
            continue
        version = old.get("version")
        if isinstance(version, str) and version and version not in result and version in keep:
            kept = {k: old[k] for k in ("ociRef",) if isinstance(old.get(k), str) and old[k]}
            result[version] = {
                "version": version,
                **kept,
                "unavailableReason": str(UnavailableReason.REMOVED),
                "unavailableMessage": cut_message(MSG_REMOVED.format(tag=version)),
            }
    return sorted(result.values(), key=version_order, reverse=True)
