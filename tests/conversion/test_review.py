"""Contract tests for the ConversionReview v1 framing (reference section 2.5)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from policies.conversion import CONVERSION_DATA, CONVERTERS
from tests.conversion.builders import chart, package_revision
from webhook.conversion import MalformedReview, convert_review

UID = "705ab4f5-6393-11e8-b7cc-42010a800002"
Review = Callable[..., dict[str, Any]]


def mixed_batch() -> list[dict[str, Any]]:
    """100 PackageRevisions, every third already in v1alpha2, some with tasks, labels, status."""
    objects = []
    for i in range(100):
        if i % 3 == 0:
            obj = package_revision("v1alpha2", name=f"r.p.w{i}", spec={"source": {"init": {}}}, status={"revision": i})
        else:
            obj = package_revision(
                "v1alpha1", name=f"r.p.w{i}", spec={"revision": i, "tasks": [{"type": "init", "init": {}}]}
            )
            obj["metadata"]["labels"] = {"kpt.dev/latest-revision": "true"} if i % 2 else {"app": "x"}
        objects.append(obj)
    return objects


def test_mixed_version_batch_of_100(review: Review) -> None:
    objects = mixed_batch()
    sent = copy.deepcopy(objects)
    answer = convert_review(review("porch.kpt.dev/v1alpha2", objects))
    assert objects == sent, "the request was mutated"
    assert answer["apiVersion"] == "apiextensions.k8s.io/v1" and answer["kind"] == "ConversionReview"
    response = answer["response"]
    assert response["uid"] == UID
    assert response["result"] == {"status": "Success"}
    converted = response["convertedObjects"]
    assert len(converted) == 100
    for i, (before, after) in enumerate(zip(objects, converted, strict=True)):
        assert after["apiVersion"] == "porch.kpt.dev/v1alpha2"
        assert after["kind"] == before["kind"]
        meta_before, meta_after = dict(before["metadata"]), dict(after["metadata"])
        for varying in ("labels", "annotations"):
            meta_before.pop(varying, None)
            meta_after.pop(varying, None)
        assert meta_after == meta_before
        assert after["status"]["revision"] == i
        assert after["spec"]["source"] == {"init": {}}


def test_object_already_at_target_version_is_returned_unchanged(review: Review) -> None:
    obj = chart("v1alpha1", status={"versions": [{"version": "1.0.0", "pulled": True}]})
    obj["metadata"]["annotations"] = {CONVERSION_DATA: "not ours"}
    answer = convert_review(review("helm.deckhouse.io/v1alpha1", [obj]))
    assert answer["response"]["convertedObjects"] == [obj]


def test_empty_batch_succeeds(review: Review) -> None:
    answer = convert_review(review("helm.deckhouse.io/v1alpha1", [], uid="u-1"))
    assert answer["response"] == {"uid": "u-1", "result": {"status": "Success"}, "convertedObjects": []}


@pytest.mark.parametrize(
    ("desired", "obj", "message"),
    [
        (
            "porch.kpt.dev/v1alpha2",
            {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "ns"}},
            "objects[0] (Widget ns/w example.com/v1): cannot convert example.com/v1 to porch.kpt.dev/v1alpha2: "
            "the API group differs",
        ),
        (
            "porch.kpt.dev/v1alpha2",
            {
                "apiVersion": "porch.kpt.dev/v1alpha1",
                "kind": "PorchPackage",
                "metadata": {"name": "p", "namespace": "ns"},
            },
            "objects[0] (PorchPackage ns/p porch.kpt.dev/v1alpha1): no conversion for PorchPackage.porch.kpt.dev "
            "from v1alpha1 to v1alpha2",
        ),
        (
            "helm.deckhouse.io/v1",
            chart("v1alpha1"),
            "objects[0] (HelmClusterAddonChart podinfo-chart-podinfo helm.deckhouse.io/v1alpha1): no conversion for "
            "HelmClusterAddonChart.helm.deckhouse.io from v1alpha1 to v1",
        ),
    ],
)
def test_unknown_group_kind_or_version_fails(review: Review, desired: str, obj: dict[str, Any], message: str) -> None:
    answer = convert_review(review(desired, [obj]))
    assert answer["response"] == {"uid": UID, "result": {"status": "Failed", "message": message}}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("a string", "objects[37] (not an object): not a Kubernetes object"),
        (
            {"kind": "PackageRevision", "metadata": {"name": "x"}},
            "objects[37] (PackageRevision x <no apiVersion>): apiVersion must be group/version, got null",
        ),
        (
            {"apiVersion": "porch.kpt.dev/v1alpha1", "metadata": {"name": "x"}},
            "objects[37] (<no kind> x porch.kpt.dev/v1alpha1): kind must be a non-empty string",
        ),
        (
            {"apiVersion": "porch.kpt.dev/v1alpha1", "kind": "PackageRevision"},
            "objects[37] (PackageRevision <unnamed> porch.kpt.dev/v1alpha1): metadata must be an object",
        ),
        (
            package_revision("v1alpha1", name="bad.tasks", spec={"tasks": "init"}),
            "objects[37] (PackageRevision default/bad.tasks porch.kpt.dev/v1alpha1): "
            "spec.tasks must be an array, not a string",
        ),
    ],
)
def test_malformed_object_in_batch_names_its_index(review: Review, bad: Any, message: str) -> None:
    objects: list[Any] = mixed_batch()
    objects[37] = bad
    answer = convert_review(review("porch.kpt.dev/v1alpha2", objects))
    assert answer["response"] == {"uid": UID, "result": {"status": "Failed", "message": message}}


def test_converter_that_changes_metadata_fails(review: Review, monkeypatch: pytest.MonkeyPatch) -> None:
    key = ("porch.kpt.dev", "PackageRevision", "v1alpha1", "v1alpha2")

    def renaming(obj: Any) -> dict[str, Any]:
        return {**obj, "metadata": {**obj["metadata"], "name": "other"}}

    monkeypatch.setitem(CONVERTERS, key, renaming)
    answer = convert_review(review("porch.kpt.dev/v1alpha2", [package_revision("v1alpha1")]))
    assert answer["response"]["result"] == {
        "status": "Failed",
        "message": "objects[0] (PackageRevision default/blueprints.nginx.v1 porch.kpt.dev/v1alpha1): "
        "internal error: the converter changed metadata.name",
    }


def test_converter_that_raises_fails_the_review(review: Review, monkeypatch: pytest.MonkeyPatch) -> None:
    key = ("porch.kpt.dev", "PackageRevision", "v1alpha1", "v1alpha2")

    def broken(obj: Any) -> dict[str, Any]:
        raise KeyError("versions")

    monkeypatch.setitem(CONVERTERS, key, broken)
    answer = convert_review(review("porch.kpt.dev/v1alpha2", [package_revision("v1alpha1")]))
    assert answer["response"]["result"]["message"] == (
        "objects[0] (PackageRevision default/blueprints.nginx.v1 porch.kpt.dev/v1alpha1): "
        "internal error: KeyError: 'versions'"
    )


def request(**fields: Any) -> dict[str, Any]:
    base = {"uid": UID, "desiredAPIVersion": "porch.kpt.dev/v1alpha2", "objects": []}
    base.update(fields)
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": base}


@pytest.mark.parametrize(
    ("review", "message"),
    [
        (
            {"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "ConversionReview"},
            "expected an apiextensions.k8s.io/v1 ConversionReview, got apiextensions.k8s.io/v1beta1 ConversionReview",
        ),
        (
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"},
            "expected an apiextensions.k8s.io/v1 ConversionReview, got admission.k8s.io/v1 AdmissionReview",
        ),
        ([], "expected an apiextensions.k8s.io/v1 ConversionReview, got an array"),
        (
            {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"},
            "ConversionReview has no request object",
        ),
        (request(uid=""), "ConversionReview request has no uid"),
        (request(uid=None), "ConversionReview request has no uid"),
        (request(desiredAPIVersion=None), "ConversionReview request has no desiredAPIVersion"),
        (request(desiredAPIVersion="v1"), "ConversionReview request.desiredAPIVersion 'v1' is not group/version"),
        (request(objects=None), "ConversionReview request.objects must be an array"),
        (request(objects={"0": {}}), "ConversionReview request.objects must be an array"),
    ],
)
def test_unusable_envelope_raises(review: Any, message: str) -> None:
    with pytest.raises(MalformedReview) as raised:
        convert_review(review)
    assert str(raised.value) == message
