"""Registry clients per (endpoint, credential source), with credentials from the chosen Registry's Secret.

Which Registry may lend credentials to a request is decided by ``policies.registry_credentials``
(tenancy): a ComponentVersion in namespace ``N`` is checked with a Registry of ``N`` for its host,
or with another namespace's Registry that a ReferenceGrant there admits to ``N``, or anonymously.
This module only reads the chosen Registry's Secret (``spec.solarSecretRef``, always in that
Registry's own namespace, keys ``username`` and ``password``) and hands out the client.

Clients are keyed by (hostname, plain HTTP, the Registry lending credentials), so two tenants
never share a credentialed client (nor its token cache); anonymous requests share one client per
endpoint. Clients are kept across passes (they hold the connection pool and the token cache) and
replaced only when their credentials change. Each Secret is read once per pass at most (a GET,
never a write), and the choice is made once per (namespace, host) and pass. A client whose
Registry is gone stays idle until :meth:`RegistryClients.aclose`.

The three users: availability asks :meth:`RegistryClients.for_namespace` with the entry's namespace;
reclamation asks :meth:`RegistryClients.for_registry` with the Registry it reclaims in; the chart
index (cluster-scoped repositories, owned by no tenant) asks for the warden's namespace with no
grants, so only a Registry an operator put there lends credentials to it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from policies.kinds import COMPONENT_VERSION
from policies.model import GroupKind, Obj
from policies.registry_credentials import (
    CheckedWith,
    CredentialSource,
    SecretRead,
    credential_source,
    registry_source,
)
from policies.registry_credentials import registry_hostname as registry_hostname  # reclaim.py imports it from here
from policies.view import View
from webhook.registry.client import RegistryClient
from webhook.registry.credentials import Credentials, InvalidSecret, credentials_from_secret_data

log = logging.getLogger("catalog_warden.sidecar")

SecretReader = Callable[[str, str], Obj | None]
"""``(namespace, name) -> Secret`` or None when absent; blocking (it runs in a worker thread)."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Everything that makes two clients different."""

    hostname: str
    plain_http: bool
    credentials: Credentials | None


ClientFactory = Callable[[Endpoint], RegistryClient]


def default_factory(endpoint: Endpoint) -> RegistryClient:
    return RegistryClient(endpoint.hostname, plain_http=endpoint.plain_http, credentials=endpoint.credentials)


@dataclass(frozen=True, slots=True)
class PooledClient:
    """A client and how its requests are authenticated (for the status)."""

    client: RegistryClient
    checked_with: CheckedWith


_Read = tuple[Credentials | None, SecretRead, str]
"""A Secret read: the credentials, what the read gave, and why it is unusable."""


class RegistryClients:
    """The pool. ``begin_pass()`` forgets the Secrets read so far; ``aclose()`` closes every client."""

    def __init__(self, view: View, read_secret: SecretReader, factory: ClientFactory = default_factory) -> None:
        self.view = view
        self.read_secret = read_secret
        self.factory = factory
        self._clients: dict[tuple[str, bool, str], tuple[Endpoint, RegistryClient]] = {}
        self._secrets: dict[tuple[str, str], _Read] = {}
        self._chosen: dict[tuple[str, str, bool, GroupKind | None], PooledClient] = {}
        self._lock = asyncio.Lock()

    def begin_pass(self) -> None:
        """Forget the Secrets read and the choices made: each pass decides from the objects as they are."""
        self._secrets.clear()
        self._chosen.clear()

    async def for_namespace(
        self, namespace: str, hostname: str, plain_http: bool = False, requester: GroupKind | None = COMPONENT_VERSION
    ) -> PooledClient:
        """The client a ``requester`` in ``namespace`` may use for ``hostname`` (tenancy: module doc).

        The choice is made once per (namespace, host) and pass: the entries of one namespace share it.
        """
        key = (namespace, hostname.lower(), plain_http, requester)
        pooled = self._chosen.get(key)
        if pooled is None:
            source = credential_source(self.view, namespace, hostname, requester)
            pooled = self._chosen[key] = await self._pooled(hostname, plain_http, source)
        return pooled

    async def for_registry(self, registry: Obj, plain_http: bool = False) -> PooledClient:
        """The client for acting on ``registry`` itself, with its own Secret."""
        return await self._pooled(registry_hostname(registry), plain_http, registry_source(registry))

    async def _pooled(self, hostname: str, plain_http: bool, source: CredentialSource) -> PooledClient:
        async with self._lock:
            plain = plain_http or source.plain_http
            credentials, read, error = await self._credentials(source)
            endpoint = Endpoint(hostname, plain, credentials)
            key = (hostname.lower(), plain, source.key if credentials is not None else "")
            checked_with = source.checked_with(read, error)
            held = self._clients.get(key)
            if held is not None and held[0] == endpoint:
                return PooledClient(held[1], checked_with)
            if held is not None:
                await held[1].aclose()
            client = self.factory(endpoint)
            self._clients[key] = (endpoint, client)
            return PooledClient(client, checked_with)

    async def _credentials(self, source: CredentialSource) -> _Read:
        key = source.secret
        if key is None:
            return None, SecretRead.LOADED, ""
        if key not in self._secrets:
            self._secrets[key] = await asyncio.to_thread(self._read, *key)
        return self._secrets[key]

    def _read(self, namespace: str, name: str) -> _Read:
        secret = self.read_secret(namespace, name)
        if secret is None:
            log.warning("registry secret not found", extra={"fields": {"secret": f"{namespace}/{name}"}})
            return None, SecretRead.MISSING, ""
        try:
            return credentials_from_secret_data(secret.get("data")), SecretRead.LOADED, ""
        except InvalidSecret as exc:
            log.warning(
                "registry secret unusable", extra={"fields": {"secret": f"{namespace}/{name}", "error": str(exc)}}
            )
            return None, SecretRead.UNUSABLE, str(exc)

    async def aclose(self) -> None:
        async with self._lock:
            clients = [client for _, client in self._clients.values()]
            self._clients.clear()
        for client in clients:
            await client.aclose()
