"""Structural-schema handling of custom resources: pruning, defaulting, OpenAPI validation.

apiextensions-apiserver prunes fields the schema does not know (unless
`x-kubernetes-preserve-unknown-fields`), applies `default`s, then validates types, `required`, `enum`,
patterns and bounds, answering 422 with field paths. Messages follow kube-openapi's validate package
and field.Error. CEL rules (`x-kubernetes-validations`) are not evaluated: no CEL library is installed.
"""

from __future__ import annotations

import copy
import re
from typing import Any

Schema = dict[str, Any]

ROOT_FIELDS = ("apiVersion", "kind", "metadata")

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}
_GO_TYPE = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


def prune(obj: Any, schema: Schema | None, root: bool = True) -> Any:
    """Drop every field the structural schema does not specify."""
    if schema is None:
        return obj
    if isinstance(obj, list):
        items = schema.get("items")
        return [prune(item, items, False) for item in obj] if isinstance(items, dict) else obj
    if not isinstance(obj, dict):
        return obj
    properties: dict[str, Schema] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    keep_unknown = schema.get("x-kubernetes-preserve-unknown-fields") or additional is True
    embedded = schema.get("x-kubernetes-embedded-resource")
    result = {}
    for key, value in obj.items():
        if (root or embedded) and key in ROOT_FIELDS:
            result[key] = value
        elif key in properties:
            result[key] = prune(value, properties[key], False)
        elif isinstance(additional, dict):
            result[key] = prune(value, additional, False)
        elif keep_unknown:
            result[key] = value
    return result


def apply_defaults(obj: Any, schema: Schema | None) -> Any:
    """Set `default` values of absent properties, recursively, where the parent object exists."""
    if schema is None:
        return obj
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(item, schema["items"]) for item in obj]
    if not isinstance(obj, dict):
        return obj
    for key, sub in (schema.get("properties") or {}).items():
        if key not in obj and "default" in sub:
            obj[key] = copy.deepcopy(sub["default"])
        if key in obj:
            obj[key] = apply_defaults(obj[key], sub)
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        for key in list(obj):
            if key not in (schema.get("properties") or {}):
                obj[key] = apply_defaults(obj[key], additional)
    return obj


def _quote(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)


def _type_ok(value: Any, wanted: str) -> bool:
    if isinstance(value, bool) and wanted in ("integer", "number"):
        return False
    if wanted == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(wanted, (object,)))


def validate(obj: Any, schema: Schema | None, path: str = "") -> list[str]:
    """field.Error strings for every schema violation (empty when valid)."""
    if schema is None or (obj is None and schema.get("nullable")):
        return []
    errors: list[str] = []
    wanted = schema.get("type")
    if wanted and not _type_ok(obj, wanted) and not schema.get("x-kubernetes-int-or-string"):
        got = _GO_TYPE.get(type(obj), "null")
        return [f'{path}: Invalid value: "{got}": {path} in body must be of type {wanted}: "{got}"']
    if "enum" in schema and obj not in schema["enum"]:
        supported = ", ".join(_quote(v) for v in schema["enum"])
        errors.append(f"{path}: Unsupported value: {_quote(obj)}: supported values: {supported}")
    if isinstance(obj, str):
        errors += _string_errors(obj, schema, path)
    if isinstance(obj, int | float) and not isinstance(obj, bool):
        errors += _number_errors(obj, schema, path)
    if isinstance(obj, dict):
        for required in schema.get("required") or []:
            if required not in obj:
                errors.append(f"{_join(path, required)}: Required value")
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, value in obj.items():
            if not path and key in ROOT_FIELDS:
                continue
            sub = properties.get(key, additional if isinstance(additional, dict) else None)
            errors += validate(value, sub, _join(path, key))
    if isinstance(obj, list):
        if "maxItems" in schema and len(obj) > schema["maxItems"]:
            errors.append(f"{path}: Too many: {len(obj)}: must have at most {schema['maxItems']} items")
        if isinstance(schema.get("items"), dict):
            for index, item in enumerate(obj):
                errors += validate(item, schema["items"], f"{path}[{index}]")
    return errors


def _string_errors(value: str, schema: Schema, path: str) -> list[str]:
    errors = []
    if "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{path}: Invalid value: \"{value}\": {path} in body should match '{schema['pattern']}'")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{path}: Too long: may not be more than {schema['maxLength']} bytes")
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(
            f'{path}: Invalid value: "{value}": {path} in body should be at least {schema["minLength"]} chars long'
        )
    return errors


def _number_errors(value: float, schema: Schema, path: str) -> list[str]:
    errors = []
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(
            f"{path}: Invalid value: {value}: {path} in body should be greater than or equal to {schema['minimum']}"
        )
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(
            f"{path}: Invalid value: {value}: {path} in body should be less than or equal to {schema['maximum']}"
        )
    return errors


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def invalid_message(errors: list[str]) -> str:
    """One error as is, several as `[a, b]` (utilerrors.NewAggregate)."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
