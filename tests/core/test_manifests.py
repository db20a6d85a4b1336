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


def test_deployment_arguments_are_accepted_by_the_cli() -> None:
    from webhook.cli import _parser

    (deployment,) = documents("Deployment")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["server", "sidecar"]
    for container in containers:
        _parser().parse_args(container["args"])  # exits (SystemExit) on an unknown flag


def test_serving_certificate_matches_the_injection_annotation_and_the_mounted_secret() -> None:
    serving = next(c for c in documents("Certificate") if c["metadata"]["name"] == "catalog-warden-serving")
    (deployment,) = documents("Deployment")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == serving["spec"]["secretName"]
    assert "catalog-warden.catalog-warden.svc" in serving["spec"]["dnsNames"]
    injected = {
        d["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
        for d in documents(kind)
    }
    assert injected == {f"catalog-warden/{serving['metadata']['name']}"}


def test_rbac_lets_the_cache_list_and_watch_every_kind_it_caches() -> None:
    from webhook.kube.cache import DEFAULT_KINDS
    from webhook.kube.client import RESOURCES

    (role,) = documents("ClusterRole")
    allowed = {
        (group, resource)
        for rule in role["rules"]
        if {"list", "watch"} <= set(rule["verbs"])
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    for kind in DEFAULT_KINDS:
        res = RESOURCES[kind]
        assert (res.kind.group, res.plural) in allowed, f"the ClusterRole does not let the cache watch {kind}"
