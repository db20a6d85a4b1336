"""Small read helpers for objects as decoded JSON (no I/O, no mutation)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from policies.model import Obj

_MISSING: Any = object()


def dig(obj: Obj | None, *path: str, default: Any = None) -> Any:
    """Follow ``path`` through nested mappings; ``default`` when any step is absent or null."""
    cur: Any = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return default
        cur = cur.get(key, _MISSING)
        if cur is _MISSING or cur is None:
            return default
    return cur


def name_of(obj: Obj | None) -> str:
    return str(dig(obj, "metadata", "name", default=""))


def namespace_of(obj: Obj | None) -> str:
    return str(dig(obj, "metadata", "namespace", default=""))


def ref_of(obj: Obj | None) -> str:
    """``namespace/name`` or ``name`` for cluster-scoped objects."""
    ns = namespace_of(obj)
    return f"{ns}/{name_of(obj)}" if ns else name_of(obj)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, list | tuple) else ()


# The readers below never raise on a malformed object (a string where a mapping belongs, say):
# the wrong type reads as absent. Rules that must refuse such input check its shape themselves
# and answer 422 naming the field; loops that merely read must not stop for one bad object.


def mapping_at(obj: Obj | None, *path: str) -> Mapping[str, Any]:
    """The object at ``path``, or an empty one when it is absent or not an object."""
    return _mapping(dig(obj, *path))


def items_at(obj: Obj | None, *path: str) -> tuple[Any, ...]:
    """The array at ``path`` as a tuple, or ``()`` when it is absent or not an array."""
    return _items(dig(obj, *path))


def labels_of(obj: Obj | None) -> Mapping[str, str]:
    return _mapping(dig(obj, "metadata", "labels"))


def annotations_of(obj: Obj | None) -> Mapping[str, str]:
    return _mapping(dig(obj, "metadata", "annotations"))


def finalizers_of(obj: Obj | None) -> tuple[str, ...]:
    return tuple(f for f in _items(dig(obj, "metadata", "finalizers")) if isinstance(f, str))


def is_terminating(obj: Obj | None) -> bool:
    """True once the apiserver has set ``deletionTimestamp`` (the object waits on finalizers)."""
    return dig(obj, "metadata", "deletionTimestamp") is not None


def condition(obj: Obj | None, type_: str) -> Obj | None:
    """The ``status.conditions[]`` entry of ``type_`` (metav1.Condition), if any."""
    for cond in _items(dig(obj, "status", "conditions")):
        if isinstance(cond, Mapping) and cond.get("type") == type_:
            return cond
    return None


def parse_time(value: str | None) -> datetime | None:
    """RFC 3339 as Kubernetes writes it (``2026-11-29T12:00:00Z``); None when absent or invalid."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with second precision, the metav1.Time wire form."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_JSON_TYPES: dict[type, str] = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def json_type(value: object) -> str:
    """How a decoded JSON value is named in a message ("a string", "an array", ...).

    The words are the API's own (OpenAPI types), so our messages read like the apiserver's.
    Exact types first (the conversion hot path); mappings and other containers by their kind.
    """
    name = _JSON_TYPES.get(type(value))
    if name is not None:
        return name
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__


def shown(value: object, limit: int = 64) -> str:
    """A decoded value as a message quotes it: a string (cut to ``limit``), anything else its type.

    Never the value's repr: an unexpected value may be megabytes long or nested deeper than
    Python's recursion limit (repr raises), and the message is read by a person.
    """
    if isinstance(value, str):
        return value if len(value) <= limit else value[: limit - 1] + "…"
    return json_type(value)
