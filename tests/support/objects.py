"""Builders shared by the rule tests."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def changed(obj: Mapping[str, Any], *path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``obj`` with ``path`` set to ``value`` (``None`` removes the key)."""
    out = copy.deepcopy(dict(obj))
    cur = out
    for key in path[:-1]:
        cur = cur.setdefault(key, {})
    if value is None:
        cur.pop(path[-1], None)
    else:
        cur[path[-1]] = value
    return out
