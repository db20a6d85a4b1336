"""The object readers never raise on malformed objects: a wrong type reads as absent."""

from __future__ import annotations

import pytest

from policies.objects import annotations_of, condition, finalizers_of, labels_of

MALFORMED = ["x", 3, ["a"], None, True]


@pytest.mark.parametrize("value", MALFORMED)
def test_malformed_metadata_reads_as_absent(value: object) -> None:
    obj = {"metadata": {"labels": value, "annotations": value, "finalizers": value}, "status": {"conditions": value}}
    assert labels_of(obj) == {}
    assert annotations_of(obj) == {}
    assert finalizers_of(obj) == (() if not isinstance(value, list) else ("a",))
    assert condition(obj, "Available") is None


def test_a_string_is_not_a_list_of_finalizers() -> None:
    assert finalizers_of({"metadata": {"finalizers": "example.com/keep"}}) == ()


def test_well_formed_objects_read_as_written() -> None:
    obj = {
        "metadata": {"labels": {"a": "1"}, "annotations": {"b": "2"}, "finalizers": ["f", 7]},
        "status": {"conditions": ["junk", {"type": "Available", "status": "True"}]},
    }
    assert (labels_of(obj), annotations_of(obj), finalizers_of(obj)) == ({"a": "1"}, {"b": "2"}, ("f",))
    assert condition(obj, "Available") == {"type": "Available", "status": "True"}
