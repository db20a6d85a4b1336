"""The converter contract shared by every kind module and the ``/convert`` framing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Converter = Callable[[Mapping[str, Any]], dict[str, Any]]
"""Object in one version -> the same object in another. Never mutates its input; the result may
share unchanged sub-structures with it, so callers must not mutate the result in place either."""

ConverterKey = tuple[str, str, str, str]
"""(group, kind, from_version, to_version)."""


class ConversionError(ValueError):
    """An object that cannot be converted; the message names the field at fault."""
