"""Which Registry may lend its credentials to a registry request: tenancy, decided from the objects alone.

A Registry's ``spec.solarSecretRef`` names a Secret in the Registry's own namespace; that Secret
belongs to the namespace's tenant. A request made on behalf of an object in namespace ``N`` for
host ``H`` may therefore use (in this order):

1. a Registry in ``N`` whose ``spec.hostname`` is ``H`` (case-insensitive, as SolAr matches hosts);
2. else a Registry for ``H`` in another namespace ``M`` where a ReferenceGrant in ``M`` admits the
   requesting kind from ``N``: ``spec.from[]`` holds ``{group: solar.opendefense.cloud, kind:
   ComponentVersion, namespace: N}`` and ``spec.to[]`` holds ``{group: solar.opendefense.cloud,
   kind: Registry}``. As everywhere in SolAr (ADR-012, Gateway API's model), the grant lives in the
   namespace of the object *referenced* (the Registry) and names who may refer to it; ``to`` has no
   name, so a grant admits every Registry of ``M``. A grant for another kind (Target -> Registry,
   RenderArtifact -> Registry) is not reused: it was given for another purpose;
3. else nothing: the request is anonymous.

A Registry in ``N`` wins even when it names no Secret: the tenant's own definition of the endpoint
is authoritative, and a grant is not a fallback for a Registry that says "anonymous". Among several
candidates of one step the choice is deterministic, as it was before tenancy: Registries naming a
Secret first, then ``namespace/name`` order; the grant reported is the first admitting one by name.

:class:`CheckedWith` is how the availability status records the outcome
(``status.availability.credentials``), so an entry checked anonymously says why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from policies.kinds import COMPONENT_VERSION, REGISTRY
from policies.model import GroupKind, Obj
from policies.objects import dig, name_of, namespace_of, ref_of
from policies.reference_grants import granted_namespaces
from policies.view import View

MSG_WITH_SECRET = "checked with Secret {secret} of Registry {registry}"
MSG_WITH_GRANTED_SECRET = "checked with Secret {secret} of Registry {registry}, granted by ReferenceGrant {grant}"
MSG_NO_REGISTRY = "checked anonymously: no Registry for {host} in namespace {namespace} or granted to it"
MSG_NO_REGISTRY_NO_GRANTS = "checked anonymously: no Registry for {host} in namespace {namespace}"
MSG_NO_SECRET = "checked anonymously: Registry {registry} names no spec.solarSecretRef"


class SecretRead(StrEnum):
    """What reading the chosen Registry's Secret gave (the shell reads; this module words it)."""

    LOADED = "Loaded"
    MISSING = "Missing"
    UNUSABLE = "Unusable"


MSG_SECRET: Mapping[SecretRead, str] = {
    SecretRead.MISSING: "checked anonymously: Secret {secret} of Registry {registry} not found",
    SecretRead.UNUSABLE: "checked anonymously: Secret {secret} of Registry {registry} is unusable ({error})",
}


REGISTRIES_BY_NAMESPACE_AND_HOST = "registriesByNamespaceAndHostname"
"""Registry index: ``<namespace>/<registry_hostname>``, so a choice reads only the namespaces it may use."""


def registry_hostname(registry: Obj | None) -> str:
    """``spec.hostname`` as hosts are compared: trimmed, without a trailing ``/``, lowercase."""
    return str(dig(registry, "spec", "hostname", default="")).strip().rstrip("/").lower()


def _registries_by_namespace_and_host(registry: Obj) -> Iterable[str]:
    host = registry_hostname(registry)
    if host:
        yield f"{namespace_of(registry)}/{host}"


INDEXES: Mapping[GroupKind, Mapping[str, Callable[[Obj], Iterable[str]]]] = {
    REGISTRY: {REGISTRIES_BY_NAMESPACE_AND_HOST: _registries_by_namespace_and_host}
}
"""Declared with the catalog family's indexes, so the sidecar's cache maintains them."""


