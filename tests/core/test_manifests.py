"""The manifests: webhook routing, the workload's wiring, and least privilege.

The webhook configurations send every request a rule needs, to the right path. The server and the
sidecar run as two identities: the server may only list and watch what its cache holds; the
sidecar writes, reads Secrets only where a RoleBinding in components/registry-secrets lets it, deletes
ComponentVersions only with components/janitor, and writes its ConfigMap and Lease by name.
``base`` is every file outside ``manifests/components`` and ``manifests/crds`` (alongside upstream,
the default, no CRD is installed); ``components/standalone-<family>`` adds the family's CRDs and its
mode. A test renders the tree with kubectl kustomize to prove that is what ``kubectl apply -k
manifests`` applies, with and without components.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.families import FAMILIES
from policies.rules import Rule
from tests.support.rbac import Attributes, Rbac

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
COMPONENTS = MANIFESTS / "components"
CRDS = MANIFESTS / "crds"
STANDALONE = tuple(f"standalone-{name}" for name in FAMILIES)
KUSTOMIZE_KINDS = ("Kustomization", "Component")


def _load(paths: Iterable[Path]) -> list[dict]:
    docs: list[dict] = []
    for path in sorted(paths):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    return [d for d in docs if d.get("kind") not in KUSTOMIZE_KINDS]


@functools.cache
def base() -> list[dict]:
    """Every object ``kubectl apply -k manifests`` applies without components."""
    return _load(
        p for p in MANIFESTS.rglob("*.yaml") if not p.is_relative_to(COMPONENTS) and not p.is_relative_to(CRDS)
    )


@functools.cache
def component(name: str) -> list[dict]:
    """The objects and patches of ``manifests/components/<name>``, with the directories it lists as resources."""
    root = COMPONENTS / name
    spec = yaml.safe_load((root / "kustomization.yaml").read_text())
    dirs = [(root / r).resolve() for r in spec.get("resources", []) if (root / r).is_dir()]
    return _load([*root.glob("*.yaml"), *(p for d in dirs for p in d.glob("*.yaml"))])


def documents(kind: str) -> list[dict]:
    return [d for d in base() if d.get("kind") == kind]


@functools.cache
def plurals() -> dict[tuple[str, str], str]:
    """Every CRD any standalone component installs (alongside, upstream's CRDs have the same names)."""
    crds = [d for name in STANDALONE for d in component(name) if d.get("kind") == "CustomResourceDefinition"]
    return {(crd["spec"]["group"], crd["spec"]["names"]["kind"]): crd["spec"]["names"]["plural"] for crd in crds}


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


# ---- the workload ---------------------------------------------------------------------------------

NAMESPACE = "catalog-warden"
CONTAINERS = ("server", "sidecar")
SERVER_SA, SIDECAR_SA = "catalog-warden-server", "catalog-warden"
SERVER = f"system:serviceaccount:{NAMESPACE}:{SERVER_SA}"
SIDECAR = f"system:serviceaccount:{NAMESPACE}:{SIDECAR_SA}"


def named(kind: str, name: str, docs: Iterable[dict] | None = None) -> dict:
    (doc,) = [d for d in (base() if docs is None else docs) if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def containers(deployment: dict) -> list[str]:
    return [c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]]


def deployment_of(container: str) -> dict:
    (deployment,) = [d for d in documents("Deployment") if containers(d) == [container]]
    return deployment


def pod(container: str) -> dict:
    return dict(deployment_of(container)["spec"]["template"]["spec"])


def pod_labels(container: str) -> dict[str, str]:
    return dict(deployment_of(container)["spec"]["template"]["metadata"]["labels"])


def other(container: str) -> str:
    (rest,) = set(CONTAINERS) - {container}
    return rest


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_server_and_sidecar_run_in_their_own_deployments() -> None:
    assert sorted(name for d in documents("Deployment") for name in containers(d)) == sorted(CONTAINERS)
    for container in CONTAINERS:
        labels = {"app.kubernetes.io/name": "catalog-warden", "app.kubernetes.io/component": container}
        assert pod_labels(container) == labels
        selector = deployment_of(container)["spec"]["selector"]["matchLabels"]
        assert selector == labels
        assert not selects(selector, pod_labels(other(container))), "the Deployments' selectors overlap"


def test_deployment_arguments_are_accepted_by_the_cli() -> None:
    from webhook.cli import _parser

    for container in CONTAINERS:
        (spec,) = pod(container)["containers"]
        _parser().parse_args(spec["args"])  # exits (SystemExit) on an unknown flag


def test_each_process_runs_as_its_own_service_account_and_the_sidecar_is_the_warden() -> None:
    from policies.identity import Identities

    accounts = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in documents("ServiceAccount")}
    assert accounts == {(NAMESPACE, SERVER_SA), (NAMESPACE, SIDECAR_SA)}
    assert pod("server")["serviceAccountName"] == SERVER_SA
    assert pod("sidecar")["serviceAccountName"] == SIDECAR_SA
    for container in CONTAINERS:
        assert deployment_of(container)["metadata"]["namespace"] == NAMESPACE
    assert Identities().warden == SIDECAR, "the webhooks admit the warden's writes: it must be the sidecar"


