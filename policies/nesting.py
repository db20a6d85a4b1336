"""The deepest object catalog-warden admits and converts, and the check for it.

kube-apiserver decodes JSON nested up to 10,000 levels (apimachinery's ``util/json``), orjson
decodes 1,024 and encodes only 254 levels in all. A ConversionReview answer wraps each object in
three more levels, and a converter may move a field one or two levels down, so an object nested
250 levels deep was admitted and stored, and then every read of it in the other API version
failed. The bound below leaves room for all of that (and for Python's recursion limit in code
that walks an object), and is far beyond anything a real object needs (a PackageRevision's
deepest field is about 10 levels down). Admission refuses deeper objects with 422, so they are
never stored, and conversion refuses them with a Failed result naming the object, so the three
paths agree (docs/architecture.md, "Wire rules").
"""

from __future__ import annotations

from typing import Any, Final

MAX_DEPTH: Final = 128
"""Containers (objects and arrays) nested inside each other, the object itself counting as 1."""

MSG_TOO_DEEP = "{field} nests deeper than {limit} levels, the most catalog-warden admits and converts; flatten it"
_SHOWN_SEGMENTS = 4
"""How much of the path to the too-deep value a message shows."""


def depth_problem(obj: Any, limit: int = MAX_DEPTH) -> str | None:
    """A message naming the field where ``obj`` nests deeper than ``limit``; None when it does not.

    ``obj`` is decoded JSON (plain dicts and lists). The walk recurses at most ``limit + 1``
    levels whatever the object's depth, and stops at the first container too deep: about 8 µs
    for a PackageRevision, 0.2 s for a 3 MiB object made only of tiny containers (the worst shape).
    """
    if not _deeper(obj, limit + 1):
        return None
    return MSG_TOO_DEEP.format(field=_field(_path_deeper_than(obj, limit)), limit=limit)


def _deeper(value: Any, budget: int) -> bool:
    """True when ``value`` holds ``budget`` or more containers nested in each other (itself included)."""
    kind = type(value)
    if kind is not dict and kind is not list:
        return False
    if budget <= 1:
        return True
    for child in value.values() if kind is dict else value:
        child_kind = type(child)
        if (child_kind is dict or child_kind is list) and _deeper(child, budget - 1):
            return True
    return False


def _path_deeper_than(obj: Any, limit: int) -> tuple[str | int, ...]:
    """The path to the first container at depth ``limit + 1`` (only called when there is one)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(obj, ())]
    while stack:
        value, path = stack.pop()
        if len(path) == limit:
            return path
        items = value.items() if isinstance(value, dict) else enumerate(value)
        children = [(child, (*path, key)) for key, child in items if isinstance(child, dict | list)]
        stack.extend(reversed(children))  # popped in document order
    return ()


def _field(path: tuple[str | int, ...]) -> str:
    text = ""
    for key in path[:_SHOWN_SEGMENTS]:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else key)
    return (text or "the object") + ("…" if len(path) > _SHOWN_SEGMENTS else "")
