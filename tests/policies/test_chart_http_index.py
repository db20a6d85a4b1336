"""The chart index of a Helm HTTP repository (policies.chart_http_index): ociRef and InvalidChartReference."""

from __future__ import annotations

import pytest
import yaml

from policies import charts
from policies.chart_http_index import (
    InvalidRef,
    OciRef,
    desired_http_versions,
    read_index,
    split_oci_ref,
)
from policies.chart_index import MESSAGE_LIMIT


@pytest.mark.parametrize(
    ("url", "version", "expected"),
    [
        ("oci://ghcr.io/acme/podinfo:1.0.0", "1.0.0", OciRef("oci://ghcr.io/acme/podinfo:1.0.0")),
        ("oci://ghcr.io/acme/podinfo:stable", "1.0.0", OciRef("oci://ghcr.io/acme/podinfo:stable")),  # explicit wins
        ("oci://ghcr.io/acme/podinfo", "1.0.0", OciRef("oci://ghcr.io/acme/podinfo:1.0.0")),  # version as tag
        ("oci://localhost:5000/podinfo", "2.0.0", OciRef("oci://localhost:5000/podinfo:2.0.0")),  # a port is no tag
        ("oci://ghcr.io/acme/podinfo", "1.0.0+b.1", OciRef("oci://ghcr.io/acme/podinfo:1.0.0_b.1")),
        (
            "oci://ghcr.io/acme/podinfo@sha256:0f",
            "1.0.0",
            InvalidRef(
                'oci reference "oci://ghcr.io/acme/podinfo@sha256:0f" addresses a digest, '
                "which cannot be expressed as a chart version tag"
            ),
        ),
        ("oci://ghcr.io", "1.0.0", InvalidRef('oci reference "oci://ghcr.io" carries no chart path')),
        ("oci://localhost:5000/", "1.0.0", InvalidRef('oci reference "oci://localhost:5000/" carries no chart path')),
        (
            "oci://ghcr.io/acme/podinfo",
            "",
            InvalidRef('oci reference "oci://ghcr.io/acme/podinfo" carries no tag and no version to use instead'),
        ),
    ],
)
def test_split_oci_ref(url, version, expected):
    assert split_oci_ref(url, version) == expected


INDEX = {
    "apiVersion": "v1",
    "entries": {
        "podinfo": [
            {"version": "6.5.0", "urls": ["https://charts.example.com/podinfo-6.5.0.tgz"], "icon": "https://x/i.png"},
            {"version": "6.6.0", "urls": ["oci://ghcr.io/stefanprodan/charts/podinfo"]},
            {"version": "6.4.0", "urls": ["oci://ghcr.io/stefanprodan/charts/podinfo@sha256:" + "a" * 64]},
            {"version": "6.3.0", "urls": ["podinfo-6.3.0.tgz"]},  # relative: served by the repository itself
            {"urls": ["podinfo.tgz"]},  # no version: skipped
            "junk",
        ],
        "broken": "not a list",
        "empty": [],
    },
}


def test_read_index_records_oci_refs_and_invalid_references():
    charts_found = read_index(INDEX)
    assert sorted(charts_found) == ["empty", "podinfo"]
    podinfo = charts_found["podinfo"]
    assert podinfo.icon_url == "https://x/i.png"
    assert list(podinfo.versions) == [
        {"version": "6.6.0", "ociRef": "oci://ghcr.io/stefanprodan/charts/podinfo:6.6.0"},
        {"version": "6.5.0"},
        {
            "version": "6.4.0",
            "unavailableReason": "InvalidChartReference",
            "unavailableMessage": f'oci reference "oci://ghcr.io/stefanprodan/charts/podinfo@sha256:{"a" * 64}" '
            "addresses a digest, which cannot be expressed as a chart version tag",
        },
        {"version": "6.3.0"},
    ]
    assert charts_found["empty"].versions == ()


@pytest.mark.parametrize("document", [None, "text", {"entries": []}, {"entries": {7: []}}, {}])
def test_malformed_index_reads_as_empty(document):
    assert read_index(document) == {}


def test_invalid_reference_message_is_cut_on_a_character_boundary():
    long_path = "é" * 300
    (entry,) = read_index({"entries": {"c": [{"version": "1.0.0", "urls": [f"oci://r.example.com/{long_path}@x"]}]}})[
        "c"
    ].versions
    assert len(entry["unavailableMessage"].encode()) <= MESSAGE_LIMIT
    assert entry["unavailableMessage"].endswith("…")


def test_the_gate_reads_what_the_http_index_writes():
    """ociRef versions deploy (examined at deploy time), InvalidChartReference never does."""
    versions = read_index(INDEX)["podinfo"].versions
    usable = {e["version"]: charts.entry_usable(e, oci=False) for e in versions}
    assert usable == {"6.6.0": True, "6.5.0": True, "6.4.0": False, "6.3.0": True}


def test_referenced_version_dropped_from_the_index_is_kept_as_removed():
    existing = [{"version": "7.0.0", "ociRef": "oci://ghcr.io/a/podinfo:7.0.0"}, {"version": "6.0.0"}]
    listed = [{"version": "6.6.0"}]
    assert desired_http_versions(listed, existing, referenced={"7.0.0"}) == [
        {
            "version": "7.0.0",
            "ociRef": "oci://ghcr.io/a/podinfo:7.0.0",
            "unavailableReason": "RemovedFromRepository",
            "unavailableMessage": "tag 7.0.0 is no longer listed by the repository; "
            "kept while an addon references this version",
        },
        {"version": "6.6.0"},
    ]
    assert desired_http_versions(listed, existing, referenced=()) == [{"version": "6.6.0"}]
    assert desired_http_versions([{"version": "7.0.0"}], existing, referenced={"7.0.0"}) == [{"version": "7.0.0"}]


def test_aliased_entry_lists_are_read_once():
    """An index that aliases one big list under many charts costs one reading of the list."""
    text = "entries:\n  a: &big\n" + "".join(f"    - {{version: 1.0.{i}, urls: [x.tgz]}}\n" for i in range(200))
    text += "".join(f"  c{i}: *big\n" for i in range(200))
    charts_found = read_index(yaml.safe_load(text))
    assert len(charts_found) == 201
    assert charts_found["c7"] is charts_found["a"]
    assert len(charts_found["a"].versions) == 200
