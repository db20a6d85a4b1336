"""The catalog family beside SolAr's controllers, on a real kube-apiserver (standalone mode: our CRDs).

What SolAr's controllers write into the four kinds we now serve is stored exactly as sent (real
structural pruning and null handling), and a Registry still used by a Target is refused through
the shipped webhook configuration, read as a user reads it (kubectl with her own kubeconfig).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from policies.catalog_deletion import MSG_REGISTRY_IN_USE
from policies.kinds import SOLAR
from policies.model import GroupKind
from tests.cluster.test_denials import USER, USER_GROUPS, denied, stderr_of
from tests.policies.test_catalog_crds import UPSTREAM_SHAPES
from tests.support.controlplane.cluster import ServerProcess, wait_for
from tests.support.controlplane.fixtures import Kubectl
from webhook.kube.client import RESOURCES, ApiError, Kube

MERGE = "application/merge-patch+json"


def path_of(kind: str, ns: str, name: str = "") -> str:
    return RESOURCES[GroupKind(SOLAR, kind)].path(ns, name)


@pytest.mark.parametrize("shape", UPSTREAM_SHAPES, ids=lambda o: f"{o['kind']}-{o['spec'].get('type', '')}")
def test_what_solar_controllers_write_is_stored_exactly(admin: Kube, ns: str, shape: dict) -> None:
    obj = copy.deepcopy(shape)
    obj["metadata"] = {"name": "x", "namespace": ns}
    status = obj.pop("status", None)

    stored = admin.request("POST", path_of(obj["kind"], ns), body=obj)

    assert stored["spec"] == shape["spec"]
    if status is not None:
        written = admin.request(
            "PATCH", path_of(obj["kind"], ns, "x") + "/status", body={"status": status}, content_type=MERGE
        )
        assert written["status"] == status


def refused_dry_run_delete(kube: Kube, path: str) -> bool:
    try:
        kube.request("DELETE", path, query=[("dryRun", "All")])
    except ApiError as exc:
        if exc.status == 403:
            return True
        raise
    return False


def test_a_registry_a_target_pushes_to_is_refused_through_kubectl(
    server: ServerProcess, admin: Kube, kube_as: Callable[[Path], Kube], kubectl: Kubectl,
    user_kubeconfig: Callable[..., Path], ns: str,
) -> None:  # fmt: skip
    alice = user_kubeconfig(USER, USER_GROUPS)
    registry = {
        "apiVersion": f"{SOLAR}/v1alpha1", "kind": "Registry", "metadata": {"name": "zot", "namespace": ns},
        "spec": {"hostname": "zot.example.com:5000", "solarSecretRef": {"name": "push"}},
    }  # fmt: skip
    target = {
        "apiVersion": f"{SOLAR}/v1alpha1", "kind": "Target", "metadata": {"name": "edge-1", "namespace": ns},
        "spec": {"renderRegistryRef": {"name": "zot"}},
    }  # fmt: skip
    admin.request("POST", path_of("Registry", ns), body=registry)
    admin.request("POST", path_of("Target", ns), body=target)
    wait_for(
        lambda: refused_dry_run_delete(kube_as(alice), path_of("Registry", ns, "zot")),
        "the server's cache to see the Target",
    )

    done = kubectl("-n", ns, "delete", f"registries.{SOLAR}", "zot", kubeconfig=alice)

    message = MSG_REGISTRY_IN_USE.format(referrers=f"Targets (1): {ns}/edge-1")
    hook = "catalog.validate.catalog-warden.io"
    assert stderr_of(done) == denied(hook, "Registry", f"{ns}/zot", "catalog.registry-in-use", message)
    stored = admin.request("GET", path_of("Registry", ns, "zot"))
    assert "deletionTimestamp" not in stored["metadata"]
    assert json.dumps(stored["spec"], sort_keys=True) == json.dumps(registry["spec"], sort_keys=True)
