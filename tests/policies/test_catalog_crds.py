"""The catalog CRDs: names as the SolAr reference has them, structural schemas, and agreement with
the objects the policy tests use (a field the rules read but the schema lacks would be pruned)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.kinds import CATALOG_KINDS, SOLAR
from tests.policies.test_catalog_support import (
    component,
    component_version,
    profile,
    reference_grant,
    registry,
    registry_binding,
    release,
    release_binding,
    target,
)

CRD_DIR = Path(__file__).resolve().parents[2] / "manifests" / "crds" / "catalog"

# kind: (plural, short name, status subresource), from reference/solar-catalog-api.md section 1.
REFERENCE = {
    "Component": ("components", "comp", False),
    "ComponentVersion": ("componentversions", "cv", False),
    "Release": ("releases", "rel", True),
    "ReleaseBinding": ("releasebindings", "rlb", False),
    "Registry": ("registries", "reg", False),
    "RegistryBinding": ("registrybindings", "rb", False),
    "Target": ("targets", "tgt", True),
    "ReferenceGrant": ("referencegrants", "rg", False),
    "Profile": ("profiles", "prf", True),
    "RenderTask": ("rendertasks", "rt", True),
    "RenderArtifact": ("renderartifacts", "ra", True),
    "RenderBinding": ("renderbindings", "rbin", False),
}


def load_crds() -> dict[str, dict[str, Any]]:
    kustomization = yaml.safe_load((CRD_DIR / "kustomization.yaml").read_text())
    crds = [yaml.safe_load((CRD_DIR / name).read_text()) for name in kustomization["resources"]]
    return {crd["spec"]["names"]["kind"]: crd for crd in crds}


CRDS = load_crds()


def schema_of(kind: str) -> dict[str, Any]:
    return CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_every_catalog_kind_has_one_crd_listed_in_the_kustomization():
    assert sorted(CRDS) == sorted(k.kind for k in CATALOG_KINDS)
    assert sorted(p.name for p in CRD_DIR.glob("*.yaml")) == sorted(
        ["kustomization.yaml", *(f"{SOLAR}_{plural}.yaml" for plural, _, _ in REFERENCE.values())]
    )


@pytest.mark.parametrize("kind", sorted(REFERENCE))
def test_crd_names_scope_and_status_subresource_follow_the_reference(kind):
    plural, short, status = REFERENCE[kind]
    crd = CRDS[kind]
    spec = crd["spec"]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == f"{plural}.{SOLAR}"
    assert (spec["group"], spec["scope"]) == (SOLAR, "Namespaced")
    assert spec["names"]["plural"] == plural
    assert spec["names"]["singular"] == kind.lower()
    assert spec["names"]["shortNames"] == [short]
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert ("status" in version.get("subresources", {})) is status


def structural_problems(node: dict[str, Any], path: str) -> list[str]:
    """Where ``node`` breaks the structural-schema rules the apiserver enforces (the ones we use)."""
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return [] if node.get("type") == "object" else [f"{path}: preserve-unknown-fields without type object"]
    problems = [] if "type" in node else [f"{path}: no type"]
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: both properties and additionalProperties")
    if node.get("type") == "array" and "items" not in node:
        problems.append(f"{path}: array without items")
    for name, child in node.get("properties", {}).items():
        problems += structural_problems(child, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            problems += structural_problems(node[key], f"{path}[{key}]")
    return problems


@pytest.mark.parametrize("kind", sorted(REFERENCE))
def test_crd_schema_is_structural(kind):
    assert structural_problems(schema_of(kind), kind) == []


def resolve(schema: dict[str, Any], json_path: str) -> dict[str, Any] | None:
    """The schema node a printer column's JSONPath reads (dotted paths and ``[?(@.type==...)]``)."""
    node: dict[str, Any] | None = schema
    for step in re.findall(r"\.([A-Za-z]+)(\[\?\(@\.type==\"\w+\"\)\])?", json_path):
        name, filtered = step
        node = (node or {}).get("properties", {}).get(name)
        if filtered:
            node = (node or {}).get("items")
    return node


