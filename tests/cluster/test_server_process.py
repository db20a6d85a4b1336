"""The session's server is a real process behind the Service: stopped, the guarded writes fail as
failurePolicy Fail says; restarted on its port, kube-apiserver reaches it again."""

from __future__ import annotations

import pytest

from policies.packages import FINALIZER
from tests.support.controlplane.cluster import Cluster, ServerProcess
from webhook.kube.client import ApiError, Kube


def revision(name: str, ns: str) -> dict[str, object]:
    return {
        "apiVersion": "porch.kpt.dev/v1alpha2",
        "kind": "PackageRevision",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"repository": "blueprints", "packageName": "web", "workspaceName": "v1", "source": {"init": {}}},
    }


def test_a_stopped_server_fails_closed_and_a_restarted_one_is_reached_again(
    cluster: Cluster, server: ServerProcess, admin: Kube, ns: str
) -> None:
    path = f"/apis/porch.kpt.dev/v1alpha2/namespaces/{ns}/packagerevisions"
    server.stop()

    with pytest.raises(ApiError) as refused:
        admin.request("POST", path, body=revision("web-v1", ns))

    assert refused.value.status == 500
    assert refused.value.message.startswith(
        'Internal error occurred: failed calling webhook "packages.validate.catalog-warden.io": '
        'failed to call webhook: Post "https://catalog-warden.catalog-warden.svc:443/validate/packages?timeout=5s"'
    )
    assert refused.value.message.endswith(f"dial tcp 127.0.0.1:{server.port}: connect: connection refused")

    server.start()
    cluster.wait_webhook()
    # A dry run: the webhooks are called (sideEffects None) and nothing with a finalizer is left behind.
    created = admin.request("POST", path, query=[("dryRun", "All")], body=revision("web-v1", ns))
    # The mutating webhook (failurePolicy Ignore) ran too: it defaults the lifecycle and adds the finalizer.
    assert (created["spec"]["lifecycle"], created["metadata"]["finalizers"]) == ("Draft", [FINALIZER])
