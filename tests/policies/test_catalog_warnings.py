"""Catalog warnings fit the 120 characters kubectl shows: long names are shortened in the middle.

The server cuts a longer warning at its end, which loses the way out ("it will not resolve").
Names as discovery writes them (``opendefense-cloud-ocm-demo-v26-4-2``) in an ordinary namespace
already overflowed several warnings.
"""

from __future__ import annotations

import pytest

from policies.catalog import WARN_CV_NOT_FOUND, WARN_CV_UNCHECKED, WARN_CV_UNKNOWN
from policies.catalog_labels import WARN_COMPONENT_LABEL_SKIPPED
from policies.catalog_refs import WARN_NOT_GRANTED
from policies.catalog_registry import WARN_BINDING_REGISTRY_NOT_FOUND, WARN_TARGET_REGISTRY_NOT_FOUND
from policies.decision import MAX_WARNING, fit_warning
from policies.model import Operation
from tests.policies.test_catalog_support import (
    allowed,
    changed,
    component_version,
    context,
    mutate_all,
    release,
    request,
    validate,
)

CV = "opendefense-cloud-ocm-demo-v26-4-2"
SHARED = "solar-system"


@pytest.mark.parametrize(
    ("objs", "expected"),
    [
        pytest.param(
            [component_version(CV, SHARED)],
            "no ReferenceGrant in solar-system admits Release from team-a to ComponentVersion opendefen…-v26-4-2; "
            "it will not resolve",
            id="not-granted",
        ),
        pytest.param(
            [component_version(CV, SHARED, available=("Unknown", "CheckFailed", "503"))],
            "no ReferenceGrant in solar-system admits Release from team-a to ComponentVersion opendefen…-v26-4-2; "
            "it will not resolve",
            id="not-granted-and-unknown",
        ),
    ],
)
def test_release_warnings_with_discovery_names_fit(objs, expected):
    outcome = validate(request(Operation.CREATE, release(cv=CV, cv_ns=SHARED)), context(*objs))
    assert expected in outcome.warnings
    assert all(len(w) <= MAX_WARNING for w in outcome.warnings)


def test_unknown_availability_warning_with_a_discovery_name_fits():
    rel = release(cv=CV, cv_ns=SHARED)
    cv = component_version(CV, SHARED, available=("Unknown", "CheckFailed", "503"))
    outcome = validate(request(Operation.CREATE, changed(rel, "metadata", "namespace", value=SHARED)), context(cv))
    assert outcome == allowed(
        "ComponentVersion solar-system/opend…d-ocm-demo-v26-4-2 availability is Unknown (CheckFailed); "
        "the binding may not render"
    )


def test_label_warning_for_a_name_too_long_for_a_label_fits():
    cv = component_version(component_name="c" * 30 + "d" * 34)
    _, warnings = mutate_all(request(Operation.CREATE, cv), context())
    assert warnings == [
        "label solar.opendefense.cloud/component not added: Component name ccccccccccccc…ddddddddddddd "
        "is not a valid label value"
    ]


LONGEST_KEY = "n" * 63 + "/" + "x" * 253


@pytest.mark.parametrize(
    ("template", "fields"),
    [
        (WARN_CV_NOT_FOUND, {"cv": LONGEST_KEY}),
        (WARN_CV_UNCHECKED, {"cv": LONGEST_KEY}),
        (WARN_CV_UNKNOWN, {"cv": LONGEST_KEY, "reason": "R" * 1024}),
        (
            WARN_NOT_GRANTED,
            {
                "to_ns": "n" * 63,
                "from_kind": "RegistryBinding",
                "from_ns": "m" * 63,
                "to_kind": "Target",
                "to_name": "x" * 253,
            },
        ),
        (WARN_TARGET_REGISTRY_NOT_FOUND, {"registry": LONGEST_KEY}),
        (WARN_BINDING_REGISTRY_NOT_FOUND, {"registry": LONGEST_KEY}),
        (WARN_COMPONENT_LABEL_SKIPPED, {"component": "c" * 253}),
    ],
)
def test_every_catalog_warning_fits_with_the_longest_names(template, fields):
    text = fit_warning(template, **fields)
    assert len(text) <= MAX_WARNING
    assert text.endswith(template.rsplit("}", 1)[-1])  # the fixed text after the last name stays whole


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"cv": "team-a/demo-v1"}, "ComponentVersion team-a/demo-v1 not found yet; the Release waits until it exists"),
        (
            {"cv": "x" * 100},
            "ComponentVersion " + "x" * 27 + "…" + "x" * 26 + " not found yet; the Release waits until it exists",
        ),
    ],
)
def test_fit_warning_leaves_short_text_alone_and_shortens_names_in_the_middle(fields, expected):
    assert fit_warning(WARN_CV_NOT_FOUND, **fields) == expected
    assert len(expected) <= MAX_WARNING
