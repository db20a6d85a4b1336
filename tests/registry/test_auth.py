"""Basic and Bearer token auth against real docker-registry instances (htpasswd, token issuer)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from policies.availability import Outcome
from tests.support.registry import TEST_PASSWORD, TEST_USER, TokenRequest, push_helm_chart
from webhook.registry import Credentials, NotFound, RegistryClient, RegistryError, Unauthorized, UnexpectedStatus
from webhook.sidecar.outcomes import outcome_of

pytestmark = pytest.mark.anyio

USER = Credentials(TEST_USER, TEST_PASSWORD)


class Clock:
    """A hand-moved clock for token expiry."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


async def test_basic_auth_with_the_right_password_answers_and_costs_one_request_once_learned(
    basic_registry, repo, counting
):
    with basic_registry.http() as http:
        pushed = push_helm_chart(http, repo, "chart", "1.0.0")
    async with RegistryClient(basic_registry.hostname, plain_http=True, credentials=USER, transport=counting) as client:
        await client.ping()
        assert counting.requests == [("GET", "/v2/"), ("GET", "/v2/")]  # challenge, then answered
        counting.requests.clear()
        assert (await client.head_manifest(pushed.repository, "1.0.0")).digest == pushed.digest
        assert await client.tags(pushed.repository) == ["1.0.0"]
    assert len(counting.requests) == 2


@pytest.mark.parametrize("credentials", [None, Credentials(TEST_USER, "wrong")], ids=["anonymous", "wrong-password"])
async def test_basic_auth_without_valid_credentials_is_unauthorized(basic_registry, credentials, counting):
    async with RegistryClient(
        basic_registry.hostname, plain_http=True, credentials=credentials, transport=counting
    ) as client:
        with pytest.raises(Unauthorized) as raised:
            await client.ping()
    assert raised.value.status == 401
    assert raised.value.codes == ("UNAUTHORIZED",)
    assert len(counting.requests) == (1 if credentials is None else 2)


async def test_anonymous_bearer_token_pulls_but_cannot_list_the_catalog(token_registry, token_server, repo):
    with token_registry.http() as http:
        pushed = push_helm_chart(http, repo, "chart", "1.0.0")
    token_server.requests.clear()
    async with RegistryClient(token_registry.hostname, plain_http=True) as client:
        assert (await client.head_manifest(pushed.repository, "1.0.0")).digest == pushed.digest
        with pytest.raises(Unauthorized):
            await client.catalog()
    assert token_server.requests[0] == TokenRequest(
        None, token_server.service, (f"repository:{pushed.repository}:pull",)
    )
    assert token_server.requests[-1] == TokenRequest(None, token_server.service, ("registry:catalog:*",))


async def test_user_bearer_token_lists_the_catalog_and_deletes(token_registry, token_server, repo):
    with token_registry.http() as http:
        pushed = push_helm_chart(http, repo, "chart", "1.0.0")
    async with RegistryClient(token_registry.hostname, plain_http=True, credentials=USER) as client:
        assert pushed.repository in await client.catalog()
        await client.delete_manifest(pushed.repository, pushed.digest)
        assert await client.tags(pushed.repository) == []
    users = {r.user for r in token_server.requests[-2:]}
    assert users == {TEST_USER}


async def test_wrong_password_at_the_token_server_is_unauthorized(token_registry):
    async with RegistryClient(
        token_registry.hostname, plain_http=True, credentials=Credentials(TEST_USER, "wrong")
    ) as client:
        with pytest.raises(Unauthorized) as raised:
            await client.tags("any/repo")
    assert raised.value.url.startswith(token_registry.auth.realm)


async def test_tokens_are_cached_per_scope_until_they_expire(token_registry, token_server, repo, counting, monkeypatch):
    with token_registry.http() as http:
        first = push_helm_chart(http, repo, "one", "1.0.0")
        second = push_helm_chart(http, repo, "two", "1.0.0")
    clock = Clock()
    monkeypatch.setattr(token_server, "expires_in", 60)
    token_server.requests.clear()
    async with RegistryClient(
        token_registry.hostname, plain_http=True, credentials=USER, clock=clock, transport=counting
    ) as client:
        await client.head_manifest(first.repository, "1.0.0")  # 401, token, retry
        await client.head_manifest(first.repository, "1.0.0")  # cached token: one request
        await client.tags(first.repository)  # same scope: one request
        assert len(token_server.requests) == 1
        assert len(counting.requests) == 5

        await client.head_manifest(second.repository, "1.0.0")  # another scope: token first, no 401
        assert [r.scopes for r in token_server.requests] == [
            (f"repository:{first.repository}:pull",),
            (f"repository:{second.repository}:pull",),
        ]
        assert len(counting.requests) == 7

        clock.now += timedelta(seconds=54)  # inside the lifetime minus the 5 s margin
        await client.head_manifest(first.repository, "1.0.0")
        assert len(token_server.requests) == 2
        clock.now += timedelta(seconds=1)  # 55 s: within the margin, fetched again
        await client.head_manifest(first.repository, "1.0.0")
        assert len(token_server.requests) == 3


async def test_concurrent_requests_for_one_scope_share_one_token(token_registry, token_server, repo, counting):
    with token_registry.http() as http:
        pushed = push_helm_chart(http, repo, "chart", "1.0.0")
    token_server.requests.clear()
    async with RegistryClient(token_registry.hostname, plain_http=True, transport=counting) as client:
        digests = await asyncio.gather(*(client.head_manifest(pushed.repository, "1.0.0") for _ in range(8)))
    assert {d.digest for d in digests} == {pushed.digest}
    assert len(token_server.requests) == 1


async def test_a_token_endpoint_answering_404_is_not_a_missing_manifest():
    """Only the registry can say a manifest is missing: a 404 from the token realm is a failed read,
    which the availability loop must take as Unknown, never as a miss toward Available=False."""
    realm = "http://auth.test/token"

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.host == "auth.test":
            return httpx.Response(404, json={"errors": [{"code": "NOT_FOUND", "message": "no such route"}]})
        return httpx.Response(401, headers={"WWW-Authenticate": f'Bearer realm="{realm}",service="reg"'})

    async with RegistryClient("reg.test", plain_http=True, transport=httpx.MockTransport(answer)) as client:
        with pytest.raises(RegistryError) as raised:
            await client.head_manifest("ocm/component-descriptors/example.com/demo", "1.0.0")
    assert not isinstance(raised.value, NotFound)
    assert isinstance(raised.value, UnexpectedStatus) and raised.value.status == 404
    assert raised.value.url == realm
    assert outcome_of(raised.value) is Outcome.SERVER_ERROR