def test_services_and_the_pdb_select_the_pods_that_serve_their_ports() -> None:
    ports = {c: {p["name"] for s in pod(c)["containers"] for p in s.get("ports", [])} for c in CONTAINERS}
    for service, serves in (("catalog-warden", "server"), ("catalog-warden-events", "sidecar")):
        spec = named("Service", service)["spec"]
        assert selects(spec["selector"], pod_labels(serves)), f"Service {service} does not select the {serves}"
        assert not selects(spec["selector"], pod_labels(other(serves))), f"Service {service} selects both"
        assert {p["targetPort"] for p in spec["ports"]} <= ports[serves]
    pdb = named("PodDisruptionBudget", "catalog-warden")["spec"]["selector"]["matchLabels"]
    assert selects(pdb, pod_labels("server")) and not selects(pdb, pod_labels("sidecar"))
    (policy,) = documents("NetworkPolicy")
    for container in CONTAINERS:
        assert selects(policy["spec"]["podSelector"]["matchLabels"], pod_labels(container))


def test_the_serving_key_is_mounted_into_the_server_pod_only() -> None:
    secrets = {c: {v["secret"]["secretName"] for v in pod(c)["volumes"] if "secret" in v} for c in CONTAINERS}
    assert secrets == {"server": {"catalog-warden-serving-tls"}, "sidecar": set()}


