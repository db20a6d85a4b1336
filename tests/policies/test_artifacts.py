"""Where a ComponentVersion's artifact lives: OCM naming, repository split, digest label, unresolved reasons."""

from __future__ import annotations

from typing import Any

import pytest

from policies.artifacts import (
    DIGEST_LABEL,
    ArtifactRef,
    Unresolved,
    UnresolvedReason,
    _fnv1a32,
    artifact_of,
    component_descriptor_repository,
    descriptor_repository,
    digest_from_label,
    is_managed_repository,
    ocm_tag,
    ocm_version,
    resolve_artifact,
    sanitize_with_hash,
    split_component_descriptor_repository,
)
from policies.kinds import COMPONENT
from policies.view import MemoryView

NS = "team-a"
HEX = "0123456789abcdef" * 4
CD = "component-descriptors"


def component(name: str = "opendefense-cloud-ocm-demo", **spec: Any) -> dict[str, Any]:
    base = {"scheme": "https", "registry": "registry.example:5000", "repository": "test/opendefense.cloud/ocm-demo"}
    return {"metadata": {"name": name, "namespace": NS}, "spec": {**base, **spec}}


def cv(tag: str = "v26.4.2", comp: str = "opendefense-cloud-ocm-demo", labels: dict[str, str] | None = None) -> dict:
    return {
        "metadata": {"name": "demo", "namespace": NS, "labels": labels or {}},
        "spec": {"componentRef": {"name": comp}, "tag": tag},
    }


@pytest.mark.parametrize(
    ("version", "tag"),
    [("1.2.3+ci.42", "1.2.3.build-ci.42"), ("v26.4.2", "v26.4.2"), ("1.0.0-rc.1+b.2", "1.0.0-rc.1.build-b.2")],
)
def test_ocm_tag_round_trip(version, tag):
    assert ocm_tag(version) == tag
    assert ocm_version(tag) == version


def test_descriptor_repository_helpers():
    assert component_descriptor_repository("ocm", "example.com/demo") == "ocm/component-descriptors/example.com/demo"
    assert component_descriptor_repository("", "example.com/demo") == "component-descriptors/example.com/demo"
    assert split_component_descriptor_repository("ocm/component-descriptors/example.com/demo") == (
        "ocm",
        "example.com/demo",
    )
    assert split_component_descriptor_repository("charts/demo") is None
    assert split_component_descriptor_repository("ocm/component-descriptors") is None
    assert is_managed_repository("component-descriptors/x.io/y")
    assert not is_managed_repository("charts/component-descriptorsx/y")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("opendefense.cloud/ocm-demo", "opendefense-cloud-ocm-demo"),
        ("My.Component", "my-component"),
        ("--x..y--", "x-y"),
    ],
)
def test_sanitize_with_hash_matches_discovery(name, expected):
    assert sanitize_with_hash(name) == expected


@pytest.mark.parametrize(("data", "value"), [(b"", 0x811C9DC5), (b"a", 0xE40C292C), (b"foobar", 0xBF9CF968)])
def test_fnv1a32_published_vectors(data, value):
    assert _fnv1a32(data) == value


def test_long_names_keep_57_characters_and_the_hash_of_the_original():
    name = "Example.com/" + "a" * 60
    assert sanitize_with_hash(name) == "example-com-" + "a" * 45 + "-" + format(_fnv1a32(name.encode()), "x")
    assert len(sanitize_with_hash(name)) == 57 + 1 + 8


@pytest.mark.parametrize(
    ("repository", "component_name", "expected"),
    [
        # Split by the Component's name (discovery's Components), even when the base has dots.
        (
            "test/opendefense.cloud/ocm-demo",
            "opendefense-cloud-ocm-demo",
            "test/component-descriptors/opendefense.cloud/ocm-demo",
        ),
        ("my.org/ocm/example.com/demo", "example-com-demo", "my.org/ocm/component-descriptors/example.com/demo"),
        # No name match: before the first DNS-domain segment that has a path after it.
        ("test/opendefense.cloud/ocm-demo", "hand-written", "test/" + CD + "/opendefense.cloud/ocm-demo"),
        ("example.com/demo", "", "component-descriptors/example.com/demo"),
        # Already a descriptor repository: as it is.
        ("ocm/component-descriptors/example.com/demo", "x", "ocm/component-descriptors/example.com/demo"),
        # Nothing to split on.
        ("test/demo", "other", None),
        ("test/example.com", "", None),
    ],
)
def test_descriptor_repository_split(repository, component_name, expected):
    assert descriptor_repository(repository, component_name) == expected


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        (HEX, ("sha256:" + HEX, "")),
        ("sha256:" + HEX, ("sha256:" + HEX, "")),
        (HEX[:63], (None, HEX[:63])),  # what discovery writes: one digit short, a prefix only
        ("", (None, "")),
        ("not-hex", (None, "")),
    ],
)
def test_digest_label(label, expected):
    assert digest_from_label(label) == expected


