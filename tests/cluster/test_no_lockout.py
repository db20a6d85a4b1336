"""No lock-out: with our server stopped, the cluster keeps running and the operator keeps the exit.

failurePolicy Fail means: while no replica answers, kube-apiserver refuses every write that a
validating webhook's rules match. The shipped configurations keep that set to the guarded kinds
outside kube-system and catalog-warden (``namespaceSelector``), and never call us for the garbage
collector and the namespace controller (``matchConditions``), so with the server stopped:

- kube-system writes succeed (a ConfigMap, and a guarded kind, which the selector exempts there);
- a namespace full of guarded objects is deleted (the namespace controller's deletes);
- an owner's dependents of a guarded kind are deleted by the garbage collector;
- a cluster admin edits our webhook configurations (the emergency exit: ``failurePolicy: Ignore``)
  and deletes them (webhook configurations are never sent to webhooks);
- what is refused is exactly the guarded writes, with the apiserver's message naming the webhook
  and the refused dial.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from policies.identity import CLUSTER_CLEANUP
from tests.support.controlplane.cluster import Cluster, ServerProcess, find, wait_for
from tests.support.controlplane.fixtures import Kubectl
from webhook.kube.client import ApiError, Kube, NotFound

SOLAR = "/apis/solar.opendefense.cloud/v1alpha1/namespaces/{ns}/{plural}"
PORCH = "/apis/porch.kpt.dev/v1alpha2/namespaces/{ns}/packagerevisions"
MERGE = "application/merge-patch+json"
CONFIGMAPS = "/api/v1/namespaces/{ns}/configmaps"
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/{kind}s/catalog-warden"
VALIDATING = "validatingwebhookconfiguration.admissionregistration.k8s.io"
CLEANUP_TIMEOUT = 60.0
"""The namespace controller and the garbage collector retry with backoff; both finish in seconds."""


def solar(ns: str, plural: str) -> str:
    return SOLAR.format(ns=ns, plural=plural)


def component(name: str, ns: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "solar.opendefense.cloud/v1alpha1", "kind": "Component", "metadata": meta, "spec": {}}


def version(name: str, ns: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owner:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "ComponentVersion",
        "metadata": meta,
        "spec": {"componentRef": {"name": "demo"}, "tag": "1.0.0"},
    }


def release(name: str, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "Release",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"componentVersionRef": {"name": "demo-1-0-0"}},
    }


def revision(name: str, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "porch.kpt.dev/v1alpha2",
        "kind": "PackageRevision",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"repository": "blueprints", "packageName": "web", "workspaceName": "v1", "source": {"init": {}}},
    }


def refused_dial(hook: str, path: str, server: ServerProcess) -> tuple[str, str]:
    """The start and end of kube-apiserver's message for a call failurePolicy Fail turns into a refusal."""
    return (
        f'Internal error occurred: failed calling webhook "{hook}": failed to call webhook: '
        f'Post "https://catalog-warden.catalog-warden.svc:443{path}?timeout=5s"',
        f"dial tcp 127.0.0.1:{server.port}: connect: connection refused",
    )


def gone(kube: Kube, path: str) -> bool:
    try:
        kube.request("GET", path)
    except NotFound:
        return True
    return False


def test_every_shipped_webhook_exempts_exactly_the_cluster_cleanup_identities(cluster: Cluster) -> None:
    """The matchCondition names the identities the rules exempt (policies.identity), no more, no fewer."""
    for config in (d for d in cluster.applied if d["kind"].endswith("WebhookConfiguration")):
        for hook in config["webhooks"]:
            (condition,) = hook["matchConditions"]
            expression = condition["expression"]
            names = expression.removeprefix("!(request.userInfo.username in [").removesuffix("])")
            assert names != expression, (hook["name"], expression)
            assert {n.strip().strip("'") for n in names.split(",")} == CLUSTER_CLEANUP, hook["name"]


@pytest.fixture
def stopped(cluster: Cluster, server: ServerProcess) -> Iterator[ServerProcess]:
    """The session's server stopped (SIGTERM) for the test; the next test's ``server`` restarts it."""
    server.stop()
    yield server


