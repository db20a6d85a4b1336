"""Copy-on-write editing of an object under conversion, and the annotation that carries what the
target version cannot hold.

Why copy-on-write: a ConversionReview converts up to hundreds of objects per request and the
target is 0.25 ms per object, so a converter copies only the containers it changes (``spec``,
``status``, ``metadata.labels``...) and shares everything else with its input, which it never
mutates.

Why an annotation: every round trip must be lossless (A->B->A == A, annotations included). What
the target version cannot express is serialized into ``catalog-warden.io/conversion-data`` and
restored, and the annotation removed, when the object is converted back. The payload is a JSON
object whose ``from`` names the version the data belongs to, so an annotation on a v1alpha1
object is only ever read when converting to that ``from`` version. Besides the kind-specific keys
it may hold ``created`` (containers the conversion had to create and that must disappear again
when they end up empty) and ``prior`` (a value of the annotation that was already there and was
not ours to consume, restored verbatim).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from policies.conversion.contract import ConversionError
from policies.objects import json_type

CONVERSION_DATA: Final = "catalog-warden.io/conversion-data"

MISSING: Any = object()
"""Sentinel for "no such key" (``None`` is a value a field can hold)."""

Path = tuple[str, ...]

NOT_AN_OBJECT = "{path} must be an object, not {found}"
BAD_PAYLOAD_FIELD = f"annotation {CONVERSION_DATA}: {{key}} must be {{expected}}, not {{found}}"


class Draft:
    """An object being converted: reads see the input, writes copy each container once.

    ``created`` records the containers this conversion had to create, so the reverse conversion
    can remove them again.
    """

    __slots__ = ("_foreign", "_incoming_created", "_owned", "created", "obj")

    def __init__(self, source: Mapping[str, Any]) -> None:
        self.obj: dict[str, Any] = dict(source)
        self._owned: dict[Path, dict[str, Any]] = {(): self.obj}
        self.created: list[Path] = []
        self._incoming_created: list[Path] = []
        self._foreign = False

    # -- reading -----------------------------------------------------------------------------
    def get(self, *path: str) -> Any:
        """The value at ``path``, or ``MISSING`` when a step is absent, null or not an object."""
        cur: Any = self.obj
        for key in path:
            if not isinstance(cur, Mapping):
                return MISSING
            cur = cur.get(key, MISSING)
            if cur is MISSING:
                return MISSING
        return cur

    # -- writing -----------------------------------------------------------------------------
    def mapping(self, *path: str, create: bool = False) -> dict[str, Any] | None:
        """The container at ``path``, ready to be written; created (and recorded) if ``create``."""
        owned = self._owned.get(path)
        if owned is not None:
            return owned
        parent = self.mapping(*path[:-1], create=create)
        if parent is None:
            return None
        cur = parent.get(path[-1])
        if cur is None:
            if not create:
                return None
            new: dict[str, Any] = {}
            self.created.append(path)
        elif isinstance(cur, Mapping):
            new = dict(cur)
        else:
            raise ConversionError(NOT_AN_OBJECT.format(path=".".join(path), found=json_type(cur)))
        parent[path[-1]] = new
        self._owned[path] = new
        return new

    def pop(self, *path: str) -> Any:
        """Remove and return the value at ``path`` (``MISSING`` when absent); copies only if present."""
        if self.get(*path) is MISSING:
            return MISSING
        container = self.mapping(*path[:-1])
        assert container is not None  # get() just walked it
        return container.pop(path[-1])

    def put(self, path: Path, value: Any) -> None:
        container = self.mapping(*path[:-1], create=True)
        assert container is not None
        container[path[-1]] = value

    def move(self, source: Path, target: Path) -> None:
        """Move a field from one place to another; nothing happens when the source is absent."""
        value = self.pop(*source)
        if value is not MISSING:
            self.put(target, value)

    def rename_label(self, old: str, new: str, displaced: dict[str, Any]) -> None:
        """Rename label ``old`` to ``new``; a ``new`` label already present goes to ``displaced``."""
        labels = self.get("metadata", "labels")
        if not isinstance(labels, Mapping) or (old not in labels and new not in labels):
            return
        target = self.mapping("metadata", "labels")
        assert target is not None
        if new in target:
            displaced[new] = target.pop(new)
        if old in target:
            target[new] = target.pop(old)

    def restore_labels(self, labels: Mapping[str, Any]) -> None:
        if labels:
            target = self.mapping("metadata", "labels", create=True)
            assert target is not None
            target.update(labels)

    # -- the carried data --------------------------------------------------------------------
    def take(self, restores_to: str) -> dict[str, Any]:
        """Consume the payload stashed by the conversion from ``restores_to``; ``{}`` if none.

        An annotation that is not such a payload is left in place and wrapped as ``prior`` by
        :meth:`finish`, so it survives the round trip unchanged.
        """
        raw = self.get("metadata", "annotations", CONVERSION_DATA)
        if raw is MISSING:
            return {}
        payload = _parse(raw)
        if payload is None or payload.get("from") != restores_to:
            self._foreign = True
            return {}
        annotations = self.mapping("metadata", "annotations")
        assert annotations is not None
        prior = payload.get("prior", MISSING)
        if prior is MISSING:
            del annotations[CONVERSION_DATA]
        else:
            annotations[CONVERSION_DATA] = prior
        created = payload_field(payload, "created", list, [])
        self._incoming_created = [tuple(str(p).split(".")) for p in created]
        return payload

    def finish(self, carried: dict[str, Any], from_version: str) -> dict[str, Any]:
        """Drop containers the reverse conversion created, stash ``carried``; return the object."""
        for path in sorted(self._incoming_created, key=len, reverse=True):
            self._drop_if_empty(path)
        if self._foreign:
            carried["prior"] = self.get("metadata", "annotations", CONVERSION_DATA)
        if carried or self._live_created():
            annotations = self.mapping("metadata", "annotations", create=True)
            assert annotations is not None
            payload = {"from": from_version, **carried}
            created = self._live_created()
            if created:
                payload["created"] = created
            annotations[CONVERSION_DATA] = json.dumps(payload, separators=(",", ":"))
        return self.obj

    def _live_created(self) -> list[str]:
        """Containers this conversion created that still exist, as dotted paths."""
        return list(dict.fromkeys(".".join(p) for p in self.created if self.get(*p) is not MISSING))

    def _drop_if_empty(self, path: Path) -> None:
        if self.get(*path) == {}:
            parent = self.mapping(*path[:-1])
            if parent is not None:
                del parent[path[-1]]
                self._owned.pop(path, None)


def _parse(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, str) or not raw.startswith("{"):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def payload_field(payload: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
    """A payload entry of the expected JSON type; a tampered payload fails with a clear message."""
    value = payload.get(key, MISSING)
    if value is MISSING:
        return default
    if not isinstance(value, kind):
        expected = json_type(kind())
        raise ConversionError(BAD_PAYLOAD_FIELD.format(key=key, expected=expected, found=json_type(value)))
    return value