@pytest.mark.parametrize("kind", sorted(REFERENCE))
def test_printer_columns_read_fields_the_schema_has(kind):
    columns = CRDS[kind]["spec"]["versions"][0]["additionalPrinterColumns"]
    assert columns[-1] == {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    for column in columns[:-1]:
        assert resolve(schema_of(kind), column["jsonPath"]) is not None, column


def test_component_version_shows_availability():
    columns = {
        c["name"]: c["jsonPath"] for c in CRDS["ComponentVersion"]["spec"]["versions"][0]["additionalPrinterColumns"]
    }
    assert columns["Available"] == '.status.conditions[?(@.type=="Available")].status'
    status = schema_of("ComponentVersion")["properties"]["status"]["properties"]
    assert sorted(status["availability"]["properties"]) == [
        "consecutiveMisses",
        "credentials",
        "firstMissAt",
        "lastCheckedAt",
        "resolvedDigest",
    ]
    assert status["conditions"]["items"]["properties"]["status"]["enum"] == ["True", "False", "Unknown"]


TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int}


def violations(value: Any, node: dict[str, Any], path: str) -> list[str]:
    """Type, enum and required errors, and fields the schema would prune (unknown fields)."""
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return []
    expected = TYPES[node["type"]]
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        return [f"{path}: {value!r} is not {node['type']}"]
    found = [f"{path}: {value!r} not in enum"] if "enum" in node and value not in node["enum"] else []
    if isinstance(value, dict) and path != ".metadata":
        found += [f"{path}.{r}: required" for r in node.get("required", ()) if r not in value]
        for key, child in value.items():
            sub = node.get("properties", {}).get(key, node.get("additionalProperties"))
            found += violations(child, sub, f"{path}.{key}") if sub else [f"{path}.{key}: unknown field"]
    if isinstance(value, list):
        for n, item in enumerate(value):
            found += violations(item, node["items"], f"{path}[{n}]")
    return found


@pytest.mark.parametrize(
    "obj",
    [
        component(),
        component_version(
            available=("False", "ArtifactMissing", "manifest not found"),
            labels={"solar.opendefense.cloud/component": "demo"},
        ),
        release(cv_ns="team-b", unique_name="web"),
        registry(
            webhookPath="zot-events", flavor="zot", scanInterval="30s", plainHTTP=False, targetPullSecretName="pull"
        ),
        target(registry_ns="team-b"),
        registry_binding("edge-zot", target_ns="team-b"),
        release_binding("edge-web"),
        reference_grant("team-b", "Release", "team-a", "ComponentVersion"),
        profile(),
    ],
    ids=lambda o: o["kind"],
)
def test_objects_the_rules_read_fit_the_schema(obj):
    assert violations(obj, schema_of(obj["kind"]), "") == []


def test_schema_check_catches_a_misspelt_field():
    bad = release()
    bad["spec"]["componentVersionRef"] = {"nmae": "demo-v1"}
    assert violations(bad, schema_of("Release"), "") == [
        ".spec.componentVersionRef.name: required",
        ".spec.componentVersionRef.nmae: unknown field",
    ]


# --- the kinds SolAr's controllers write, in the shape its Go types serialize ----------------------
# (api/solar/v1alpha1/{profile,rendertask,renderer,renderartifact,renderbinding}_types.go at 875449e6):
# fields without omitempty are always sent, empty strings and JSON null included.

CONDITION = {
    "type": "JobSucceeded",
    "status": "True",
    "reason": "JobSucceeded",
    "message": "render job completed",
    "lastTransitionTime": "2026-11-29T12:00:00Z",
    "observedGeneration": 1,
}
CHART = {"name": "release-web", "description": "", "version": "v0.0.1-1a2b3c4d", "appVersion": ""}
ACCESS = {
    "repository": "zot.example.com:5000/charts/demo",
    "insecure": False,
    "tag": "1.0.0",
    "helm": {"name": "demo", "version": "1.0.0", "valuesTemplate": "replicas: 1"},
    "pullSecretName": "pull",
}
OWNER = {"ownerName": "edge-1", "ownerNamespace": "team-a", "ownerKind": "Target"}
CORE_REF = {"apiVersion": "batch/v1", "kind": "Job", "name": "render-x", "namespace": "team-a", "uid": "u1"}