def test_resolves_by_tag_with_the_ocm_rule_and_tls():
    ref = resolve_artifact(cv(tag="1.2.3+ci.42"), component())
    assert ref == ArtifactRef(
        "registry.example:5000", "test/component-descriptors/opendefense.cloud/ocm-demo", "1.2.3.build-ci.42"
    )
    assert ref.reference == "1.2.3.build-ci.42"
    assert str(ref) == "registry.example:5000/test/component-descriptors/opendefense.cloud/ocm-demo:1.2.3.build-ci.42"
    assert ref.plain_http is False


def test_full_digest_label_addresses_the_manifest_by_digest():
    ref = resolve_artifact(cv(labels={DIGEST_LABEL: HEX}), component(scheme="http"))
    assert isinstance(ref, ArtifactRef)
    assert ref.digest == "sha256:" + HEX
    assert ref.reference == "sha256:" + HEX
    assert str(ref).endswith("@sha256:" + HEX)
    assert ref.plain_http is True
    assert ref.matches("sha256:" + HEX)
    assert not ref.matches("sha256:" + "f" * 64)


def test_short_digest_label_looks_up_by_tag_and_compares_the_prefix():
    ref = resolve_artifact(cv(labels={DIGEST_LABEL: HEX[:63]}), component())
    assert isinstance(ref, ArtifactRef)
    assert (ref.digest, ref.reference, ref.digest_prefix) == (None, "v26.4.2", HEX[:63])
    assert ref.matches("sha256:" + HEX)
    assert not ref.matches("sha256:" + "f" * 64)
    assert ref.matches(None)


@pytest.mark.parametrize(
    ("the_cv", "the_component", "reason", "message"),
    [
        (cv(comp=""), component(), UnresolvedReason.NO_COMPONENT_REF, "spec.componentRef.name is empty"),
        (cv(), None, UnresolvedReason.COMPONENT_MISSING, "Component team-a/opendefense-cloud-ocm-demo does not exist"),
        (
            cv(),
            component(registry=""),
            UnresolvedReason.NO_REGISTRY,
            "Component team-a/opendefense-cloud-ocm-demo has an empty spec.registry",
        ),
        (
            cv(),
            component(scheme="oci"),
            UnresolvedReason.UNKNOWN_SCHEME,
            "Component team-a/opendefense-cloud-ocm-demo has spec.scheme 'oci'; expected http or https",
        ),
        (
            cv(),
            component(repository=""),
            UnresolvedReason.NO_REPOSITORY,
            "Component team-a/opendefense-cloud-ocm-demo has an empty spec.repository",
        ),
        (
            cv(),
            component(repository="Test/Example.com/Demo"),
            UnresolvedReason.BAD_REPOSITORY,
            "Component team-a/opendefense-cloud-ocm-demo spec.repository 'Test/Example.com/Demo' "
            "gives no valid component-descriptor repository",
        ),
        (cv(tag=""), component(), UnresolvedReason.NO_TAG, "spec.tag is empty"),
        (
            cv(tag="1.0/evil"),
            component(),
            UnresolvedReason.BAD_TAG,
            "spec.tag '1.0/evil' is not a valid OCI tag once '+' becomes '.build-'",
        ),
    ],
)
def test_unresolved_reasons(the_cv, the_component, reason, message):
    got = resolve_artifact(the_cv, the_component)
    assert got == Unresolved("team-a/demo", reason, message)
    assert str(got) == f"ComponentVersion team-a/demo: {message}"


def test_artifact_of_reads_the_component_from_the_same_namespace_only():
    view = MemoryView()
    other = component()
    other["metadata"]["namespace"] = "team-b"
    view.put(COMPONENT, other)
    assert isinstance(artifact_of(cv(), view), Unresolved)
    view.put(COMPONENT, component())
    assert isinstance(artifact_of(cv(), view), ArtifactRef)
