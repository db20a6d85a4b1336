"""The rule tables, identities and the admission evaluator's composition (no HTTP)."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime

import jsonpatch
import pytest

from policies.config import PolicyConfig
from policies.decision import allow, deny, mutate
from policies.identity import Identities, matches
from policies.kinds import CATALOG_KINDS, COMPONENT_VERSION, PACKAGE_REVISION, RELEASE
from policies.model import AdmissionRequest, Operation, UserInfo
from policies.rules import Family, Rule, RuleTable
from policies.view import MemoryView
from webhook.admission import Admission

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("username", "expected"),
    [
        ("system:serviceaccount:kube-system:foo", True),
        ("system:serviceaccount:kube-systemx:foo", False),
        ("system:serviceaccount:kube-system:", True),  # as upstream CEL startsWith: the bare prefix matches
        ("system:serviceaccount:d8-operator-helm:helm-controller", True),
        ("system:serviceaccount:d8-operator-helm:helm-controller-2", False),
        ("admin", False),
    ],
)
def test_identity_patterns(username: str, expected: bool) -> None:
    assert matches(username, Identities().chartModules) is expected


SA = "system:serviceaccount:"


@pytest.mark.parametrize(
    ("username", "expected"),
    [
        pytest.param(SA + "solar-system:solar-discovery", True, id="chart-default-release"),
        pytest.param(SA + "solar:solar-discovery", True, id="another-namespace"),
        pytest.param(SA + "team-a:prod-solar-discovery", True, id="release-prefixed"),
        pytest.param(SA + "team-a:eu-west-1-solar-discovery", True, id="release-with-dashes"),
        pytest.param(SA + "team-a:solar-discovery-evil", False, id="suffixed"),
        pytest.param(SA + "team-a:solar-discoveryx", False, id="longer-name"),
        pytest.param(SA + "team-a:xsolar-discovery", False, id="no-dash-before"),
        pytest.param(SA + "team-a:-solar-discovery", False, id="empty-release"),
        pytest.param(SA + "team-a:default", False, id="unrelated-account"),
        pytest.param(SA + ":solar-discovery", False, id="empty-namespace"),
        pytest.param(SA + "a:b:solar-discovery", False, id="wildcard-never-spans-a-colon"),
        pytest.param(SA + "team-a:x:y-solar-discovery", False, id="release-never-spans-a-colon"),
        pytest.param("solar-discovery", False, id="bare-user"),
        pytest.param("system:serviceaccounts:team-a:solar-discovery", False, id="group-like-name"),
        pytest.param("system:serviceaccount:team-a:solar-discovery ", False, id="trailing-space"),
    ],
)
def test_the_default_observers_match_solar_discovery_in_any_namespace(username: str, expected: bool) -> None:
    assert Identities().is_observer(UserInfo(username)) is expected


@pytest.mark.parametrize(
    ("entry", "username", "expected"),
    [
        pytest.param("system:serviceaccount:*:arc", "system:serviceaccount:x:arc", True, id="namespace-wildcard"),
        pytest.param("system:serviceaccount:arc-*:conduit", "system:serviceaccount:arc-eu:conduit", True, id="infix"),
        pytest.param(
            "system:serviceaccount:arc-*:conduit", "system:serviceaccount:arc-:conduit", False, id="one-or-more"
        ),
        pytest.param("user.*", "user.name", True, id="dot-is-literal-and-star-wild"),
        pytest.param("user.*", "userxname", False, id="dot-is-not-any-character"),
        pytest.param("a?b[c]", "a?b[c]", True, id="no-other-special-characters"),
        pytest.param("a?b[c]", "axbc", False, id="question-mark-is-literal"),
        pytest.param("system:serviceaccount:ns:", "system:serviceaccount:ns:x:y", True, id="prefix-unchanged"),
        pytest.param("exact", "exact2", False, id="exact-unchanged"),
    ],
)
def test_identity_entry_forms(entry: str, username: str, expected: bool) -> None:
    assert matches(username, (entry,)) is expected


@pytest.mark.parametrize(
    ("key", "entries", "error"),
    [
        pytest.param(
            "observers",
            ["system:serviceaccount:*:solar-discovery", ""],
            "identities.observers.1: Value error, an identity entry must not be empty",
            id="empty",
        ),
        pytest.param(
            "packageControllers",
            ["system:serviceaccount:*:"],
            "identities.packageControllers.0: Value error, 'system:serviceaccount:*:' is both a pattern ('*') and a "
            "prefix (ends in ':'); write either a whole username with '*' for a namespace or name, or a prefix "
            "without '*'",
            id="pattern-and-prefix",
        ),
        pytest.param(
            "chartModules",
            ["system:serviceaccount:d8-**"],
            "identities.chartModules.0: Value error, 'system:serviceaccount:d8-**' has '**'; one '*' already "
            "matches a whole namespace or name",
            id="double-star",
        ),
    ],
)
def test_bad_identity_entries_are_refused_at_load_naming_the_key(key: str, entries: list[str], error: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as raised:
        PolicyConfig.model_validate({"identities": {key: entries}})
    first = raised.value.errors()[0]
    assert f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}" == error


def test_groups_never_grant_an_identity() -> None:
    assert not Identities().is_chart_module(UserInfo("alice", ("system:masters",)))


def test_rule_for_a_foreign_kind_is_refused_at_build_time() -> None:
    fam = Family("catalog", CATALOG_KINDS, (Rule("x.y", PACKAGE_REVISION, frozenset({Operation.CREATE}), allow),))
    with pytest.raises(
        ValueError, match=re.escape("rule x.y guards PackageRevision.porch.kpt.dev, which family catalog")
    ):
        RuleTable.build(fam)


def cv(**labels: str) -> dict:
    return {"metadata": {"name": "cv", "namespace": "a", "labels": labels}, "spec": {"tag": "v1"}}


def label_rule(key: str, value: str):
    def fn(req, ctx):
        desired = copy.deepcopy(dict(req.object))
        desired["metadata"].setdefault("labels", {})[key] = value
        return mutate(req.object, desired)

    return fn


def admission_with(*rules: Rule) -> Admission:
    table = RuleTable.build(Family("catalog", CATALOG_KINDS, rules))
    return Admission(lambda: MemoryView(), PolicyConfig(), clock=lambda: NOW, tables={"catalog": table})


def request(op: Operation, obj: dict | None, old: dict | None = None) -> AdmissionRequest:
    return AdmissionRequest("u", op, COMPONENT_VERSION, "v1alpha1", "cv", "a", "", obj, old, UserInfo("alice"))


def test_mutating_rules_chain_and_one_patch_reproduces_the_result() -> None:
    ops = frozenset({Operation.CREATE, Operation.DELETE})
    first = Rule("t.first", COMPONENT_VERSION, ops, label_rule("a", "1"), mutating=True)
    seen: list[dict] = []

    def second(req, ctx):
        seen.append(req.object)
        return label_rule("b", req.object["metadata"]["labels"]["a"] + "2")(req, ctx)

    adm = admission_with(first, Rule("t.second", COMPONENT_VERSION, ops, second, mutating=True))
    original = cv()
    verdict = adm.evaluate("catalog", True, request(Operation.CREATE, original))
    assert seen[0]["metadata"]["labels"] == {"a": "1"}  # the second rule saw the first one's output
    assert jsonpatch.apply_patch(original, verdict.patch)["metadata"]["labels"] == {"a": "1", "b": "12"}
    assert original == cv()  # the request object is never mutated
    again = adm.evaluate("catalog", True, request(Operation.CREATE, jsonpatch.apply_patch(original, verdict.patch)))
    assert again.patch is None  # idempotent
    deleted = adm.evaluate("catalog", True, request(Operation.DELETE, None, original))
    assert deleted.patch is None


def test_first_denial_wins_and_earlier_warnings_are_dropped_with_it() -> None:
    ops = frozenset({Operation.CREATE})
    adm = admission_with(
        Rule("t.warn", RELEASE, ops, lambda r, c: allow("careful"), needs_view=False),
        Rule("t.deny", RELEASE, ops, lambda r, c: deny("no"), needs_view=False),
        Rule("t.never", RELEASE, ops, lambda r, c: pytest.fail("ran after a denial"), needs_view=False),
    )
    req = AdmissionRequest("u", Operation.CREATE, RELEASE, "v1alpha1", "r", "a", "", {"metadata": {"name": "r"}})
    verdict = adm.evaluate("catalog", False, req)
    assert (verdict.decision.allowed, verdict.decision.message, verdict.rule) == (
        False,
        "Release a/r denied by t.deny: no",
        "t.deny",
    )


def test_switched_off_family_admits_everything() -> None:
    ops = frozenset({Operation.CREATE})
    table = RuleTable.build(Family("catalog", CATALOG_KINDS, (Rule("t.deny", RELEASE, ops, lambda r, c: deny("no")),)))
    config = PolicyConfig.model_validate({"families": {"catalog": False}})
    adm = Admission(lambda: MemoryView(), config, tables={"catalog": table})
    req = AdmissionRequest("u", Operation.CREATE, RELEASE, "v1alpha1", "r", "a", "", {"metadata": {"name": "r"}})
    assert adm.evaluate("catalog", False, req).decision.allowed