def upstream(kind: str, spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj = {"apiVersion": f"{SOLAR}/v1alpha1", "kind": kind, "metadata": {"name": "x", "namespace": "team-a"}}
    obj["spec"] = spec
    if status is not None:
        obj["status"] = status
    return obj


UPSTREAM_SHAPES = [
    upstream(
        "Profile",
        {
            "releaseRef": {"name": "web"},
            "targetSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["edge"]}]},
            "userdata": {"site": "north"},
        },
        {"matchedTargets": 2, "conditions": [CONDITION]},
    ),
    upstream(
        "RenderTask",
        {
            "type": "release",
            "release": {
                "chart": CHART,
                "input": {
                    "component": {"name": "demo"},
                    "resources": {"chart": ACCESS},
                    "entrypoint": {"resourceName": "chart", "type": "helm"},
                },
                "targetNamespace": "web",
                "values": {"replicas": 2},
            },
            "bootstrap": {"chart": {**CHART, "name": ""}, "input": {"releases": None, "userdata": None}},
            "repository": "team-a/team-a/release-web",
            "tag": "v0.0.1-1a2b3c4d",
            "baseURL": "zot-deploy.example.com:5000",
            "pushSecretRef": {"name": "push-creds"},
            "plainHTTP": True,
            "failedJobTTL": 3600,
            **OWNER,
        },
        {
            "conditions": [CONDITION],
            "jobRef": CORE_REF,
            "configSecretRef": {**CORE_REF, "kind": "Secret"},
            "chartURL": "",
        },
    ),
    upstream(
        "RenderTask",  # a bootstrap task: the release config is sent empty, its values as null
        {
            "type": "bootstrap",
            "release": {
                "chart": {"name": "", "description": "", "version": "", "appVersion": ""},
                "input": {"component": {"name": ""}, "resources": None, "entrypoint": {"resourceName": "", "type": ""}},
                "targetNamespace": "",
                "values": None,
            },
            "bootstrap": {"chart": CHART, "input": {"releases": {"web": ACCESS}, "userdata": {"site": "north"}}},
            "repository": "team-a/bootstrap-edge-1",
            "tag": "v0.0.3",
            "baseURL": "zot-deploy.example.com:5000",
            **OWNER,
        },
    ),
    upstream(
        "RenderArtifact",
        {
            "baseURL": "zot-deploy.example.com:5000",
            "repository": "team-a/team-a/release-web",
            "tag": "v0.0.1-1a2b3c4d",
            "renderTaskRef": "render-rel-web-1a2b3c4d",
            "registryRef": {"name": "zot-deploy", "namespace": "platform"},
        },
        {
            "chartURL": "oci://zot-deploy.example.com:5000/team-a/team-a/release-web:v0.0.1-1a2b3c4d",
            "conditions": [{**CONDITION, "type": "OCICleanup", "status": "False", "reason": "AuthFailed"}],
        },
    ),
    upstream(
        "RenderBinding",
        {"renderArtifactRef": {"name": "render-art-1a2b3c4d"}, "registryRef": {"name": "zot-deploy"}, **OWNER},
    ),
]


def without_nulls(value: Any) -> Any:
    """What the apiserver stores: a JSON null where the schema does not say nullable is dropped."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


@pytest.mark.parametrize("obj", UPSTREAM_SHAPES, ids=lambda o: f"{o['kind']}-{o['spec'].get('type', '')}")
def test_what_solar_controllers_write_fits_and_nothing_is_pruned(obj):
    from tests.e2e_conversion.schemas import pruned_paths

    schema = schema_of(obj["kind"])
    assert violations(without_nulls(obj), schema, "") == []
    assert pruned_paths(obj, schema) == []


@pytest.mark.parametrize(
    ("kind", "spec", "missing"),
    [
        ("RenderArtifact", {"baseURL": "h", "repository": "r", "tag": "t"}, ".spec.renderTaskRef: required"),
        (
            "RenderBinding",
            {"renderArtifactRef": {"name": "a"}, "ownerKind": "Target", "ownerName": "e"},
            ".spec.ownerNamespace: required",
        ),
    ],
)
def test_fields_solar_validates_as_required_are_required(kind, spec, missing):
    assert violations(upstream(kind, spec), schema_of(kind), "") == [missing]
