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
