"""JSON patches (RFC 6902) between an object and its mutation, computed once and cheaply.

A mutating rule states the object as it should be (:func:`policies.decision.mutate`); the shell
chains the rules on one working copy and diffs the request object against the final one once.
Both steps must stay cheap on a 3 MiB object (kube-apiserver's request limit), so nothing here
copies or walks what did not change:

- :class:`Edit` builds the desired object copy-on-write: only the containers on the paths a rule
  writes are copied (shallowly); everything else is shared with the original, which is never
  modified.
- :func:`diff` skips shared subtrees by identity, so its cost is the size of what changed.
- :func:`apply` applies a patch copy-on-write too, and comparing its result with the desired
  object is cheap for the same reason (CPython compares identical members by identity first).

Lists are diffed by position (a common prefix, then adds or removes at the end), like
``jsonpatch``; the patch is not minimal for insertions in the middle, but it always applies and
reproduces the desired object, which the shell checks before it answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

JSONPatchOp = dict[str, Any]


class PatchError(ValueError):
    """A patch operation that does not apply to the document (a missing path, a bad index)."""


def pointer(path: tuple[str | int, ...]) -> str:
    """The RFC 6901 JSON pointer for ``path`` (``~`` and ``/`` escaped)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def diff(original: Any, desired: Any) -> list[JSONPatchOp]:
    """The operations that turn ``original`` into ``desired``; empty when they are equal."""
    ops: list[JSONPatchOp] = []
    _diff((), original, desired, ops)
    return ops


def _diff(path: tuple[str | int, ...], a: Any, b: Any, ops: list[JSONPatchOp]) -> None:
    if a is b:
        return
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in a:
            if key not in b:
                ops.append({"op": "remove", "path": pointer((*path, key))})
        for key, value in b.items():
            if key in a:
                _diff((*path, key), a[key], value, ops)
            else:
                ops.append({"op": "add", "path": pointer((*path, key)), "value": value})
        return
    if isinstance(a, list) and isinstance(b, list):
        common = min(len(a), len(b))
        for i in range(common):
            _diff((*path, i), a[i], b[i], ops)
        for i in range(common, len(b)):
            ops.append({"op": "add", "path": pointer((*path, i)), "value": b[i]})
        for i in range(len(a) - 1, common - 1, -1):
            ops.append({"op": "remove", "path": pointer((*path, i))})
        return
    # type() first: JSON tells true from 1 and 1 from 1.0, Python's == does not.
    if type(a) is not type(b) or a != b:
        ops.append({"op": "replace", "path": pointer(path), "value": b})


def apply(document: Any, ops: list[JSONPatchOp]) -> Any:
    """``document`` with ``ops`` applied (add, remove, replace), sharing what they do not touch.

    ``document`` is not modified. Raises :class:`PatchError` when an operation does not apply,
    as kube-apiserver would refuse it.
    """
    root: list[Any] = [document]
    owned: dict[int, Any] = {}
    for op in ops:
        kind, path = op.get("op"), op.get("path")
        if kind not in ("add", "remove", "replace") or not isinstance(path, str):
            raise PatchError(f"unsupported patch operation {op!r}")
        if path and not path.startswith("/"):
            raise PatchError(f"path {path!r} is not a JSON pointer")
        if not path:
            if kind == "remove":
                raise PatchError("cannot remove the whole document")
            root[0] = op["value"]
            continue
        parent: Any = root
        key: str | int = 0
        for token in path.split("/")[1:]:
            parent = _owned_child(parent, key, owned)
            key = _key(parent, _unescape(token), path)
        _apply_one(parent, key, kind, op, path)
    return root[0]


def _owned_child(parent: Any, key: str | int, owned: dict[int, Any]) -> Any:
    """``parent[key]`` as a container this patch may change (copied once, on first write).

    ``owned`` keeps the copies alive, so an id in it is never reused by another object.
    """
    try:
        child = parent[key]
    except (KeyError, IndexError):
        raise PatchError(f"{key!r} does not exist") from None
    if id(child) in owned:
        return child
    if isinstance(child, Mapping):
        child = dict(child)
    elif isinstance(child, list):
        child = list(child)
    else:
        raise PatchError(f"cannot descend into {type(child).__name__}")
    parent[key] = child
    owned[id(child)] = child
    return child


def _key(container: Any, token: str, path: str) -> str | int:
    if isinstance(container, dict):
        return token
    if token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"path {path!r}: {token!r} is not an array index")
    return int(token)


def _apply_one(parent: Any, key: str | int, kind: str, op: JSONPatchOp, path: str) -> None:
    if isinstance(parent, dict):
        if kind != "add" and key not in parent:
            raise PatchError(f"path {path!r} does not exist")
        if kind == "remove":
            del parent[key]
        else:
            parent[key] = op["value"]
        return
    assert isinstance(key, int)
    limit = len(parent) if kind == "add" else len(parent) - 1
    if key > limit:
        raise PatchError(f"path {path!r}: index {key} is out of range")
    if kind == "add":
        parent.insert(key, op["value"])
    elif kind == "remove":
        del parent[key]
    else:
        parent[key] = op["value"]


class Edit:
    """A copy-on-write draft of an object: the way a mutating rule builds its desired object.

    ``Edit(original).at("metadata", "labels")`` is a dict the rule may change; the containers on
    that path are shallow copies made once per draft (created when absent or null), and
    everything else is shared with ``original``, which is never modified. :attr:`root` is the
    desired object. Values on the path must be objects or absent: the rules check the shape first
    and answer 422 otherwise.
    """

    def __init__(self, original: Mapping[str, Any]) -> None:
        self.root: dict[str, Any] = dict(original)
        self._owned: dict[int, Any] = {id(self.root): self.root}

    def at(self, *path: str) -> dict[str, Any]:
        container = self.root
        for key in path:
            child = container.get(key)
            if child is None or id(child) not in self._owned:
                if child is not None and not isinstance(child, Mapping):
                    raise TypeError(f"{'.'.join(path)}: {key} is not an object")
                child = dict(child or {})
                container[key] = child
                self._owned[id(child)] = child
            container = child
        return container