def test_guarded_writes_are_refused_and_nothing_else(stopped: ServerProcess, admin: Kube, ns: str, name: str) -> None:
    # Created while the server ran: the DELETE below is what the catalog webhook guards.
    stopped.start()
    admin.request("POST", solar(ns, "componentversions"), body=version("demo-1-0-0", ns))
    stopped.stop()

    # kube-system: anything, the guarded kinds included (namespaceSelector), is written.
    configmaps = CONFIGMAPS.format(ns="kube-system")
    admin.request("POST", configmaps, body={"metadata": {"name": name}, "data": {"k": "v"}})
    admin.request("PATCH", f"{configmaps}/{name}", body={"data": {"k": "w"}}, content_type=MERGE)
    admin.request("DELETE", f"{configmaps}/{name}")
    kube_system_revisions = PORCH.format(ns="kube-system")
    admin.request("POST", kube_system_revisions, body=revision(name, "kube-system"))
    admin.request("DELETE", f"{kube_system_revisions}/{name}")
    # Elsewhere, what no validating rule matches: a ComponentVersion's CREATE (its rules are on
    # DELETE alone; the mutating webhook fails open) and any core object.
    admin.request("POST", solar(ns, "componentversions"), body=version("demo-2-0-0", ns))
    admin.request("POST", CONFIGMAPS.format(ns=ns), body={"metadata": {"name": name}})

    refused: dict[str, tuple[str, str]] = {}
    for what, method, path, body in (
        ("delete ComponentVersion", "DELETE", f"{solar(ns, 'componentversions')}/demo-1-0-0", None),
        ("create Release", "POST", solar(ns, "releases"), release("web", ns)),
        ("create PackageRevision", "POST", PORCH.format(ns=ns), revision("web-v1", ns)),
    ):
        with pytest.raises(ApiError) as denied:
            admin.request(method, path, body=body)
        assert denied.value.status == 500, what
        refused[what] = (denied.value.message[:200], denied.value.message[-60:])

    catalog = refused_dial("catalog.validate.catalog-warden.io", "/validate/catalog", stopped)
    packages = refused_dial("packages.validate.catalog-warden.io", "/validate/packages", stopped)
    for what, (start, end) in (
        ("delete ComponentVersion", catalog),
        ("create Release", catalog),
        ("create PackageRevision", packages),
    ):
        message_start, message_end = refused[what]
        assert message_start.startswith(start) and message_end.endswith(end), (what, refused[what])
    assert not gone(admin, f"{solar(ns, 'componentversions')}/demo-1-0-0")


def test_a_namespace_full_of_guarded_objects_is_deleted(
    cluster: Cluster, stopped: ServerProcess, admin: Kube, name: str
) -> None:
    doomed = cluster.namespace(f"{name}-doomed")
    stopped.start()
    admin.request("POST", solar(doomed, "components"), body=component("demo", doomed))
    admin.request("POST", solar(doomed, "componentversions"), body=version("demo-1-0-0", doomed))
    admin.request("POST", solar(doomed, "releases"), body=release("web", doomed))
    stopped.stop()

    admin.request("DELETE", f"/api/v1/namespaces/{doomed}")

    wait_for(lambda: gone(admin, f"/api/v1/namespaces/{doomed}"), f"namespace {doomed} to be deleted", CLEANUP_TIMEOUT)


def test_the_garbage_collector_deletes_guarded_dependents(stopped: ServerProcess, admin: Kube, ns: str) -> None:
    owner = admin.request("POST", CONFIGMAPS.format(ns=ns), body={"metadata": {"name": "owner"}})
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    stopped.start()
    admin.request("POST", solar(ns, "components"), body=component("demo", ns, reference))
    admin.request("POST", solar(ns, "componentversions"), body=version("demo-1-0-0", ns, reference))
    stopped.stop()

    admin.request("DELETE", f"{CONFIGMAPS.format(ns=ns)}/owner")  # background propagation: the GC deletes

    for path in (f"{solar(ns, 'components')}/demo", f"{solar(ns, 'componentversions')}/demo-1-0-0"):
        wait_for(lambda path=path: gone(admin, path), f"the garbage collector to delete {path}", CLEANUP_TIMEOUT)


@contextlib.contextmanager
def reinstalled_webhooks(cluster: Cluster) -> Iterator[None]:
    """Give back the shipped webhook configurations, caBundle injected, whatever the test did."""
    try:
        yield
    finally:
        cluster.apply([d for d in cluster.applied if d["kind"].endswith("WebhookConfiguration")])
        cluster.inject_ca_bundle()


def test_the_admin_edits_and_deletes_our_webhook_configurations(
    cluster: Cluster, stopped: ServerProcess, admin: Kube, kubectl: Kubectl, ns: str
) -> None:
    validating = find(cluster.applied, "ValidatingWebhookConfiguration", "catalog-warden")
    index = next(i for i, w in enumerate(validating["webhooks"]) if w["name"] == "packages.validate.catalog-warden.io")
    revisions = PORCH.format(ns=ns)
    with reinstalled_webhooks(cluster):
        # The emergency exit of docs/install.md, as written there: the packages webhook fails open.
        patch = [{"op": "replace", "path": f"/webhooks/{index}/failurePolicy", "value": "Ignore"}]
        done = kubectl(
            "patch", "validatingwebhookconfiguration", "catalog-warden", "--type=json", "-p", json.dumps(patch)
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"{VALIDATING}/catalog-warden patched"
        # Webhook configuration changes reach the admission plugin through its informer: wait for it.
        wait_for(lambda: creates(admin, revisions, revision("web-v1", ns)), "the failurePolicy Ignore to apply")

        for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
            done = kubectl("delete", kind, "catalog-warden")
            assert done.returncode == 0, done.stderr
            assert gone(admin, WEBHOOKS.format(kind=kind))
    assert (
        admin.request("GET", WEBHOOKS.format(kind="validatingwebhookconfiguration"))["webhooks"][index]["failurePolicy"]
        == "Fail"
    )


def creates(kube: Kube, path: str, body: dict[str, Any]) -> bool:
    """Whether a dry-run create passes admission now (the refused dial is the only error expected)."""
    try:
        kube.request("POST", path, query=[("dryRun", "All")], body=body)
    except ApiError as exc:
        if exc.status == 500 and "failed calling webhook" in exc.message:
            return False
        raise
    return True
