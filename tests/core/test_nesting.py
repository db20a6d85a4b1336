"""The nesting bound: where the message points, and the fast check agreeing with the exact one."""

from __future__ import annotations

from typing import Any

import pytest

from policies import nesting
from webhook import nesting as fast


def nested(levels: int, key: str = "a") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _ in range(levels - 1):
        out = {key: out}
    return out


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        (nested(129), "a.a.a.a…"),
        ({"spec": {"tasks": [{"x": 1}, {"eval": nested(126)}]}}, "spec.tasks[1].eval…"),
        ([nested(128)], "[0].a.a.a…"),
        ({"s": {"t": nested(127)}}, "s.t.a.a…"),
    ],
)
def test_the_message_names_where_the_deep_part_starts(obj: Any, field: str) -> None:
    message = f"{field} nests deeper than 128 levels, the most catalog-warden admits and converts; flatten it"
    assert nesting.depth_problem(obj) == message
    assert fast.depth_problem(obj) == message


@pytest.mark.parametrize("levels", [1, 2, 127, 128, 129, 200, 253, 254, 255, 1024])
def test_the_encoder_check_agrees_with_the_walk(levels: int) -> None:
    for obj in (nested(levels), [nested(levels - 1)] if levels > 1 else [], {"x": [1, "a", None], "d": nested(levels)}):
        assert fast.depth_problem(obj) == nesting.depth_problem(obj)
    assert (nesting.depth_problem(nested(levels)) is None) == (levels <= nesting.MAX_DEPTH)


def test_a_value_the_encoder_refuses_for_another_reason_is_decided_by_the_walk() -> None:
    assert fast.depth_problem({"big": 2**70}) is None
    assert fast.depth_problem({1: nested(5)}) is None


def test_the_encoder_limit_leaves_room_for_the_conversion_envelope() -> None:
    """A ConversionReview answer wraps each object in three levels; converters move fields a level or two."""
    assert fast.ENCODER_LIMIT >= nesting.MAX_DEPTH + 3 + 2
