"""Property tests: every round trip is lossless (A->B->A == A) and the input is never mutated.

Round trips alone would pass for a converter that changes nothing, so each direction is also
checked for what the target version must look like (tests/conversion/test_mapping.py has the
exact examples).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from hypothesis import HealthCheck, example, given, settings

from policies.conversion import CONVERTERS
from policies.conversion import packagerevision as pkgrev
from tests.conversion import strategies as gen

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def convert(obj: Mapping[str, Any], to_version: str) -> dict[str, Any]:
    """One converter call as the framing makes it (apiVersion set to the target)."""
    group, _, version = obj["apiVersion"].partition("/")
    before = copy.deepcopy(obj)
    result = CONVERTERS[(group, obj["kind"], version, to_version)](obj)
    assert obj == before, "the converter mutated its input"
    result["apiVersion"] = f"{group}/{to_version}"
    return result


def round_trip(obj: Mapping[str, Any], via: str) -> dict[str, Any]:
    return convert(convert(obj, via), obj["apiVersion"].partition("/")[2])


PR_META = {"name": "a", "namespace": "a", "uid": "u"}


@SETTINGS
@given(gen.package_revision_v1alpha1())
@example(
    {"apiVersion": "porch.kpt.dev/v1alpha1", "kind": "PackageRevision", "metadata": PR_META, "spec": {"revision": 0}}
)
def test_package_revision_v1alpha1_round_trip(obj: dict[str, Any]) -> None:
    assert round_trip(obj, "v1alpha2") == obj


@SETTINGS
@given(gen.package_revision_v1alpha2())
@example(
    {"apiVersion": "porch.kpt.dev/v1alpha2", "kind": "PackageRevision", "metadata": PR_META, "status": {"revision": 0}}
)
def test_package_revision_v1alpha2_round_trip(obj: dict[str, Any]) -> None:
    assert round_trip(obj, "v1alpha1") == obj


@SETTINGS
@given(gen.package_revision_v1alpha1())
def test_package_revision_v1alpha2_has_no_v1alpha1_fields(obj: dict[str, Any]) -> None:
    out = convert(obj, "v1alpha2")
    spec, status = out.get("spec", {}), out.get("status", {})
    assert "tasks" not in spec and "revision" not in spec and "publishTimestamp" not in status
    assert "kpt.dev/latest-revision" not in out["metadata"].get("labels", {})
    if "revision" in obj.get("spec", {}):
        assert status["revision"] == obj["spec"]["revision"]
    if "publishTimestamp" in obj.get("status", {}):
        assert status["publishedAt"] == obj["status"]["publishTimestamp"]
    if "kpt.dev/latest-revision" in obj["metadata"].get("labels", {}):
        latest = obj["metadata"]["labels"]["kpt.dev/latest-revision"]
        assert out["metadata"]["labels"]["porch.kpt.dev/latest-revision"] == latest
    if "source" in spec:
        assert len(spec["source"]) == 1 and next(iter(spec["source"])) in {"init", "cloneFrom", "copyFrom", "upgrade"}


@SETTINGS
@given(gen.package_revision_v1alpha2())
def test_package_revision_v1alpha1_has_no_v1alpha2_fields(obj: dict[str, Any]) -> None:
    out = convert(obj, "v1alpha1")
    spec, status = out.get("spec", {}), out.get("status", {})
    assert "source" not in spec and "publishedAt" not in status and "revision" not in status
    assert not set(pkgrev.V1ALPHA2_ONLY_STATUS) & set(status)
    assert "porch.kpt.dev/latest-revision" not in out["metadata"].get("labels", {})
    if "revision" in obj.get("status", {}):
        assert spec["revision"] == obj["status"]["revision"]
