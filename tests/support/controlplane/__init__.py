"""A real Kubernetes control plane for the end-to-end tests (DESIGN.md section 9).

``build.sh`` builds etcd, kube-apiserver and kube-controller-manager at pinned versions from the
Go module proxy into a cache outside the repository; :mod:`.launcher` starts them on 127.0.0.1.
"""

from tests.support.controlplane.launcher import (
    BUILD_SCRIPT,
    ControlPlane,
    ControlPlaneError,
    bin_dir,
    control_plane,
    missing_binaries,
)

__all__ = ["BUILD_SCRIPT", "ControlPlane", "ControlPlaneError", "bin_dir", "control_plane", "missing_binaries"]
