"""One-line descriptions of YAML errors, for messages that name the file, line and column."""

from __future__ import annotations

import yaml


def describe(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return problem
    return f"line {mark.line + 1} column {mark.column + 1}: {problem}"
