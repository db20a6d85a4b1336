"""Converters between served versions of one kind, registered by (group, kind, from, to).

A converter is a pure function from an object in one version to the same object in another.
``CONVERTERS`` is the table the ``/convert`` endpoint consults; each kind's module
(``policies/conversion/<kind>.py``) declares its own entries and this table gathers them, so the
conversions of a kind are found by the kind's name. What a target version cannot hold travels in
the annotation described in :mod:`policies.conversion.carry`.
"""

from __future__ import annotations

from policies.conversion import packagerevision
from policies.conversion.carry import CONVERSION_DATA
from policies.conversion.contract import ConversionError, Converter, ConverterKey

__all__ = ["CONVERSION_DATA", "CONVERTERS", "ConversionError", "Converter", "ConverterKey"]

CONVERTERS: dict[ConverterKey, Converter] = {
    **packagerevision.CONVERTERS,
}
