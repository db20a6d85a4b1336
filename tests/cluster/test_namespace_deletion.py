"""Deleting a namespace full of guarded objects completes: our webhooks never block the namespace controller.

The namespace holds what the rules refuse a user to delete (a ComponentVersion a Release uses, the
Component of live ComponentVersions, Published PackageRevisions of an existing Repository) and
Registries with Targets and a RegistryBinding. The namespace controller deletes them as
``system:serviceaccount:kube-system:namespace-controller``, which the rules exempt. What remains
is the revisions' finalizer ``porch.kpt.dev/packagerevisions``: the sidecar's package bookkeeping
releases it once their Repository is gone or going; without that loop the namespace stays
Terminating, and says so in its own conditions (the second test). A refused delete would show
as the namespace's condition ``NamespaceDeletionContentFailure`` even where a retry later passes
(the referents gone): the first test watches for it.
"""

from __future__ import annotations

from collections.abc import Callable

from policies.packages import FINALIZER
from tests.cluster.revisions import (
    REVISIONS,
    bookkeeping_sidecar,
    create_revision,
    live,
    release_finalizers,
    repository,
    wait_repository_cached,
)
from tests.support.controlplane.cluster import Cluster, ServerProcess, SidecarProcess, wait_for
from webhook.kube.client import ApiError, Kube, NotFound

Obj = dict[str, object]

SOLAR = "/apis/solar.opendefense.cloud/v1alpha1/namespaces/{ns}/{plural}"
NAMESPACE_GONE_TIMEOUT = 120.0
"""The namespace controller retries remaining content with a growing delay: allow it a few rounds."""


def solar(admin: Kube, ns: str, kind: str, name: str, spec: Obj, labels: dict[str, str] | None = None) -> Obj:
    plural = {"Registry": "registries"}.get(kind, kind.lower() + "s")
    body = {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": spec,
    }
    return admin.request("POST", SOLAR.format(ns=ns, plural=plural), body=body)


def refused(admin: Kube, path: str) -> str:
    """The webhook's denial of a dry-run DELETE of ``path`` (nothing is deleted either way); "" if allowed."""
    try:
        admin.request("DELETE", path, query=[("dryRun", "All")])
    except ApiError as exc:
        assert exc.status == 403, exc.message
        return exc.message
    return ""


def namespace_gone(admin: Kube, ns: str) -> bool:
    try:
        admin.request("GET", f"/api/v1/namespaces/{ns}")
    except NotFound:
        return True
    return False


def fill(admin: Kube, ns: str) -> None:
    """A catalog in use, Registries with Targets, and a Repository with Published revisions."""
    solar(admin, ns, "Registry", "render", {"hostname": "render.example.com", "solarSecretRef": {"name": "push"}})
    solar(admin, ns, "Registry", "source", {"hostname": "source.example.com"})
    solar(admin, ns, "Target", "edge", {"renderRegistryRef": {"name": "render"}})
    solar(
        admin, ns, "RegistryBinding", "edge-source", {"targetRef": {"name": "edge"}, "registryRef": {"name": "source"}}
    )
    solar(admin, ns, "Component", "demo", {"registry": "source.example.com", "repository": "demo"})
    solar(admin, ns, "ComponentVersion", "demo-1-0-0", {"componentRef": {"name": "demo"}, "tag": "1.0.0"})
    solar(admin, ns, "Release", "web", {"componentVersionRef": {"name": "demo-1-0-0"}})
    repo = repository(admin, ns)
    wait_repository_cached(admin, ns, repo)
    create_revision(admin, ns, "nginx.v1", published=True)
    create_revision(admin, ns, "redis.v1", published=True)
    create_revision(admin, ns, "nginx.v2")


