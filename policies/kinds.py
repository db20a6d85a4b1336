"""The kinds catalog-warden guards (DESIGN.md section 3), named once for every module."""

from __future__ import annotations

from policies.model import GroupKind

SOLAR = "solar.opendefense.cloud"
PORCH = "porch.kpt.dev"
PORCH_CONFIG = "config.porch.kpt.dev"
DECKHOUSE_HELM = "helm.deckhouse.io"

COMPONENT = GroupKind(SOLAR, "Component")
COMPONENT_VERSION = GroupKind(SOLAR, "ComponentVersion")
RELEASE = GroupKind(SOLAR, "Release")
TARGET = GroupKind(SOLAR, "Target")
REGISTRY = GroupKind(SOLAR, "Registry")
REGISTRY_BINDING = GroupKind(SOLAR, "RegistryBinding")
RELEASE_BINDING = GroupKind(SOLAR, "ReleaseBinding")
REFERENCE_GRANT = GroupKind(SOLAR, "ReferenceGrant")
PROFILE = GroupKind(SOLAR, "Profile")
RENDER_TASK = GroupKind(SOLAR, "RenderTask")
RENDER_ARTIFACT = GroupKind(SOLAR, "RenderArtifact")
RENDER_BINDING = GroupKind(SOLAR, "RenderBinding")

PACKAGE_REVISION = GroupKind(PORCH, "PackageRevision")
REPOSITORY = GroupKind(PORCH_CONFIG, "Repository")

HELM_CLUSTER_ADDON = GroupKind(DECKHOUSE_HELM, "HelmClusterAddon")
HELM_CLUSTER_ADDON_CHART = GroupKind(DECKHOUSE_HELM, "HelmClusterAddonChart")
HELM_CLUSTER_ADDON_REPOSITORY = GroupKind(DECKHOUSE_HELM, "HelmClusterAddonRepository")

CATALOG_RENDER_KINDS = frozenset({RENDER_TASK, RENDER_ARTIFACT, RENDER_BINDING})
"""SolAr's rendering bookkeeping, served in standalone mode so its controllers work against our CRDs.
No rule reads them, so the informer cache does not hold them (webhook/kube/cache.py)."""
CATALOG_KINDS = (
    frozenset(
        {
            COMPONENT,
            COMPONENT_VERSION,
            RELEASE,
            TARGET,
            REGISTRY,
            REGISTRY_BINDING,
            RELEASE_BINDING,
            REFERENCE_GRANT,
            PROFILE,
        }
    )
    | CATALOG_RENDER_KINDS
)
PACKAGES_KINDS = frozenset({PACKAGE_REVISION, REPOSITORY})
CHARTS_KINDS = frozenset({HELM_CLUSTER_ADDON, HELM_CLUSTER_ADDON_CHART, HELM_CLUSTER_ADDON_REPOSITORY})

# Built-in kinds the sidecar and the informer cache touch.
NAMESPACE = GroupKind("", "Namespace")
SECRET = GroupKind("", "Secret")
CONFIG_MAP = GroupKind("", "ConfigMap")
EVENT = GroupKind("", "Event")
LEASE = GroupKind("coordination.k8s.io", "Lease")
