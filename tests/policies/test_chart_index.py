"""policies.chart_index: manifest verdicts, tags to examine, the merge with prune protection, the order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.chart_index import (
    MSG_CONFIG,
    MSG_INDEX,
    MSG_NO_LAYER,
    MSG_REMOVED,
    Pending,
    Unsupported,
    Usable,
    Vanished,
    cut_message,
    desired_versions,
    examine_manifest,
    referenced_versions,
    tags_to_examine,
    version_of,
)

HELM_CONFIG = "application/vnd.cncf.helm.config.v1+json"
CONTENT = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
LEGACY = "application/tar+gzip"
PROV = "application/vnd.cncf.helm.chart.provenance.v1.prov"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"

USABLE = {"version": "1.0.0", "digest": "sha256:aa", "mediaType": CONTENT}
UNSUPPORTED = {"version": "1.0.0", "unavailableReason": "UnsupportedMediaType", "unavailableMessage": "x"}
PENDING = {"version": "1.0.0", "unavailableReason": "ResolvePending", "unavailableMessage": "503"}
REMOVED_USABLE = {"version": "1.0.0", "mediaType": CONTENT, "unavailableReason": "RemovedFromRepository"}
REMOVED_BARE = {"version": "1.0.0", "unavailableReason": "RemovedFromRepository"}
UNMIGRATED = {"version": "1.0.0"}


def manifest(config: str, *layers: str) -> bytes:
    doc = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": config, "digest": "sha256:c", "size": 1},
        "layers": [{"mediaType": m, "digest": f"sha256:{i}", "size": 1} for i, m in enumerate(layers)],
    }
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("media_type", "content", "expected"),
    [
        (OCI_MANIFEST, manifest(HELM_CONFIG, CONTENT), Usable(CONTENT, "sha256:d")),
        (OCI_MANIFEST, manifest(HELM_CONFIG, LEGACY), Usable(LEGACY, "sha256:d")),
        # priority comes from the list, not from the order of layers
        (OCI_MANIFEST, manifest(HELM_CONFIG, PROV, LEGACY, CONTENT), Usable(CONTENT, "sha256:d")),
        (OCI_INDEX, b'{"schemaVersion":2,"manifests":[]}', Unsupported(MSG_INDEX.format(media_type=OCI_INDEX))),
        (
            OCI_MANIFEST,
            manifest("application/vnd.oci.image.config.v1+json", LEGACY),
            Unsupported('config media type "application/vnd.oci.image.config.v1+json" is not a helm chart config'),
        ),
        (
            OCI_MANIFEST,
            manifest(HELM_CONFIG, "application/x-unknown", PROV),
            Unsupported(f"no supported chart layer, the artifact has [application/x-unknown, {PROV}]"),
        ),
    ],
)
def test_examine_manifest(media_type: str, content: bytes, expected: object) -> None:
    assert examine_manifest(media_type, content, "sha256:d") == expected


def test_unparsable_manifest_is_a_verdict() -> None:
    verdict = examine_manifest(OCI_MANIFEST, b"not json")
    assert isinstance(verdict, Unsupported)
    assert verdict.message.startswith("the manifest is not valid JSON of an OCI image manifest: ")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        # registry content is untrusted: a layers field that is not a list is "no supported layer", not a crash
        (json.dumps({"config": {"mediaType": HELM_CONFIG}, "layers": 5}).encode(), MSG_NO_LAYER.format(layers="")),
        (json.dumps({"config": {"mediaType": HELM_CONFIG}, "layers": True}).encode(), MSG_NO_LAYER.format(layers="")),
        (
            json.dumps({"config": {"mediaType": HELM_CONFIG}, "layers": [{"mediaType": 7}, "x"]}).encode(),
            MSG_NO_LAYER.format(layers="7"),
        ),
    ],
)
def test_malformed_manifest_is_a_verdict_not_a_crash(content: bytes, expected: str) -> None:
    assert examine_manifest(OCI_MANIFEST, content) == Unsupported(expected)


def test_deeply_nested_manifest_is_a_verdict_not_a_crash() -> None:
    verdict = examine_manifest(OCI_MANIFEST, b"[" * 100_000 + b"]" * 100_000)
    assert isinstance(verdict, Unsupported)
    assert verdict.message.startswith("the manifest is not valid JSON of an OCI image manifest: ")


def test_lone_surrogate_from_the_registry_is_a_verdict_with_a_writable_message() -> None:
    # JSON may escape a lone surrogate; str.encode() refuses it, so an unsanitized message crashes the
    # repository's pass on every sync (the tag never gets a verdict) and could not be sent to the API anyway
    content = b'{"config": {"mediaType": "x\\ud800y"}, "layers": []}'
    verdict = examine_manifest(OCI_MANIFEST, content)
    assert verdict == Unsupported('config media type "x?y" is not a helm chart config')
    entries = desired_versions(["1.0.0"], [], {"1.0.0": Unsupported("x\ud800" * 300)}, frozenset())
    message = entries[0]["unavailableMessage"]
    assert message == "x?" * 126 + "x…"
    assert len(message.encode()) <= 256


def test_message_templates_are_the_references() -> None:
    assert MSG_CONFIG.format(media_type="a") == 'config media type "a" is not a helm chart config'
    assert MSG_NO_LAYER.format(layers="a, b") == "no supported chart layer, the artifact has [a, b]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("short", "short"),
        ("a" * 256, "a" * 256),
        ("a" * 257, "a" * 253 + "…"),
        ("é" * 200, "é" * 126 + "…"),  # 2-byte characters: 253 bytes hold 126 of them, never half of one
    ],
)
def test_cut_message(text: str, expected: str) -> None:
    assert cut_message(text) == expected
    assert len(cut_message(text).encode()) <= 256


@pytest.mark.parametrize(
    ("tag", "version"),
    [
        ("1.0.0", "1.0.0"),
        ("1.0.0_build.7", "1.0.0+build.7"),
        ("v2.1.0-rc.1", "v2.1.0-rc.1"),
        ("latest", None),
        ("1.0", None),
        ("sha256-abc.sig", None),
        ("1.0.0.att", None),
        ("1.0.0.sbom", None),
    ],
)
def test_version_of(tag: str, version: str | None) -> None:
    assert version_of(tag) == version


@pytest.mark.parametrize(
    ("entry", "force", "examined"),
    [
        (None, False, True),
        (USABLE, False, False),
        (UNSUPPORTED, False, False),
        (PENDING, False, True),
        (UNMIGRATED, False, True),  # recorded before verdicts existed: the upgrade migration
        (REMOVED_USABLE, False, False),
        (REMOVED_BARE, False, True),
        (USABLE, True, True),
        (UNSUPPORTED, True, True),
    ],
)
def test_tags_to_examine(entry: dict[str, Any] | None, force: bool, examined: bool) -> None:
    existing = [entry] if entry else []
    assert tags_to_examine(["1.0.0", "latest", "1.0.0.sig"], existing, force) == (["1.0.0"] if examined else [])


def test_tags_to_examine_uses_helm_tag_rule() -> None:
    existing = [{"version": "1.0.0+b", "mediaType": CONTENT}]
    assert tags_to_examine(["1.0.0_b", "1.0.1_b"], existing) == ["1.0.1_b"]


REMOVED_MESSAGE = MSG_REMOVED.format(tag="1.0.0")


@pytest.mark.parametrize(
    ("case", "tags", "existing", "examined", "referenced", "expected"),
    [
        ("new usable", ["1.0.0"], [], {"1.0.0": Usable(CONTENT, "sha256:aa")}, set(), [USABLE]),
        ("known carried", ["1.0.0"], [USABLE], {}, set(), [USABLE]),
        (
            "new unsupported",
            ["1.0.0"],
            [],
            {"1.0.0": Unsupported("x")},
            set(),
            [UNSUPPORTED],
        ),
        ("read error, no verdict", ["1.0.0"], [], {"1.0.0": Pending("503")}, set(), [PENDING]),
        ("read error keeps a verdict (forced pass)", ["1.0.0"], [USABLE], {"1.0.0": Pending("503")}, set(), [USABLE]),
        (
            "read error keeps unsupported",
            ["1.0.0"],
            [UNSUPPORTED],
            {"1.0.0": Pending("503")},
            set(),
            [UNSUPPORTED],
        ),
        ("vanished mid-pass, unreferenced", ["1.0.0"], [], {"1.0.0": Vanished()}, set(), []),
        ("gone, unreferenced: pruned", [], [USABLE], {}, set(), []),
        (
            "gone, referenced: kept with media type",
            [],
            [USABLE],
            {},
            {"1.0.0"},
            [{**USABLE, "unavailableReason": "RemovedFromRepository", "unavailableMessage": REMOVED_MESSAGE}],
        ),
        (
            "vanished mid-pass, referenced",
            ["1.0.0"],
            [USABLE],
            {"1.0.0": Vanished()},
            {"1.0.0"},
            [{**USABLE, "unavailableReason": "RemovedFromRepository", "unavailableMessage": REMOVED_MESSAGE}],
        ),
        (
            "listed again: marker cleared",
            ["1.0.0"],
            [REMOVED_USABLE],
            {},
            {"1.0.0"},
            [{"version": "1.0.0", "mediaType": CONTENT}],
        ),
        (
            "referenced, now unsupported: keeps its media type",
            ["1.0.0"],
            [USABLE],
            {"1.0.0": Unsupported("x")},
            {"1.0.0"},
            [{**UNSUPPORTED, "digest": "sha256:aa", "mediaType": CONTENT}],
        ),
        (
            "unreferenced, now unsupported (forced)",
            ["1.0.0"],
            [USABLE],
            {"1.0.0": Unsupported("x")},
            set(),
            [UNSUPPORTED],
        ),
        ("referenced but never known: nothing invented", [], [], {}, {"1.0.0"}, []),
        ("non-chart tags ignored", ["latest", "x.sig"], [], {}, set(), []),
    ],
)
def test_desired_versions(
    case: str,
    tags: list[str],
    existing: list[dict[str, Any]],
    examined: dict[str, Any],
    referenced: set[str],
    expected: list[dict[str, Any]],
) -> None:
    assert desired_versions(tags, existing, examined, frozenset(referenced)) == expected, case


def test_order_is_semver_descending_and_independent_of_input_order() -> None:
    tags = ["1.10.0", "1.2.0", "2.0.0-rc.1", "2.0.0", "1.2.0_b", "0.9.0"]
    examined = {t: Usable(CONTENT) for t in tags}
    forward = desired_versions(tags, [], examined, frozenset())
    backward = desired_versions(list(reversed(tags)), [], examined, frozenset())
    assert [v["version"] for v in forward] == ["2.0.0", "2.0.0-rc.1", "1.10.0", "1.2.0+b", "1.2.0", "0.9.0"]
    assert forward == backward
    # an unchanged catalog yields the same list: the shell writes nothing
    assert desired_versions(tags, forward, {}, frozenset()) == forward


def test_unparsable_old_entries_sort_last() -> None:
    existing = [{"version": "weird", "mediaType": CONTENT}, USABLE]
    assert [v["version"] for v in desired_versions([], existing, {}, frozenset({"weird", "1.0.0"}))] == [
        "1.0.0",
        "weird",
    ]


def addon(spec: dict[str, str], last: dict[str, str] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "a"}, "spec": {"chart": spec}}
    if last is not None:
        obj["status"] = {"lastAppliedChart": last}
    return obj


REF = {"helmClusterAddonRepository": "repo", "helmClusterAddonChart": "podinfo"}


@pytest.mark.parametrize(
    ("addons", "expected"),
    [
        ([addon({**REF, "version": "1.0.0"})], {"1.0.0"}),
        ([addon({**REF, "version": "2.0.0"}, {**REF, "version": "1.0.0"})], {"1.0.0", "2.0.0"}),
        ([addon({**REF, "version": "2.0.0"}, {"version": "1.0.0"})], {"1.0.0", "2.0.0"}),  # last-applied inherits
        ([addon({**REF, "helmClusterAddonChart": "other", "version": "1.0.0"})], set()),
        (
            [addon({**REF, "version": "2.0.0"}, {**REF, "helmClusterAddonChart": "other", "version": "1.0.0"})],
            {"2.0.0"},
        ),
        ([addon({**REF})], set()),  # no version: latest, nothing pinned
    ],
)
def test_referenced_versions(addons: list[dict[str, Any]], expected: set[str]) -> None:
    assert referenced_versions(addons, "repo", "podinfo") == expected