def secret_name_of(registry: Obj | None) -> str:
    return str(dig(registry, "spec", "solarSecretRef", "name", default=""))


@dataclass(frozen=True, slots=True)
class CheckedWith:
    """How a request was authenticated, as the status words it; stable while the objects are."""

    text: str
    anonymous: bool


@dataclass(frozen=True, slots=True)
class CredentialSource:
    """The Registry that may lend credentials and ``plainHTTP`` to a request, or none (anonymous).

    ``grant`` is the ReferenceGrant that admitted a Registry of another namespace (None for the
    requester's own). ``why_none`` is the status text when no Registry is visible.
    """

    registry: Obj | None
    grant: Obj | None = None
    why_none: str = ""

    @property
    def key(self) -> str:
        """What tells two sources apart: the Registry's ``namespace/name``, ``""`` when anonymous."""
        return ref_of(self.registry) if self.registry is not None else ""

    @property
    def secret(self) -> tuple[str, str] | None:
        """``(namespace, name)`` of the Secret to read: always in the Registry's own namespace."""
        name = secret_name_of(self.registry)
        return (namespace_of(self.registry), name) if self.registry is not None and name else None

    @property
    def plain_http(self) -> bool:
        return bool(dig(self.registry, "spec", "plainHTTP", default=False))

    def checked_with(self, read: SecretRead = SecretRead.LOADED, error: str = "") -> CheckedWith:
        """The status text once the Secret was read (``read``; ``error`` says why it is unusable)."""
        registry = self.key
        if self.registry is None:
            return CheckedWith(self.why_none, anonymous=True)
        if self.secret is None:
            return CheckedWith(MSG_NO_SECRET.format(registry=registry), anonymous=True)
        secret = "/".join(self.secret)
        if read is not SecretRead.LOADED:
            return CheckedWith(MSG_SECRET[read].format(secret=secret, registry=registry, error=error), anonymous=True)
        if self.grant is not None:
            text = MSG_WITH_GRANTED_SECRET.format(secret=secret, registry=registry, grant=ref_of(self.grant))
            return CheckedWith(text, anonymous=False)
        return CheckedWith(MSG_WITH_SECRET.format(secret=secret, registry=registry), anonymous=False)


def _preference(registry: Obj) -> tuple[bool, str, str]:
    return (not secret_name_of(registry), namespace_of(registry), name_of(registry))


def credential_source(
    view: View, namespace: str, host: str, requester: GroupKind | None = COMPONENT_VERSION
) -> CredentialSource:
    """The Registry whose credentials a ``requester`` in ``namespace`` may use for ``host`` (module doc).

    ``requester=None`` consults no ReferenceGrant: only ``namespace``'s own Registries count (the
    chart index, whose repositories are cluster-scoped, passes the warden's namespace). ``view``
    must carry this module's and ``reference_grants``' indexes, as every view built with the
    families' ``INDEXES`` (the informer cache) does.
    """
    wanted = host.strip().rstrip("/").lower()
    own = view.indexed(REGISTRY, REGISTRIES_BY_NAMESPACE_AND_HOST, f"{namespace}/{wanted}")
    if own:
        return CredentialSource(min(own, key=_preference))
    if requester is None:
        return CredentialSource(None, why_none=MSG_NO_REGISTRY_NO_GRANTS.format(host=wanted, namespace=namespace))
    grants = granted_namespaces(view, requester, namespace, REGISTRY)
    granted = [r for ns in grants for r in view.indexed(REGISTRY, REGISTRIES_BY_NAMESPACE_AND_HOST, f"{ns}/{wanted}")]
    if granted:
        chosen = min(granted, key=_preference)
        return CredentialSource(chosen, grants[namespace_of(chosen)])
    return CredentialSource(None, why_none=MSG_NO_REGISTRY.format(host=wanted, namespace=namespace))


def registry_source(registry: Obj) -> CredentialSource:
    """The Registry itself as the source: what acts on a Registry (reclamation) uses its own Secret."""
    return CredentialSource(registry)
