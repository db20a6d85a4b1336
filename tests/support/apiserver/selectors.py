"""Label and field selectors: the query-string syntax and the `metav1.LabelSelector` structure.

Both compile to one `Requirement` list, so `?labelSelector=env in (a,b)` and a webhook's
`namespaceSelector: {matchExpressions: [...]}` are evaluated by the same code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.support.apiserver.errors import ApiError, bad_request

Labels = Mapping[str, str]


def _in(value: str | None, values: tuple[str, ...]) -> bool:
    return value is not None and value in values


def _not_in(value: str | None, values: tuple[str, ...]) -> bool:
    return value is None or value not in values


def _gt(value: str | None, values: tuple[str, ...]) -> bool:
    return value is not None and value.lstrip("-").isdigit() and int(value) > int(values[0])


def _lt(value: str | None, values: tuple[str, ...]) -> bool:
    return value is not None and value.lstrip("-").isdigit() and int(value) < int(values[0])


OPERATORS: dict[str, Callable[[str | None, tuple[str, ...]], bool]] = {
    "in": _in,
    "notin": _not_in,
    "exists": lambda value, _values: value is not None,
    "!": lambda value, _values: value is None,
    "gt": _gt,
    "lt": _lt,
}


@dataclass(frozen=True)
class Requirement:
    """One term of a selector: `key <operator> values`."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Labels) -> bool:
        return OPERATORS[self.operator](labels.get(self.key), self.values)


Selector = tuple[Requirement, ...]

_TERM = re.compile(
    r"""^\s*(?:
        (?P<not>!)\s*(?P<nkey>[^\s=!<>(),]+) |
        (?P<skey>[^\s=!<>(),]+)\s*(?P<setop>in|notin)\s*\((?P<values>[^)]*)\) |
        (?P<ekey>[^\s=!<>(),]+)\s*(?P<eqop>==|=|!=|>|<)\s*(?P<value>[^\s,()]*) |
        (?P<xkey>[^\s=!<>(),]+)
    )\s*$""",
    re.VERBOSE,
)

_EQUALITY = {"=": "in", "==": "in", "!=": "notin", ">": "gt", "<": "lt"}


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    terms, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


def parse_label_selector(text: str) -> Selector:
    """Parse `a=b,c!=d,e in (f,g),h notin (i),j,!k` into requirements; 400 on a syntax error."""
    requirements = []
    for term in _split_terms(text or ""):
        match = _TERM.match(term)
        if match is None:
            raise bad_request(f"unable to parse requirement: {term.strip()!r}")
        if match["not"]:
            requirements.append(Requirement(match["nkey"], "!"))
        elif match["setop"]:
            values = tuple(v.strip() for v in match["values"].split(",") if v.strip())
            requirements.append(Requirement(match["skey"], match["setop"], values))
        elif match["eqop"]:
            requirements.append(Requirement(match["ekey"], _EQUALITY[match["eqop"]], (match["value"],)))
        else:
            requirements.append(Requirement(match["xkey"], "exists"))
    return tuple(requirements)


_STRUCTURED = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def from_label_selector(selector: Mapping[str, Any] | None) -> Selector:
    """Compile a `metav1.LabelSelector` (matchLabels + matchExpressions); None or {} selects everything."""
    selector = selector or {}
    requirements = [Requirement(k, "in", (v,)) for k, v in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or []:
        operator = _STRUCTURED[expression["operator"]]
        requirements.append(Requirement(expression["key"], operator, tuple(expression.get("values") or ())))
    return tuple(requirements)


def matches(selector: Selector, labels: Labels | None) -> bool:
    return all(requirement.matches(labels or {}) for requirement in selector)


FIELD_PATHS: dict[str, Callable[[dict[str, Any]], str]] = {
    "metadata.name": lambda obj: obj["metadata"].get("name", ""),
    "metadata.namespace": lambda obj: obj["metadata"].get("namespace", ""),
}

FIELD_NOT_SUPPORTED = '"{field}" is not a known field selector: only "metadata.name", "metadata.namespace"'


def parse_field_selector(text: str) -> Callable[[dict[str, Any]], bool]:
    """Field selectors the double supports for every kind: metadata.name and metadata.namespace (=, ==, !=)."""
    checks: list[Callable[[dict[str, Any]], bool]] = []
    for term in _split_terms(text or ""):
        match = re.match(r"^\s*([^=!\s]+)\s*(==|=|!=)\s*(\S*)\s*$", term)
        if match is None:
            raise bad_request(f"invalid selector: {term.strip()!r}")
        path, operator, value = match.groups()
        getter = FIELD_PATHS.get(path)
        if getter is None:
            raise ApiError(400, "BadRequest", FIELD_NOT_SUPPORTED.format(field=path))
        equal = operator != "!="
        checks.append(lambda obj, g=getter, v=value, eq=equal: (g(obj) == v) == eq)
    return lambda obj: all(check(obj) for check in checks)
