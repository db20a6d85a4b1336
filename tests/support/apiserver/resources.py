"""The resource types the double serves: built-ins from a table, custom resources from CRD manifests.

A `ResourceType` is one (group, plural) with all its served versions; objects are stored once, in the
storage version, exactly as kube-apiserver stores them in etcd.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class ResourceType:
    """One API resource (group + plural), every version it is served in, and how it behaves."""

    group: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    versions: tuple[str, ...]
    storage_version: str
    status_subresource: bool = False
    custom: bool = True
    conversion_strategy: str = "None"
    conversion_path: str = "/convert"
    short_names: tuple[str, ...] = ()
    list_kind: str = ""
    versions_with_status: frozenset[str] = field(default_factory=frozenset)
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict, hash=False, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    @property
    def list_kind_name(self) -> str:
        return self.list_kind or f"{self.kind}List"

    def has_status(self, version: str) -> bool:
        """True when the status subresource is enabled for this version (per-version in CRDs)."""
        return version in self.versions_with_status

    @property
    def sets_generation(self) -> bool:
        """Custom resources carry metadata.generation; the built-ins the project uses do not."""
        return self.custom


def _builtin(group: str, kind: str, plural: str, namespaced: bool, status: bool = False) -> ResourceType:
    version = "v1"
    return ResourceType(
        group=group,
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        versions=(version,),
        storage_version=version,
        status_subresource=status,
        custom=False,
        versions_with_status=frozenset({version}) if status else frozenset(),
    )


BUILTINS: tuple[ResourceType, ...] = (
    _builtin("", "Namespace", "namespaces", namespaced=False, status=True),
    _builtin("", "Secret", "secrets", namespaced=True),
    _builtin("", "ConfigMap", "configmaps", namespaced=True),
    _builtin("", "Event", "events", namespaced=True),
    _builtin("coordination.k8s.io", "Lease", "leases", namespaced=True),
)

NAMESPACES = BUILTINS[0]


def resource_from_crd(crd: dict[str, Any]) -> ResourceType:
    """Read a CustomResourceDefinition (apiextensions.k8s.io/v1) into a ResourceType."""
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec["versions"] if v.get("served", True)]
    storage = [v["name"] for v in spec["versions"] if v.get("storage")]
    if len(storage) != 1:
        raise ValueError(f"CRD {crd['metadata']['name']}: exactly one storage version required, got {storage}")
    conversion = spec.get("conversion") or {}
    strategy = conversion.get("strategy", "None")
    client_config = (conversion.get("webhook") or {}).get("clientConfig") or {}
    path = (client_config.get("service") or {}).get("path") or "/convert"
    with_status = frozenset(v["name"] for v in served if "status" in (v.get("subresources") or {}))
    return ResourceType(
        group=spec["group"],
        kind=names["kind"],
        plural=names["plural"],
        singular=names.get("singular", names["kind"].lower()),
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        versions=tuple(v["name"] for v in served),
        storage_version=storage[0],
        status_subresource=bool(with_status),
        conversion_strategy=strategy,
        conversion_path=path,
        short_names=tuple(names.get("shortNames", ())),
        list_kind=names.get("listKind", ""),
        versions_with_status=with_status,
        schemas={v["name"]: (v.get("schema") or {}).get("openAPIV3Schema") for v in served},
    )


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: the CRDs are large


def yaml_documents(manifests_dir: Path) -> Iterator[dict[str, Any]]:
    """Every mapping document in every *.yaml / *.yml file under `manifests_dir`, recursively, in path order."""
    paths = sorted([*manifests_dir.rglob("*.yaml"), *manifests_dir.rglob("*.yml")])
    for path in paths:
        with path.open(encoding="utf-8") as handle:
            for document in yaml.load_all(handle, Loader=_LOADER):
                if isinstance(document, dict):
                    yield document


class Registry:
    """Lookup of resource types by URL coordinates and by kind."""

    def __init__(self, resources: Iterable[ResourceType]) -> None:
        self._by_key: dict[tuple[str, str], ResourceType] = {}
        for resource in resources:
            if resource.key in self._by_key:
                raise ValueError(f"resource {resource.plural}.{resource.group} defined twice")
            self._by_key[resource.key] = resource

    @classmethod
    def from_manifests(cls, manifests_dir: Path) -> Registry:
        crds = [d for d in yaml_documents(manifests_dir) if d.get("kind") == "CustomResourceDefinition"]
        return cls([*BUILTINS, *(resource_from_crd(crd) for crd in crds)])

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        resource = self._by_key.get((group, plural))
        if resource is None or version not in resource.versions:
            return None
        return resource

    def by_key(self, key: tuple[str, str]) -> ResourceType:
        return self._by_key[key]

    def by_kind(self, group: str, kind: str) -> ResourceType | None:
        return next((r for r in self._by_key.values() if r.group == group and r.kind == kind), None)

    def all(self) -> list[ResourceType]:
        return list(self._by_key.values())

    def groups(self) -> dict[str, list[str]]:
        """Non-core group → served versions, preferred (storage) version first."""
        result: dict[str, list[str]] = {}
        for resource in self._by_key.values():
            if not resource.group:
                continue
            versions = result.setdefault(resource.group, [])
            for version in (resource.storage_version, *resource.versions):
                if version not in versions:
                    versions.append(version)
        return result
