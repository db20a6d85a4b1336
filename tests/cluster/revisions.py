"""Repositories, PackageRevisions and the package bookkeeping sidecar, for the cluster tier's tests.

Shared by test_garbage_collection.py and test_namespace_deletion.py (not a test module itself).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.support.controlplane.cluster import NAMESPACE, Cluster, SidecarProcess, wait_for
from webhook.kube.client import Kube, NotFound
from webhook.sidecar.runner import LEASE_NAME

Obj = dict[str, Any]

MERGE = "application/merge-patch+json"
REPOSITORIES = "/apis/config.porch.kpt.dev/v1alpha1/namespaces/{ns}/repositories"
REVISIONS = "/apis/porch.kpt.dev/v1alpha2/namespaces/{ns}/packagerevisions"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{LEASE_NAME}"

BOOKKEEPING_ONLY = {
    # The packages family is standalone here (no Porch), which is what runs the bookkeeping; the chart
    # index is off by taking the charts family out of standalone (the mode is its only switch).
    "families": {"charts": {"mode": "alongside"}},
    "sidecar": {
        # The pass interval is the availability loop's: one pass a second, nothing else running.
        "availability": {"interval": "1s"},
        "referencedSet": {"enabled": False},
        "retention": {"enabled": False},
    },
}


def repository(admin: Kube, ns: str, name: str = "blueprints") -> Obj:
    body = {
        "apiVersion": "config.porch.kpt.dev/v1alpha1",
        "kind": "Repository",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"type": "git", "git": {"repo": f"https://git.example.com/{name}.git", "branch": "main"}},
    }
    return admin.request("POST", REPOSITORIES.format(ns=ns), body=body)


def revision(ns: str, name: str, lifecycle: str = "Draft", repo: str = "blueprints") -> Obj:
    """``name`` is ``<package>.<workspace>``; the object is named ``<repo>.<package>.<workspace>``."""
    package, workspace = name.split(".")
    return {
        "apiVersion": "porch.kpt.dev/v1alpha2",
        "kind": "PackageRevision",
        "metadata": {"name": f"{repo}.{name}", "namespace": ns},
        "spec": {
            "repository": repo, "packageName": package, "workspaceName": workspace, "lifecycle": lifecycle,
            "source": {"init": {"description": package}},
        },
    }  # fmt: skip


def wait_repository_cached(admin: Kube, ns: str, repo: Obj) -> None:
    """Until the server's cache holds ``repo``: a dry-run revision then gets its owner reference."""
    probe = revision(ns, "cache-probe.v1", repo=repo["metadata"]["name"])
    uid = repo["metadata"]["uid"]

    def owned() -> bool:
        answer = admin.request("POST", REVISIONS.format(ns=ns), query=[("dryRun", "All")], body=probe)
        return [ref["uid"] for ref in answer["metadata"].get("ownerReferences", [])] == [uid]

    wait_for(owned, f"the server's cache to see Repository {ns}/{repo['metadata']['name']}")


def create_revision(admin: Kube, ns: str, name: str, published: bool = False, repo: str = "blueprints") -> Obj:
    """A revision (see :func:`revision`) created Proposed (or Draft) and, if ``published``, moved to Published."""
    body = revision(ns, name, "Proposed" if published else "Draft", repo)
    created = admin.request("POST", REVISIONS.format(ns=ns), body=body)
    if not published:
        return created
    return admin.request(
        "PATCH",
        f"{REVISIONS.format(ns=ns)}/{body['metadata']['name']}",
        body={"spec": {"lifecycle": "Published"}},
        content_type=MERGE,
    )


def live(admin: Kube, ns: str) -> list[Obj]:
    return list(admin.request("GET", REVISIONS.format(ns=ns))["items"])


def bookkeeping_sidecar(cluster: Cluster, sidecar: Callable[..., SidecarProcess], name: str) -> SidecarProcess:
    """A sidecar with only the package bookkeeping on, started and leading.

    A Lease left by an earlier test's sidecar (stopped; it may not have released it) is deleted
    first, so this one takes it at once instead of after the lease duration.
    """
    config = cluster.workdir / name  # the shipped configuration directory, plus the test's loop switches
    shutil.rmtree(config, ignore_errors=True)
    shutil.copytree(cluster.config, config)
    (config / "zz-bookkeeping-only.yaml").write_text(yaml.safe_dump(BOOKKEEPING_ONLY))
    with contextlib.suppress(NotFound):
        cluster.admin.request("DELETE", LEASE)
    process = sidecar(name, Path(config)).start()
    wait_for(lambda: holder(cluster.admin) == name, f"{name} to hold the Lease")
    return process


def holder(admin: Kube) -> str:
    try:
        return str(admin.request("GET", LEASE).get("spec", {}).get("holderIdentity", ""))
    except NotFound:
        return ""


def release_finalizers(admin: Kube, ns: str) -> None:
    """Drop every revision's finalizer by hand (tests that ran no sidecar), so ``ns`` can go."""
    for item in live(admin, ns):
        with contextlib.suppress(NotFound):
            admin.request(
                "PATCH", f"{REVISIONS.format(ns=ns)}/{item['metadata']['name']}",
                body={"metadata": {"finalizers": None}}, content_type=MERGE,
            )  # fmt: skip
