"""The OCI distribution client the sidecar loops use, and the OCM naming helpers.

Public surface: :class:`RegistryClient` (ping, catalog, tags, manifest HEAD/GET, delete by
digest or tag), its results :class:`Descriptor` and :class:`Manifest`, :class:`Credentials`
and :func:`credentials_from_secret_data`, the exception hierarchy of :mod:`.errors`, and the
OCM helpers :func:`ocm_tag` and :func:`component_descriptor_repository`.
"""

from webhook.registry.client import DEFAULT_TIMEOUT, Descriptor, Manifest, RegistryClient, tls_context
from webhook.registry.credentials import Credentials, InvalidSecret, credentials_from_secret_data
from webhook.registry.errors import (
    ErrorDetail,
    Forbidden,
    InvalidResponse,
    NotFound,
    RateLimited,
    RegistryError,
    RequestTimeout,
    ResponseError,
    TransportError,
    Unauthorized,
    UnexpectedStatus,
    Unsupported,
)
from webhook.registry.ocm import (
    component_descriptor_repository,
    ocm_tag,
    ocm_version,
    split_component_descriptor_repository,
)
from webhook.registry.references import InvalidReference, is_digest

__all__ = [
    "DEFAULT_TIMEOUT",
    "Credentials",
    "Descriptor",
    "ErrorDetail",
    "Forbidden",
    "InvalidReference",
    "InvalidResponse",
    "InvalidSecret",
    "Manifest",
    "NotFound",
    "RateLimited",
    "RegistryClient",
    "RegistryError",
    "RequestTimeout",
    "ResponseError",
    "TransportError",
    "Unauthorized",
    "UnexpectedStatus",
    "Unsupported",
    "component_descriptor_repository",
    "credentials_from_secret_data",
    "is_digest",
    "ocm_tag",
    "ocm_version",
    "split_component_descriptor_repository",
    "tls_context",
]
