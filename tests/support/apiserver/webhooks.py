"""Webhook configurations read from manifests, and which webhook a request matches.

Mirrors k8s.io/apiserver/pkg/admission/plugin/webhook: `service` client configs become
`webhook_base_url + path` and the caBundle is the test CA (what envtest does and what cert-manager's
`inject-ca-from` does in a cluster). Matching follows rules.Matcher, the namespace and object
selector matchers, and matchPolicy Equivalent (another served version of the same resource).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tests.support.apiserver.resources import ResourceType
from tests.support.apiserver.selectors import Selector, from_label_selector, matches

CONFIG_KINDS = {"ValidatingWebhookConfiguration": "validating", "MutatingWebhookConfiguration": "mutating"}


@dataclass(frozen=True)
class Rule:
    groups: tuple[str, ...]
    versions: tuple[str, ...]
    operations: tuple[str, ...]
    resources: tuple[str, ...]
    scope: str

    def matches(self, group: str, version: str, operation: str, plural: str, sub: str, namespaced: bool) -> bool:
        return (
            _any(self.groups, group)
            and _any(self.versions, version)
            and _any(self.operations, operation)
            and any(_resource_matches(spec, plural, sub) for spec in self.resources)
            and (self.scope == "*" or self.scope == ("Namespaced" if namespaced else "Cluster"))
        )


def _any(allowed: tuple[str, ...], value: str) -> bool:
    return "*" in allowed or value in allowed


def _resource_matches(spec: str, plural: str, sub: str) -> bool:
    """`x` matches x only, `x/status` its status, `*` every resource (no subresources), `*/*` everything."""
    resource, _, subresource = spec.partition("/")
    return resource in ("*", plural) and subresource in ("*", sub)


@dataclass(frozen=True)
class Webhook:
    """One entry of `webhooks:` in a (Validating|Mutating)WebhookConfiguration."""

    name: str
    type: str  # "validating" or "mutating"
    url: str
    rules: tuple[Rule, ...]
    failure_policy: str
    timeout_seconds: int
    match_policy: str
    side_effects: str
    namespace_selector: Selector
    object_selector: Selector
    review_versions: tuple[str, ...]

    def match_version(
        self, resource: ResourceType, version: str, operation: str, sub: str, namespaced_request: bool
    ) -> str | None:
        """The version the request is sent in: its own when a rule names it, else an equivalent one (or None)."""
        candidates = [version]
        if self.match_policy == "Equivalent":
            candidates += [v for v in resource.versions if v != version]
        for candidate in candidates:
            if any(
                rule.matches(resource.group, candidate, operation, resource.plural, sub, namespaced_request)
                for rule in self.rules
            ):
                return candidate
        return None

    def selects_namespace(self, labels: dict[str, str] | None) -> bool:
        return matches(self.namespace_selector, labels)

    def selects_object(self, *objects: dict[str, Any] | None) -> bool:
        """objectSelector: matches when the new or the old object's labels match."""
        if not self.object_selector:
            return True
        present = [o for o in objects if o is not None]
        return any(matches(self.object_selector, (o.get("metadata") or {}).get("labels")) for o in present)


def _client_url(client_config: dict[str, Any], webhook_base_url: str | None) -> str:
    if "url" in client_config:
        return client_config["url"]
    path = (client_config.get("service") or {}).get("path") or "/"
    return (webhook_base_url or "https://webhook-base-url-not-configured.invalid").rstrip("/") + path


def _rule(spec: dict[str, Any]) -> Rule:
    return Rule(
        groups=tuple(spec.get("apiGroups", ())),
        versions=tuple(spec.get("apiVersions", ())),
        operations=tuple(spec.get("operations", ())),
        resources=tuple(spec.get("resources", ())),
        scope=spec.get("scope", "*"),
    )


def load_webhooks(documents: Iterable[dict[str, Any]], webhook_base_url: str | None) -> list[Webhook]:
    """Webhooks of every configuration document, mutating before validating, each in manifest order.

    kube-apiserver orders configurations by name and webhooks as listed; we keep that order.
    """
    configs = sorted(
        (d for d in documents if d.get("kind") in CONFIG_KINDS),
        key=lambda d: (CONFIG_KINDS[d["kind"]] != "mutating", d["metadata"]["name"]),
    )
    hooks = []
    for config in configs:
        for spec in config.get("webhooks") or []:
            hooks.append(
                Webhook(
                    name=spec["name"],
                    type=CONFIG_KINDS[config["kind"]],
                    url=_client_url(spec.get("clientConfig") or {}, webhook_base_url),
                    rules=tuple(_rule(r) for r in spec.get("rules") or ()),
                    failure_policy=spec.get("failurePolicy", "Fail"),
                    timeout_seconds=int(spec.get("timeoutSeconds", 10)),
                    match_policy=spec.get("matchPolicy", "Equivalent"),
                    side_effects=spec.get("sideEffects", "None"),
                    namespace_selector=from_label_selector(spec.get("namespaceSelector")),
                    object_selector=from_label_selector(spec.get("objectSelector")),
                    review_versions=tuple(spec.get("admissionReviewVersions", ("v1",))),
                )
            )
    return hooks
