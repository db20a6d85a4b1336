"""The cluster tier: a real control plane per session with ``manifests/`` installed as shipped.

The fixtures live in :mod:`tests.support.controlplane.fixtures` (documented there and in
docs/testing.md); importing them here makes them this directory's.
"""

from tests.support.controlplane.fixtures import (  # noqa: F401
    account_kubeconfig,
    admin,
    cluster,
    kube_as,
    kubectl,
    name,
    new_server,
    ns,
    server,
    server_kube,
    sidecar,
    user_kubeconfig,
    warden_kube,
)