def test_deleting_a_namespace_full_of_guarded_objects_completes(
    cluster: Cluster, server: ServerProcess, admin: Kube, sidecar: Callable[..., SidecarProcess], ns: str
) -> None:
    bookkeeping_sidecar(cluster, sidecar, "sidecar-namespace")
    fill(admin, ns)
    # Guarded for a user: each of these is refused while the namespace lives.
    version = SOLAR.format(ns=ns, plural="componentversions") + "/demo-1-0-0"
    wait_for(
        lambda: "catalog.componentversion-in-use" in refused(admin, version), "the server's cache to see the Release"
    )
    assert "catalog.component-in-use" in refused(admin, SOLAR.format(ns=ns, plural="components") + "/demo")
    assert "packages.revision-delete-published" in refused(admin, f"{REVISIONS.format(ns=ns)}/blueprints.nginx.v1")

    since = admin.request("GET", f"/api/v1/namespaces/{ns}")["metadata"]["resourceVersion"]
    admin.request("DELETE", f"/api/v1/namespaces/{ns}")

    failures = content_failures_until_gone(admin, ns, since)

    assert failures == []  # not one of the namespace controller's deletes was refused, even for a retry


def content_failures_until_gone(admin: Kube, ns: str, since: str) -> list[str]:
    """Watch namespace ``ns`` until it is gone; every ``NamespaceDeletionContentFailure`` it reported.

    The namespace controller reports a refused delete there (and retries later): a webhook that
    refused it only until the referents went would still show.
    """
    query = [
        ("watch", "true"), ("fieldSelector", f"metadata.name={ns}"), ("resourceVersion", since),
        ("timeoutSeconds", str(int(NAMESPACE_GONE_TIMEOUT))),
    ]  # fmt: skip
    failures: list[str] = []
    with admin.stream("/api/v1/namespaces", query, timeout=NAMESPACE_GONE_TIMEOUT + 10) as events:
        for event in events:
            for condition in event["object"].get("status", {}).get("conditions", []):
                if condition["type"] == "NamespaceDeletionContentFailure" and condition["status"] == "True":
                    failures.append(condition.get("message", ""))
            if event["type"] == "DELETED":
                return failures
    raise AssertionError(f"namespace {ns} not gone after {NAMESPACE_GONE_TIMEOUT:.0f}s; failures: {failures}")


def conditions(admin: Kube, ns: str) -> dict[str, tuple[str, str]]:
    namespace = admin.request("GET", f"/api/v1/namespaces/{ns}")
    return {c["type"]: (c["status"], c.get("message", "")) for c in namespace.get("status", {}).get("conditions", [])}


def test_without_the_bookkeeping_the_namespace_waits_on_the_revisions_finalizer_and_says_so(
    cluster: Cluster, server: ServerProcess, admin: Kube, sidecar: Callable[..., SidecarProcess], ns: str
) -> None:
    fill(admin, ns)
    try:
        admin.request("DELETE", f"/api/v1/namespaces/{ns}")
        remaining = "NamespaceFinalizersRemaining"
        wait_for(lambda: conditions(admin, ns).get(remaining, ("", ""))[0] == "True", f"the condition {remaining}")

        seen = conditions(admin, ns)
        assert seen[remaining] == (
            "True",
            f"Some content in the namespace has finalizers remaining: {FINALIZER} in 3 resource instances",
        )
        assert seen["NamespaceDeletionContentFailure"][0] == "False"  # no delete of ours was refused
        assert seen["NamespaceDeletionDiscoveryFailure"][0] == "False"
        assert sorted(r["metadata"]["name"] for r in live(admin, ns)) == [
            "blueprints.nginx.v1",
            "blueprints.nginx.v2",
            "blueprints.redis.v1",
        ]
    except BaseException:
        release_finalizers(admin, ns)
        raise

    bookkeeping_sidecar(cluster, sidecar, "sidecar-namespace-late")

    wait_for(lambda: namespace_gone(admin, ns), f"namespace {ns} to be gone", NAMESPACE_GONE_TIMEOUT)
