"""The webhook configurations send every request a rule needs, to the right path."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml

from policies.families import FAMILIES
from policies.rules import Rule

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


@functools.cache
def documents(kind: str) -> list[dict]:
    docs = []
    for path in sorted(MANIFESTS.rglob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and d.get("kind") == kind]
    return docs


@functools.cache
def plurals() -> dict[tuple[str, str], str]:
    return {
        (crd["spec"]["group"], crd["spec"]["names"]["kind"]): crd["spec"]["names"]["plural"]
        for crd in documents("CustomResourceDefinition")
    }


def routed(config_kind: str, path: str, group: str, resource: str, operation: str) -> bool:
    for config in documents(config_kind):
        for hook in config["webhooks"]:
            if hook["clientConfig"]["service"]["path"] != path:
                continue
            for rule in hook["rules"]:
                if group in rule["apiGroups"] and resource in rule["resources"] and operation in rule["operations"]:
                    return True
    return False


RULES = [(family, rule) for family, fam in FAMILIES.items() for rule in fam.rules]


@pytest.mark.parametrize(("family", "rule"), RULES, ids=[r.name for _, r in RULES])
def test_every_rule_is_reachable(family: str, rule: Rule) -> None:
    plural = plurals()[(rule.kind.group, rule.kind.kind)]
    config = "MutatingWebhookConfiguration" if rule.mutating else "ValidatingWebhookConfiguration"
    path = f"/{'mutate' if rule.mutating else 'validate'}/{family}"
    for op in rule.operations:
        for sub in rule.sub_resources:
            resource = f"{plural}/{sub}" if sub else plural
            assert routed(config, path, rule.kind.group, resource, op.value), (
                f"{rule.name}: {op.value} {resource} is not sent to {path}"
            )


def test_every_crd_kind_belongs_to_a_family() -> None:
    served = {(gk.group, gk.kind) for fam in FAMILIES.values() for gk in fam.kinds}
    assert set(plurals()) <= served
