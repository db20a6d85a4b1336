"""Media types the client negotiates and the artifact shapes the catalog knows.

Debian's docker-registry 2.8 answers 404 for an OCI manifest unless an OCI type is in
``Accept`` (even on HEAD by digest), so every manifest request sends :data:`MANIFEST_ACCEPT`.
"""

from __future__ import annotations

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"

MANIFEST_TYPES: tuple[str, ...] = (OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_MANIFEST_LIST)
MANIFEST_ACCEPT = ", ".join(MANIFEST_TYPES)

OCI_EMPTY_CONFIG = "application/vnd.oci.empty.v1+json"

HELM_CONFIG = "application/vnd.cncf.helm.config.v1+json"
HELM_CHART_CONTENT = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
HELM_CHART_PROVENANCE = "application/vnd.cncf.helm.chart.provenance.v1.prov"
HELM_LEGACY_CHART_CONTENT = "application/tar+gzip"

OCM_COMPONENT_CONFIG = "application/vnd.ocm.software.component.config.v1+json"
OCM_DESCRIPTOR_YAML_TAR = "application/vnd.ocm.software.component-descriptor.v2+yaml+tar"
OCM_DESCRIPTOR_JSON = "application/vnd.ocm.software.component-descriptor.v2+json"
OCM_DESCRIPTOR_YAML = "application/vnd.ocm.software.component-descriptor.v2+yaml"
OCM_DESCRIPTOR_ANNOTATION = "software.ocm.descriptor"
