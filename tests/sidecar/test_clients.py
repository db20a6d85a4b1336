"""The registry client pool: one client per (endpoint, lending Registry), Secrets read only where they may be."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from policies.families import INDEXES
from policies.kinds import REFERENCE_GRANT, REGISTRY
from policies.registry_credentials import MSG_NO_REGISTRY_NO_GRANTS, MSG_SECRET, SecretRead
from policies.view import MemoryView
from webhook.registry.client import RegistryClient
from webhook.registry.credentials import MISSING_KEYS, Credentials
from webhook.sidecar.clients import Endpoint, RegistryClients

pytestmark = pytest.mark.anyio

H = "reg.example:5000"
SOLAR = "solar.opendefense.cloud"


def registry(ns: str, name: str = "reg", secret: str = "creds") -> dict[str, Any]:
    spec: dict[str, Any] = {"hostname": H}
    if secret:
        spec["solarSecretRef"] = {"name": secret}
    return {"kind": "Registry", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def grant(ns: str, from_ns: str) -> dict[str, Any]:
    spec = {
        "from": [{"group": SOLAR, "kind": "ComponentVersion", "namespace": from_ns}],
        "to": [{"group": SOLAR, "kind": "Registry"}],
    }
    return {"kind": "ReferenceGrant", "metadata": {"name": "g", "namespace": ns}, "spec": spec}


def secret_data(user: str) -> dict[str, str]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in (("username", user), ("password", f"{user}-pw"))}


class Pool:
    """A pool over a MemoryView, a Secret store that records every read, and a factory that records endpoints."""

    def __init__(self, *objects: dict[str, Any], secrets: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.view = MemoryView(INDEXES)
        for obj in objects:
            self.view.put(REGISTRY if obj["kind"] == "Registry" else REFERENCE_GRANT, obj)
        self.secrets = secrets
        self.reads: list[tuple[str, str]] = []
        self.endpoints: list[Endpoint] = []
        self.clients = RegistryClients(self.view, self.read, self.factory)

    def read(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads.append((namespace, name))
        return self.secrets.get((namespace, name))

    def factory(self, endpoint: Endpoint) -> RegistryClient:
        self.endpoints.append(endpoint)
        return RegistryClient(endpoint.hostname, plain_http=endpoint.plain_http, credentials=endpoint.credentials)


SECRETS = {("team-a", "creds"): {"data": secret_data("a")}, ("team-b", "creds"): {"data": secret_data("b")}}


async def test_tenants_never_share_a_credentialed_client_and_secrets_are_read_only_where_lent() -> None:
    pool = Pool(registry("team-a"), registry("team-b"), secrets=SECRETS)
    a = await pool.clients.for_namespace("team-a", H)
    b = await pool.clients.for_namespace("team-b", H)
    x = await pool.clients.for_namespace("team-x", H)
    y = await pool.clients.for_namespace("team-y", H)
    assert len({id(a.client), id(b.client), id(x.client)}) == 3
    assert x.client is y.client, "anonymous lookups share one client per endpoint"
    assert [e.credentials for e in pool.endpoints] == [Credentials("a", "a-pw"), Credentials("b", "b-pw"), None]
    assert sorted(pool.reads) == [("team-a", "creds"), ("team-b", "creds")], "team-x's lookups read no Secret"
    assert (await pool.clients.for_namespace("team-a", H)).client is a.client, "kept across calls"
    await pool.clients.aclose()


async def test_a_granted_namespace_uses_the_lending_registrys_client_and_secret() -> None:
    pool = Pool(registry("team-a"), grant("team-a", "team-x"), secrets=SECRETS)
    a = await pool.clients.for_namespace("team-a", H)
    x = await pool.clients.for_namespace("team-x", H)
    assert x.client is a.client and not x.checked_with.anonymous
    assert pool.reads == [("team-a", "creds")]
    await pool.clients.aclose()


async def test_reclamation_acts_on_a_registry_with_its_own_secret_only() -> None:
    """``aaa/reg`` names the same host and sorts first; reclaiming ``team-b/reg`` must not use it."""
    secrets = {**SECRETS, ("aaa", "creds"): {"data": secret_data("aaa")}}
    pool = Pool(registry("aaa"), registry("team-b"), secrets=secrets)
    await pool.clients.for_registry(registry("team-b"))
    assert pool.reads == [("team-b", "creds")]
    assert pool.endpoints[-1].credentials == Credentials("b", "b-pw")
    await pool.clients.aclose()


async def test_the_cluster_scoped_chart_index_borrows_no_tenants_secret() -> None:
    pool = Pool(registry("team-a"), grant("team-a", "catalog-warden"), secrets=SECRETS)
    pooled = await pool.clients.for_namespace("catalog-warden", H, requester=None)
    assert pool.reads == [] and pool.endpoints[-1].credentials is None
    assert pooled.checked_with.text == MSG_NO_REGISTRY_NO_GRANTS.format(host=H, namespace="catalog-warden")
    pool.view.put(REGISTRY, registry("catalog-warden", secret="creds"))
    pool.secrets[("catalog-warden", "creds")] = {"data": secret_data("warden")}
    await pool.clients.for_namespace("catalog-warden", H, requester=None)
    assert pool.reads == [], "the choice holds for the rest of the pass"
    pool.clients.begin_pass()
    await pool.clients.for_namespace("catalog-warden", H, requester=None)
    assert pool.reads == [("catalog-warden", "creds")]
    await pool.clients.aclose()


@pytest.mark.parametrize(
    ("stored", "read", "error"),
    [
        (None, SecretRead.MISSING, ""),
        ({"data": {"username": "YQ=="}}, SecretRead.UNUSABLE, MISSING_KEYS.format(keys="'password'")),
    ],
)
async def test_a_secret_that_gives_no_credentials_is_anonymous_and_says_so(
    stored: dict[str, Any] | None, read: SecretRead, error: str
) -> None:
    pool = Pool(registry("team-a"), secrets={("team-a", "creds"): stored} if stored else {})
    pooled = await pool.clients.for_namespace("team-a", H)
    assert pool.endpoints[-1].credentials is None and pooled.checked_with.anonymous
    assert pooled.checked_with.text == MSG_SECRET[read].format(
        secret="team-a/creds", registry="team-a/reg", error=error
    )
    await pool.clients.aclose()
