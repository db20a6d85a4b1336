"""One shared registry client per registry endpoint, with credentials from the Registry's Secret.

A registry is named by its host (``host[:port]``, as Components and Registries spell it). The
Registry object whose ``spec.hostname`` equals it (case-insensitively) supplies the credentials
(the Secret named by ``spec.solarSecretRef``, in the Registry's namespace, keys ``username`` and
``password``) and ``spec.plainHTTP``. When several Registries name one host, the first one with a
Secret in ``namespace/name`` order is used, so every pass picks the same. Without a Registry
object the client is anonymous: an anonymous HEAD that meets a 401 makes the entry Unknown,
never False.

Clients are kept across passes (they hold the connection pool and the token cache) and replaced
only when the credentials change. Secrets are read once per pass at most (a GET, never a write).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from policies.kinds import REGISTRY
from policies.model import Obj
from policies.objects import dig, name_of, namespace_of
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


def registry_hostname(registry: Obj) -> str:
    return str(dig(registry, "spec", "hostname", default="")).strip().rstrip("/").lower()


class RegistryClients:
    """The pool. ``begin_pass()`` forgets the Secrets read so far; ``aclose()`` closes every client."""

    def __init__(self, view: View, read_secret: SecretReader, factory: ClientFactory = default_factory) -> None:
        self.view = view
        self.read_secret = read_secret
        self.factory = factory
        self._clients: dict[tuple[str, bool], tuple[Endpoint, RegistryClient]] = {}
        self._secrets: dict[tuple[str, str], Credentials | None] = {}
        self._lock = asyncio.Lock()

    def begin_pass(self) -> None:
        self._secrets.clear()

    def registry_for(self, hostname: str) -> Obj | None:
        """The Registry object for ``hostname`` (see the module doc for the choice among several)."""
        host = hostname.lower()
        found = [r for r in self.view.list(REGISTRY) if registry_hostname(r) == host]
        found.sort(key=lambda r: (not dig(r, "spec", "solarSecretRef", "name"), namespace_of(r), name_of(r)))
        return found[0] if found else None

    async def client(self, hostname: str, plain_http: bool = False) -> RegistryClient:
        """The shared client for ``hostname``; plain HTTP when the caller or the Registry says so."""
        async with self._lock:
            registry = self.registry_for(hostname)
            plain = plain_http or bool(dig(registry, "spec", "plainHTTP", default=False))
            endpoint = Endpoint(hostname, plain, await self._credentials(registry))
            key = (hostname.lower(), plain)
            held = self._clients.get(key)
            if held is not None and held[0] == endpoint:
                return held[1]
            if held is not None:
                await held[1].aclose()
            client = self.factory(endpoint)
            self._clients[key] = (endpoint, client)
            return client

    async def _credentials(self, registry: Obj | None) -> Credentials | None:
        secret_name = str(dig(registry, "spec", "solarSecretRef", "name", default=""))
        if registry is None or not secret_name:
            return None
        key = (namespace_of(registry), secret_name)
        if key not in self._secrets:
            self._secrets[key] = await asyncio.to_thread(self._read, *key)
        return self._secrets[key]

    def _read(self, namespace: str, name: str) -> Credentials | None:
        secret = self.read_secret(namespace, name)
        if secret is None:
            log.warning("registry secret not found", extra={"fields": {"secret": f"{namespace}/{name}"}})
            return None
        try:
            return credentials_from_secret_data(secret.get("data"))
        except InvalidSecret as exc:
            log.warning(
                "registry secret unusable", extra={"fields": {"secret": f"{namespace}/{name}", "error": str(exc)}}
            )
            return None

    async def aclose(self) -> None:
        async with self._lock:
            clients = [client for _, client in self._clients.values()]
            self._clients.clear()
        for client in clients:
            await client.aclose()
