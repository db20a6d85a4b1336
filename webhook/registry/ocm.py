"""OCM naming conventions in OCI: re-exported from :mod:`policies.artifacts`, where they live.

The registry client and the sidecar's pure decisions must derive artifact coordinates the same
way, so there is one implementation, in the policy layer.
"""

from __future__ import annotations

from policies.artifacts import (
    COMPONENT_DESCRIPTORS,
    OCM_META_SEPARATOR,
    component_descriptor_repository,
    ocm_tag,
    ocm_version,
    split_component_descriptor_repository,
)

__all__ = [
    "COMPONENT_DESCRIPTORS",
    "OCM_META_SEPARATOR",
    "component_descriptor_repository",
    "ocm_tag",
    "ocm_version",
    "split_component_descriptor_repository",
]
