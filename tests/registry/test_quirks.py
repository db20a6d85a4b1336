"""Behaviour a real docker-registry cannot show on demand, against a scripted HTTP server:
rate limits, redirects, broken answers, timeouts and other registries' pagination."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.registry.scripted_server import Seen
from webhook.registry import (
    Credentials,
    Forbidden,
    InvalidResponse,
    RateLimited,
    RegistryClient,
    RequestTimeout,
    TransportError,
    UnexpectedStatus,
    Unsupported,
)
from webhook.registry.media_types import MANIFEST_ACCEPT, OCI_MANIFEST

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
USER = Credentials("user", "secret")
BASIC = USER.basic_header()
MANIFEST = b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","layers":[]}'
DIGEST = "sha256:" + __import__("hashlib").sha256(MANIFEST).hexdigest()


def client_for(server, **kwargs) -> RegistryClient:
    return RegistryClient(server.hostname, plain_http=True, clock=lambda: NOW, **kwargs)


def basic_required(reply):
    """Wrap a route so it answers 401 with a Basic challenge unless the right credentials came."""

    def route(seen: Seen):
        if seen.headers.get("authorization") != BASIC:
            return 401, {"WWW-Authenticate": 'Basic realm="scripted"'}, b""
        return reply(seen)

    return route


def manifest_reply(seen: Seen):
    return 200, {"Content-Type": OCI_MANIFEST, "Docker-Content-Digest": DIGEST}, MANIFEST


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ({"Retry-After": "30"}, timedelta(seconds=30)),
        ({"Retry-After": "Sun, 01 Mar 2026 12:02:05 GMT"}, timedelta(minutes=2, seconds=5)),
        ({"Retry-After": "Sun, 01 Mar 2026 11:00:00 GMT"}, timedelta(0)),
        ({}, None),
        ({"Retry-After": "soon"}, None),
    ],
    ids=["seconds", "http-date", "date-in-the-past", "absent", "unparsable"],
)
async def test_429_raises_rate_limited_with_retry_after_and_never_retries(scripted, header, expected):
    body = b'{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}'
    scripted.route("HEAD", "/v2/charts/a/manifests/1.0.0", lambda seen: (429, header, body))
    async with client_for(scripted) as client:
        with pytest.raises(RateLimited) as raised:
            await client.head_manifest("charts/a", "1.0.0")
    assert raised.value.retry_after == expected
    assert raised.value.status == 429
    assert len(scripted.seen) == 1


async def test_rate_limited_message_names_request_code_and_wait(scripted):
    body = b'{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}'
    scripted.route("GET", "/v2/charts/a/tags/list", lambda seen: (429, {"Retry-After": "7"}, body))
    async with client_for(scripted) as client:
        with pytest.raises(RateLimited) as raised:
            await client.tags("charts/a")
    assert str(raised.value) == (
        f"GET {scripted.base_url}/v2/charts/a/tags/list: HTTP 429 TOOMANYREQUESTS: slow down (retry after 7s)"
    )


async def test_redirect_to_another_host_does_not_carry_credentials(scripted, other_host):
    other_host.route("GET", "/blob-store/manifest", manifest_reply)
    target = f"{other_host.base_url}/blob-store/manifest"
    scripted.route("GET", "/v2/charts/a/manifests/1.0.0", basic_required(lambda seen: (307, {"Location": target}, b"")))
    async with client_for(scripted, credentials=USER) as client:
        manifest = await client.get_manifest("charts/a", "1.0.0")
    assert manifest.descriptor.digest == DIGEST
    assert [s.headers.get("authorization") for s in scripted.seen] == [None, BASIC]
    assert [s.headers.get("authorization") for s in other_host.seen] == [None]
    assert other_host.seen[0].headers["accept"] == MANIFEST_ACCEPT


async def test_redirect_within_the_registry_keeps_credentials(scripted):
    scripted.route(
        "GET", "/v2/charts/a/manifests/1.0.0", basic_required(lambda seen: (302, {"Location": "/moved"}, b""))
    )
    scripted.route("GET", "/moved", basic_required(manifest_reply))
    async with client_for(scripted, credentials=USER) as client:
        await client.get_manifest("charts/a", "1.0.0")
    assert [(s.path, s.headers.get("authorization")) for s in scripted.seen] == [
        ("/v2/charts/a/manifests/1.0.0", None),
        ("/v2/charts/a/manifests/1.0.0", BASIC),
        ("/moved", BASIC),
    ]


async def test_redirect_loop_is_an_invalid_response(scripted):
    scripted.route("HEAD", "/v2/charts/a/manifests/1.0.0", lambda seen: (302, {"Location": "/loop"}, b""))
    scripted.route("HEAD", "/loop", lambda seen: (302, {"Location": "/loop"}, b""))
    async with client_for(scripted) as client:
        with pytest.raises(InvalidResponse, match=r": more than 5 redirects$"):
            await client.head_manifest("charts/a", "1.0.0")
    assert len(scripted.seen) == 6


async def test_server_error_is_unexpected_status_and_forbidden_is_forbidden(scripted):
    scripted.route("HEAD", "/v2/charts/a/manifests/1.0.0", lambda seen: (503, {}, b""))
    scripted.route("HEAD", "/v2/charts/b/manifests/1.0.0", lambda seen: (403, {}, b""))
    async with client_for(scripted) as client:
        with pytest.raises(UnexpectedStatus) as unexpected:
            await client.head_manifest("charts/a", "1.0.0")
        with pytest.raises(Forbidden):
            await client.head_manifest("charts/b", "1.0.0")
    assert unexpected.value.status == 503


async def test_head_without_digest_header_is_invalid_unless_the_reference_is_a_digest(scripted):
    no_digest = lambda seen: (200, {"Content-Type": OCI_MANIFEST, "Content-Length": "86"}, b"")  # noqa: E731
    scripted.route("HEAD", "/v2/charts/a/manifests/1.0.0", no_digest)
    scripted.route("HEAD", f"/v2/charts/a/manifests/{DIGEST}", no_digest)
    async with client_for(scripted) as client:
        with pytest.raises(InvalidResponse, match=r"no Docker-Content-Digest header$"):
            await client.head_manifest("charts/a", "1.0.0")
        descriptor = await client.head_manifest("charts/a", DIGEST)
    assert (descriptor.digest, descriptor.media_type, descriptor.size) == (DIGEST, OCI_MANIFEST, 86)


async def test_manifest_whose_bytes_do_not_match_the_digest_is_refused(scripted):
    wrong = "sha256:" + "0" * 64
    scripted.route(
        "GET",
        "/v2/charts/a/manifests/1.0.0",
        lambda seen: (200, {"Content-Type": OCI_MANIFEST, "Docker-Content-Digest": wrong}, MANIFEST),
    )
    scripted.route("GET", f"/v2/charts/a/manifests/{wrong}", manifest_reply)
    async with client_for(scripted) as client:
        with pytest.raises(InvalidResponse, match=f"content digest {DIGEST} does not match {wrong}$"):
            await client.get_manifest("charts/a", "1.0.0")
        with pytest.raises(InvalidResponse, match=f"content digest {DIGEST} does not match {wrong}$"):
            await client.get_manifest("charts/a", wrong)


async def test_oversized_manifest_is_refused(scripted):
    huge = b" " * (4 * 1024 * 1024 + 1)
    scripted.route("GET", "/v2/charts/a/manifests/1.0.0", lambda seen: (200, {"Content-Type": OCI_MANIFEST}, huge))
    async with client_for(scripted) as client:
        with pytest.raises(InvalidResponse, match=r"answer larger than 4194304 bytes$"):
            await client.get_manifest("charts/a", "1.0.0")


async def test_a_registry_that_does_not_answer_in_time_is_a_timeout(scripted):
    def hang(seen: Seen):
        scripted.release.wait(30)  # released when the fixture stops the server
        return 200, {}, b""

    scripted.route("HEAD", "/v2/charts/a/manifests/1.0.0", hang)
    async with client_for(scripted, timeout=0.2) as client:
        with pytest.raises(RequestTimeout) as raised:
            await client.head_manifest("charts/a", "1.0.0")
    assert isinstance(raised.value, TransportError)


async def test_tag_pages_follow_relative_links_and_sort_the_union(scripted):
    pages = {
        "n=2": ({"Link": '</v2/charts/a/tags/list?n=2&last=b>; rel="next"'}, ["c", "b"]),
        "n=2&last=b": ({"Link": '</v2/charts/a/tags/list?n=2&last=d>; rel="next"'}, ["a", "d"]),
        "n=2&last=d": ({}, ["b1"]),
    }

    def page(seen: Seen):
        headers, tags = pages[seen.query]
        return (
            200,
            {"Content-Type": "application/json", **headers},
            json.dumps({"name": "charts/a", "tags": tags}).encode(),
        )

    scripted.route("GET", "/v2/charts/a/tags/list", page)
    async with client_for(scripted) as client:
        assert await client.tags("charts/a", page_size=2) == ["a", "b", "b1", "c", "d"]
    assert [s.query for s in scripted.seen] == ["n=2", "n=2&last=b", "n=2&last=d"]


async def test_a_next_link_to_another_host_is_not_followed(scripted, other_host):
    link = f'<{other_host.base_url}/v2/_catalog?last=x>; rel="next"'
    scripted.route(
        "GET", "/v2/_catalog", lambda seen: (200, {"Link": link}, json.dumps({"repositories": ["x"]}).encode())
    )
    async with client_for(scripted) as client:
        with pytest.raises(InvalidResponse, match="next page link leaves the registry"):
            await client.catalog()
    assert other_host.seen == []


async def test_a_repository_without_tags_lists_none(scripted):
    scripted.route("GET", "/v2/charts/a/tags/list", lambda seen: (200, {}, b'{"name":"charts/a","tags":null}'))
    async with client_for(scripted) as client:
        assert await client.tags("charts/a") == []


async def test_untag_where_supported_and_deletes_disabled(scripted):
    scripted.route("DELETE", "/v2/charts/a/manifests/1.0.0", lambda seen: (202, {}, b""))
    disabled = b'{"errors":[{"code":"UNSUPPORTED","message":"The operation is unsupported."}]}'
    scripted.route("DELETE", f"/v2/charts/a/manifests/{DIGEST}", lambda seen: (405, {}, disabled))
    async with client_for(scripted) as client:
        await client.delete_tag("charts/a", "1.0.0")  # zot and distribution 3.x untag
        with pytest.raises(Unsupported) as raised:
            await client.delete_manifest("charts/a", DIGEST)
    assert raised.value.codes == ("UNSUPPORTED",)
    assert [(s.method, s.path) for s in scripted.seen] == [
        ("DELETE", "/v2/charts/a/manifests/1.0.0"),
        ("DELETE", f"/v2/charts/a/manifests/{DIGEST}"),
    ]