def test_serving_certificate_matches_the_injection_annotation_and_the_mounted_secret() -> None:
    serving = next(c for c in documents("Certificate") if c["metadata"]["name"] == "catalog-warden-serving")
    volumes = {v["name"]: v for v in pod("server")["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == serving["spec"]["secretName"]
    assert "catalog-warden.catalog-warden.svc" in serving["spec"]["dnsNames"]
    injected = {
        d["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
        for d in documents(kind)
    }
    assert injected == {f"catalog-warden/{serving['metadata']['name']}"}


# ---- permissions ----------------------------------------------------------------------------------

VARIANTS = [c for n in range(3) for c in itertools.combinations(("janitor", "registry-secrets"), n)] + [
    STANDALONE,
    ("standalone-packages", "janitor"),
]
READS = ("get", "list", "watch")


def rbac(*components: str) -> Rbac:
    return Rbac(base() + [d for name in components for d in component(name)])


def cache_allowed(r: Rbac, user: str, kinds: Iterable[Any]) -> list[str]:
    from webhook.kube.client import RESOURCES

    missing = []
    for kind in kinds:
        res = RESOURCES[kind]
        for verb in ("list", "watch"):
            if not r.allows(user, Attributes(verb, res.kind.group, res.plural)):
                missing.append(f"{verb} {res.plural}")
    return missing


@pytest.mark.parametrize("components", VARIANTS, ids=lambda c: "+".join(c) or "base")
def test_the_server_may_only_list_and_watch_what_its_cache_holds(components: tuple[str, ...]) -> None:
    from webhook.kube.cache import DEFAULT_KINDS
    from webhook.kube.client import RESOURCES

    r = rbac(*components)
    assert r.verbs(SERVER) == {"list", "watch"}
    assert cache_allowed(r, SERVER, DEFAULT_KINDS) == []
    cached = {(RESOURCES[k].kind.group, RESOURCES[k].plural) for k in DEFAULT_KINDS}
    granted = {(group, res) for g in r.grants(SERVER) for group in g.rule["apiGroups"] for res in g.rule["resources"]}
    assert granted == cached, "the server may read something its cache does not hold"
    assert all(not g.namespace for g in r.grants(SERVER)), "the server's cache lists cluster-wide"


def test_the_sidecar_may_list_and_watch_every_kind_its_cache_holds() -> None:
    from webhook.sidecar.runner import CACHED_KINDS

    assert cache_allowed(rbac(), SIDECAR, CACHED_KINDS) == []


def bound_users(r: Rbac) -> set[str]:
    users = set()
    for binding in r.bindings:
        for s in binding.get("subjects") or []:
            namespace = s.get("namespace") or binding["metadata"].get("namespace", "")
            users.add(f"system:serviceaccount:{namespace}:{s['name']}" if s["kind"] == "ServiceAccount" else s["name"])
    return users


def registry_namespaces() -> set[str]:
    return {d["metadata"]["namespace"] for d in component("registry-secrets") if d["kind"] == "RoleBinding"}


@pytest.mark.parametrize("components", VARIANTS, ids=lambda c: "+".join(c) or "base")
def test_secrets_are_read_only_in_the_listed_registry_namespaces(components: tuple[str, ...]) -> None:
    r = rbac(*components)
    # the warden's own namespace always: the chart index lends only Registries there
    expected = {"catalog-warden"} | (registry_namespaces() if "registry-secrets" in components else set())
    for user in bound_users(r):
        for verb in (*READS, "create", "update", "patch", "delete", "deletecollection"):
            where = r.namespaces(user, verb, "", "secrets")
            assert "*" not in where, f"{user} may {verb} Secrets cluster-wide"
            wanted = expected if user == SIDECAR and verb == "get" else set()
            assert where == wanted, f"{user} may {verb} Secrets in {sorted(where)}"
    assert registry_namespaces() == {"team-a"}  # the example the docs describe


@pytest.mark.parametrize("components", VARIANTS, ids=lambda c: "+".join(c) or "base")
def test_componentversions_are_deleted_only_with_the_janitor_component(components: tuple[str, ...]) -> None:
    r = rbac(*components)
    janitor = "janitor" in components
    for user in bound_users(r):
        for verb in ("delete", "deletecollection"):
            where = r.namespaces(user, verb, "solar.opendefense.cloud", "componentversions")
            assert where == ({"*"} if janitor and user == SIDECAR and verb == "delete" else set()), (
                f"{user} may {verb} ComponentVersions in {sorted(where)}"
            )
    enabled = _config(components).sidecar.retention.enabled
    assert enabled is janitor, f"the janitor is {'on' if enabled else 'off'} with {components or 'the base'}"


def config_data(components: tuple[str, ...]) -> dict[str, str]:
    """The ConfigMap's data with ``components`` patched in (a strategic merge: keys merge, a key is replaced)."""
    data = dict(named("ConfigMap", "catalog-warden-config")["data"])
    for name in components:
        for doc in component(name):
            if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "catalog-warden-config":
                data.update(doc["data"])
    return data


def _config(components: tuple[str, ...]) -> Any:
    """The configuration the containers read: every file of the mounted ConfigMap (``--config /config``)."""
    import tempfile

    from webhook.config import load_config

    with tempfile.TemporaryDirectory() as where:
        for key, text in config_data(components).items():
            (Path(where) / key).write_text(text)
        return load_config(Path(where))


def test_the_containers_read_the_configuration_directory() -> None:
    for container in CONTAINERS:
        (spec,) = pod(container)["containers"]
        args = spec["args"]
        mount = next(m for m in spec["volumeMounts"] if m["name"] == "config")
        assert args[args.index("--config") + 1] == mount["mountPath"], "--config names the mounted ConfigMap directory"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_standalone_component_adds_its_crds_and_its_mode_and_nothing_else(family: str) -> None:
    from policies.config import Mode

    name = f"standalone-{family}"
    docs = component(name)
    crds = {(d["spec"]["group"], d["spec"]["names"]["kind"]) for d in docs if d["kind"] == "CustomResourceDefinition"}
    assert crds == {(gk.group, gk.kind) for gk in FAMILIES[family].kinds if (gk.group, gk.kind) in plurals()}
    assert {d["kind"] for d in docs} == {"CustomResourceDefinition", "ConfigMap"}
    on, off = _config((name,)), _config(())
    assert on.families.of(family).mode is Mode.STANDALONE and off.families.of(family).mode is Mode.ALONGSIDE
    assert on.model_dump(exclude={"families"}) == off.model_dump(exclude={"families"})
    assert on.runs_upstream_loop(family) and not off.runs_upstream_loop(family)


def test_the_base_installs_no_crd_and_runs_every_family_alongside() -> None:
    from policies.config import Mode

    assert documents("CustomResourceDefinition") == []
    assert all(_config(()).families.of(f).mode is Mode.ALONGSIDE for f in FAMILIES)


def test_the_janitor_component_changes_nothing_but_the_janitor_switch() -> None:
    on, off = _config(("janitor",)).model_dump(), _config(()).model_dump()
    on["sidecar"]["retention"]["enabled"] = False
    assert on == off


def test_the_sidecar_writes_its_configmap_and_lease_by_name() -> None:
    from policies.referenced_set import CONFIGMAP_KEY
    from policies.sidecar_config import ReferencedSetConfig
    from webhook.sidecar.referenced_set import MANAGED_BY
    from webhook.sidecar.runner import LEASE_NAME

    r = rbac(*VARIANTS[-1])
    referenced = ReferencedSetConfig()
    for verb in ("update", "patch", "delete", "get"):
        for group, resource, name in (
            ("", "configmaps", referenced.configMap),
            ("coordination.k8s.io", "leases", LEASE_NAME),
        ):
            limited = r.names(SIDECAR, verb, group, resource)
            assert limited is not None, f"the sidecar may {verb} every {resource} in its namespace"
            assert limited <= {name}
    assert r.namespaces(SIDECAR, "create", "", "configmaps") == set(), "RBAC cannot limit create by name"
    assert r.namespaces(SIDECAR, "create", "coordination.k8s.io", "leases") == {referenced.namespace}
    for verb, resource in (("get", "configmaps"), ("update", "configmaps"), ("get", "leases"), ("update", "leases")):
        group = "" if resource == "configmaps" else "coordination.k8s.io"
        name = referenced.configMap if resource == "configmaps" else LEASE_NAME
        assert r.allows(SIDECAR, Attributes(verb, group, resource, referenced.namespace, name)), f"{verb} {name}"
    # The ConfigMap ships (empty) so the sidecar never needs create; the Lease lives where the pod runs.
    shipped = named("ConfigMap", referenced.configMap)
    assert shipped["metadata"]["namespace"] == referenced.namespace
    assert shipped["metadata"]["labels"] == MANAGED_BY
    assert CONFIGMAP_KEY not in (shipped.get("data") or {})
    (sidecar,) = pod("sidecar")["containers"]
    env = {e["name"]: e for e in sidecar["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert deployment_of("sidecar")["metadata"]["namespace"] == referenced.namespace


def test_every_binding_names_a_role_that_exists() -> None:
    r = rbac(*VARIANTS[-1])
    for user in bound_users(r):
        assert list(r.grants(user))  # raises on a binding to a missing role


# ---- the kustomize tree ---------------------------------------------------------------------------

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def render(tmp_path: Path, components: tuple[str, ...]) -> list[dict]:
    """``kubectl kustomize`` of an overlay that adds ``components`` to manifests/, as an operator writes one."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    root = Path(os.path.relpath(MANIFESTS, overlay))
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [str(root)],
                "components": [str(root / "components" / c) for c in components],
            }
        )
    )
    done = subprocess.run([KUBECTL, "kustomize", str(overlay)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def key(doc: dict) -> tuple[str, str, str]:
    return doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]


@pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed")
@pytest.mark.parametrize("components", VARIANTS, ids=lambda c: "+".join(c) or "base")
def test_kustomize_builds_what_these_tests_read(tmp_path: Path, components: tuple[str, ...]) -> None:
    rendered = {key(d): d for d in render(tmp_path, components)}
    expected = {key(d): d for d in base()}
    for name in components:
        for doc in component(name):
            if doc["kind"] == "ConfigMap" and key(doc) in expected:
                merged = {**expected[key(doc)]["data"], **doc["data"]}  # a strategic merge patch: keys merge
                expected[key(doc)] = {**expected[key(doc)], "data": merged}
            else:
                expected[key(doc)] = doc
    assert sorted(rendered) == sorted(expected)
    differ = [k for k in expected if rendered[k] != expected[k]]
    assert differ == []
    assert rbac(*components).verbs(SERVER) == Rbac(rendered.values()).verbs(SERVER)


def test_the_sidecar_names_the_role_and_component_that_grant_secret_reads() -> None:
    from webhook.sidecar.runner import SECRETS_COMPONENT, SECRETS_ROLE

    assert named("ClusterRole", SECRETS_ROLE)["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
    ]
    assert (MANIFESTS.parent / SECRETS_COMPONENT) == COMPONENTS / "registry-secrets"
    refs = {d["roleRef"]["name"] for d in component("registry-secrets") if d["kind"] == "RoleBinding"}
    assert refs == {SECRETS_ROLE}
