"""Kubernetes RBAC, evaluated over manifests: who may do what, as kube-apiserver's authorizer decides.

The apiserver double authorizes nothing, so the manifests' Roles and bindings are checked here:
:class:`Rbac` answers ``allows(user, Attributes)`` with the rules of
``k8s.io/apiserver/pkg/authorization`` and ``plugin/pkg/auth/authorizer/rbac`` (a ClusterRoleBinding
grants everywhere, a RoleBinding only in its namespace; ``resourceNames`` never matches a request
without a name, such as ``create`` or ``list``; ``*`` matches anything), and
:func:`attributes` turns a request line (method, path, query) into what the authorizer sees, as
``RequestInfoFactory`` does. Only service-account and user subjects: the warden's manifests bind no
group.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True, slots=True)
class Attributes:
    verb: str
    group: str
    resource: str
    """The plural, with ``/subresource`` when there is one (as RBAC rules name it)."""
    namespace: str = ""
    name: str = ""

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else " (cluster-wide)"
        named = f" {self.name}" if self.name else ""
        return f"{self.verb} {self.group or 'core'}/{self.resource}{named}{where}"


def attributes(method: str, path: str, params: Mapping[str, str]) -> Attributes:
    """What the authorizer is asked for one resource request (``/api/v1/...``, ``/apis/g/v/...``)."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if parts[:1] == ["api"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"]:
        group, rest = parts[1], parts[3:]
    else:
        raise ValueError(f"not a resource request: {method} {path}")
    namespace = ""
    if rest[:1] == ["namespaces"] and len(rest) >= 2:
        namespace = rest[1]  # a Namespace object itself (exactly two parts) is in its own namespace
        rest = rest[2:] if len(rest) > 2 else rest
    resource, name, sub = rest[0], rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else ""
    watching = params.get("watch", "").lower() in ("1", "true")
    verb = {
        "GET": "watch" if watching else ("get" if name else "list"),
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if name else "deletecollection",
    }[method.upper()]
    if verb in ("list", "watch") and (selected := _field_name(params.get("fieldSelector", ""))):
        name = selected  # a list or watch of one name is authorized by that name
    return Attributes(verb, group, f"{resource}/{sub}" if sub else resource, namespace, name)


def _field_name(selector: str) -> str:
    terms = dict(t.split("=", 1) for t in selector.split(",") if "=" in t and "!=" not in t)
    return terms.get("metadata.name", "")


def _matches(values: Iterable[str], value: str) -> bool:
    return any(v == "*" or v == value for v in values)


def _rule_allows(rule: Mapping[str, Any], a: Attributes) -> bool:
    names = rule.get("resourceNames") or []
    return (
        _matches(rule.get("verbs") or [], a.verb)
        and _matches(rule.get("apiGroups") or [], a.group)
        and _matches(rule.get("resources") or [], a.resource)
        and (not names or (bool(a.name) and a.name in names))
    )


def _subject_is(subject: Mapping[str, Any], user: str, binding_namespace: str) -> bool:
    if subject.get("kind") == "User":
        return bool(subject.get("name") == user)
    if subject.get("kind") == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return user == f"{SA_PREFIX}{namespace}:{subject.get('name')}"
    return False


@dataclass(frozen=True, slots=True)
class Grant:
    """One rule as it reaches a user: through which binding, and where it applies ('' = everywhere)."""

    rule: Mapping[str, Any]
    namespace: str
    binding: str


class Rbac:
    """The Roles, ClusterRoles and their bindings among ``documents`` (parsed manifests)."""

    def __init__(self, documents: Iterable[Mapping[str, Any]]) -> None:
        docs = [d for d in documents if isinstance(d, Mapping)]
        self.cluster_roles = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ClusterRole"}
        self.roles = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in docs if d.get("kind") == "Role"}
        self.bindings = [d for d in docs if d.get("kind") in ("ClusterRoleBinding", "RoleBinding")]

    def grants(self, user: str) -> Iterator[Grant]:
        for binding in self.bindings:
            meta = binding["metadata"]
            namespace = meta.get("namespace", "") if binding["kind"] == "RoleBinding" else ""
            if not any(_subject_is(s, user, namespace) for s in binding.get("subjects") or []):
                continue
            ref = binding["roleRef"]
            role = (
                self.cluster_roles.get(ref["name"])
                if ref["kind"] == "ClusterRole"
                else self.roles.get((namespace, ref["name"]))
            )
            if role is None:
                raise ValueError(f"{binding['kind']} {meta['name']} refers to a missing {ref['kind']} {ref['name']}")
            for rule in role.get("rules") or []:
                yield Grant(rule, namespace, f"{binding['kind']} {meta['name']}")

    def allows(self, user: str, a: Attributes) -> bool:
        return any(
            _rule_allows(g.rule, a) and (not g.namespace or g.namespace == a.namespace) for g in self.grants(user)
        )

    def namespaces(self, user: str, verb: str, group: str, resource: str) -> set[str]:
        """Where ``user`` may ``verb`` the resource (some name of it): namespaces, ``"*"`` for everywhere."""
        return {
            g.namespace or "*"
            for g in self.grants(user)
            if _rule_allows({**g.rule, "resourceNames": []}, Attributes(verb, group, resource))
        }

    def names(self, user: str, verb: str, group: str, resource: str) -> set[str] | None:
        """The resourceNames that limit ``verb`` for ``user``; None when some grant is not limited by name."""
        limited: set[str] = set()
        for g in self.grants(user):
            if _rule_allows({**g.rule, "resourceNames": []}, Attributes(verb, group, resource)):
                if not g.rule.get("resourceNames"):
                    return None
                limited |= set(g.rule["resourceNames"])
        return limited

    def verbs(self, user: str) -> set[str]:
        return {v for g in self.grants(user) for v in g.rule.get("verbs") or []}
