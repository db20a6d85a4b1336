"""policies.patch: the one patch path (diff once, apply copy-on-write) and copy-on-write edits."""

from __future__ import annotations

import copy
import re
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.patch import Edit, PatchError, apply, diff

keys = st.sampled_from(["a", "b", "c/d", "e~f", ""])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2), st.sampled_from(["", "x", "1"]))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=20,
)
documents = st.dictionaries(keys, values, max_size=5)


@settings(max_examples=400, deadline=None)
@given(documents, documents)
def test_the_diff_applies_with_jsonpatch_and_with_apply_and_reproduces_the_desired_object(a: Any, b: Any) -> None:
    before = copy.deepcopy(a)
    ops = diff(a, b)
    assert _typed(jsonpatch.apply_patch(a, ops)) == _typed(b)  # an independent implementation agrees
    assert _typed(apply(a, ops)) == _typed(b)
    assert a == before, "neither diff nor apply modifies the original"
    assert (ops == []) == (_typed(a) == _typed(b))


def _typed(value: Any) -> Any:
    """``value`` with every scalar tagged by its type: JSON tells true from 1 and 1 from 1.0."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


def test_diff_tells_json_types_apart() -> None:
    assert diff({"a": 1}, {"a": True}) == [{"op": "replace", "path": "/a", "value": True}]
    assert diff({"a": 1}, {"a": 1.0}) == [{"op": "replace", "path": "/a", "value": 1.0}]


def test_diff_escapes_keys_and_handles_list_ends() -> None:
    assert diff({"m": {"x/y~z": 1}}, {"m": {}}) == [{"op": "remove", "path": "/m/x~1y~0z"}]
    assert diff({"l": [1, 2, 3]}, {"l": [1]}) == [{"op": "remove", "path": "/l/2"}, {"op": "remove", "path": "/l/1"}]
    assert diff({"l": [1]}, {"l": [1, 2]}) == [{"op": "add", "path": "/l/1", "value": 2}]


def test_diff_skips_shared_subtrees_without_walking_them() -> None:
    class Untouchable(dict):  # type: ignore[type-arg]
        def items(self):  # type: ignore[no-untyped-def]
            raise AssertionError("walked a shared subtree")

    shared = Untouchable(big=1)
    assert diff({"s": shared, "a": 1}, {"s": shared, "a": 2}) == [{"op": "replace", "path": "/a", "value": 2}]


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([{"op": "remove", "path": "/missing"}], "path '/missing' does not exist"),
        ([{"op": "replace", "path": "/a/b", "value": 1}], "cannot descend into int"),
        ([{"op": "add", "path": "/l/5", "value": 1}], "path '/l/5': index 5 is out of range"),
        ([{"op": "add", "path": "/l/01", "value": 1}], "path '/l/01': '01' is not an array index"),
        ([{"op": "move", "from": "/a", "path": "/b"}], "unsupported patch operation"),
        ([{"op": "remove", "path": ""}], "cannot remove the whole document"),
    ],
)
def test_apply_refuses_what_the_apiserver_would(ops: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(PatchError, match=re.escape(message)):
        apply({"a": 1, "l": [0]}, ops)


def test_edit_copies_only_the_path_it_writes() -> None:
    original = {"metadata": {"labels": {"a": "1"}, "name": "x"}, "spec": {"big": list(range(10))}}
    before = copy.deepcopy(original)
    edit = Edit(original)
    edit.at("metadata", "labels")["b"] = "2"
    assert edit.at("metadata", "labels") is edit.at("metadata", "labels"), "copied once per draft"
    edit.at("metadata")["finalizers"] = ["f"]
    assert original == before
    assert edit.root["spec"] is original["spec"]
    assert edit.root["metadata"] == {"labels": {"a": "1", "b": "2"}, "name": "x", "finalizers": ["f"]}
    assert edit.at("status", "x") == {} and "status" not in original


def test_edit_refuses_to_write_through_a_value_that_is_not_an_object() -> None:
    with pytest.raises(TypeError, match=re.escape("metadata.labels: labels is not an object")):
        Edit({"metadata": {"labels": ["a"]}}).at("metadata", "labels")
