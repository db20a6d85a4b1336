"""The ``--state DIR`` view: Kubernetes objects read from YAML or JSON files.

This is the embedded default that needs no cluster: every ``*.yaml``, ``*.yml`` and ``*.json``
file under the directory (recursively, sorted) may hold several documents and ``kind: List``
documents; each object needs ``apiVersion``, ``kind`` and ``metadata.name``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from policies.families import INDEXES
from policies.model import GroupKind
from policies.view import MemoryView
from webhook.yamlerrors import describe

SUFFIXES = {".yaml", ".yml", ".json"}
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when PyYAML was built with it: an order of magnitude faster on big states."""


class StateError(Exception):
    """A state file that cannot be used; the message names the file and the document."""


def group_kind(obj: Mapping[str, Any]) -> GroupKind:
    api_version = str(obj.get("apiVersion", ""))
    group = api_version.rpartition("/")[0]
    return GroupKind(group, str(obj.get("kind", "")))


def _documents(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise StateError(f"cannot read state file {path}: {exc}") from None
    try:
        yield from enumerate(yaml.load_all(text, Loader=_LOADER), start=1)
    except yaml.YAMLError as exc:
        raise StateError(f"state file {path} is not valid YAML: {describe(exc)}") from None


def iter_objects(path: Path) -> Iterator[dict[str, Any]]:
    """Every object in ``path`` (a file or a directory), validated for the fields a view needs."""
    files = sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file()) if path.is_dir() else [path]
    for file in files:
        for index, doc in _documents(file):
            if doc is None:
                continue
            items = doc.get("items") if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") else [doc]
            for item in items or ():
                where = f"{file} document {index}"
                if not isinstance(item, dict):
                    raise StateError(f"{where}: expected a Kubernetes object, got {type(item).__name__}")
                for field in ("apiVersion", "kind"):
                    if not item.get(field):
                        raise StateError(f"{where}: object has no {field}")
                if not isinstance(item.get("metadata"), dict) or not item["metadata"].get("name"):
                    raise StateError(f"{where}: {item['kind']} has no metadata.name")
                yield item


def load_state(path: Path) -> MemoryView:
    """A synced :class:`MemoryView` holding every object under ``path``."""
    if not path.exists():
        raise StateError(f"state directory {path} does not exist")
    view = MemoryView(INDEXES)
    for obj in iter_objects(path):
        view.put(group_kind(obj), obj)
    return view
