"""Converters between served versions of one kind, registered by (group, kind, from, to).

A converter is a pure function from an object in one version to the same object in another.
``CONVERTERS`` is the table the ``/convert`` endpoint consults; each kind's module adds its
entries (``policies/conversion/<kind>.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Converter = Callable[[Mapping[str, Any]], dict[str, Any]]
ConverterKey = tuple[str, str, str, str]
"""(group, kind, from_version, to_version)."""


class ConversionError(ValueError):
    """An object that cannot be converted; the message names the field at fault."""


CONVERTERS: dict[ConverterKey, Converter] = {}
