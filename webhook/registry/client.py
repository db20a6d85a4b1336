"""An async OCI distribution client: the few calls a catalog needs, with their quirks handled.

One client per registry (hostname, scheme, credentials, CA); it is safe to share between
concurrent tasks, which share its connection pool and token cache. The client never sleeps and
never retries on its own (except the one retry that answers an auth challenge): a 429 raises
:class:`~webhook.registry.errors.RateLimited` with ``retry_after`` and the caller decides.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Self
from urllib.parse import quote, urljoin, urlsplit

import httpx

from webhook.registry.auth import Authenticator
from webhook.registry.credentials import Credentials
from webhook.registry.errors import InvalidResponse, RequestTimeout, ResponseError, TransportError, Unsupported
from webhook.registry.media_types import MANIFEST_ACCEPT
from webhook.registry.references import check_digest, check_reference, check_repository, check_tag, is_digest
from webhook.registry.responses import status_error

DEFAULT_TIMEOUT = 10.0
"""Seconds for connect, read, write and pool wait each (httpx semantics)."""

MAX_REDIRECTS = 5
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
"""Distribution's own limit for a manifest; a larger answer is not a manifest."""
MAX_LIST_BYTES = 16 * 1024 * 1024
MAX_PAGES = 10_000

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
CATALOG_SCOPE = "registry:catalog:*"

TAG_DELETE_UNSUPPORTED: Mapping[int, type[ResponseError]] = {400: Unsupported, 405: Unsupported}
"""Distribution 2.8 answers ``400 DIGEST_INVALID`` to a tag delete: it has no untag."""

_LINK = re.compile(r"<([^>]*)>((?:\s*;\s*[^;,]*)*)")
_REL_NEXT = re.compile(r';\s*rel\s*=\s*"?([^";]*)"?')


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Descriptor:
    """What a manifest request tells about an artifact: its digest, media type and size in bytes.

    ``size`` is ``None`` when a HEAD answer carried no Content-Length.
    """

    digest: str
    media_type: str
    size: int | None


@dataclass(frozen=True, slots=True)
class Manifest:
    """A fetched manifest: its descriptor and the exact bytes (whose sha256 is the digest)."""

    descriptor: Descriptor
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    url: str
    headers: httpx.Headers
    body: bytes


def tls_context(ca_pem: str) -> ssl.SSLContext:
    """A client TLS context that trusts exactly the CA certificates in ``ca_pem``."""
    return ssl.create_default_context(cadata=ca_pem)


@functools.cache
def default_tls_context() -> ssl.SSLContext:
    """httpx's default verifying context, built once: loading the trust store costs ~50-150 ms per
    client, and the sidecar keeps one client per (registry, lending Registry), not one per registry."""
    return httpx.create_ssl_context()


class RegistryClient:
    """Talks to one registry at ``hostname`` (``host[:port]``, no scheme), over HTTPS unless ``plain_http``.

    ``ca_pem`` replaces the system trust store with the given CA certificates; ``clock`` is the
    time source for token expiry and Retry-After dates; ``transport`` is for tests only.
    """

    def __init__(
        self,
        hostname: str,
        *,
        plain_http: bool = False,
        credentials: Credentials | None = None,
        ca_pem: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        clock: Callable[[], datetime] = utc_now,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not hostname or "/" in hostname or "://" in hostname:
            raise ValueError(f"registry hostname must be host[:port] without scheme or path, got {hostname!r}")
        scheme = "http" if plain_http else "https"
        self.base_url = f"{scheme}://{hostname}"
        self._origin = _origin(self.base_url)
        self._clock = clock
        self._http = httpx.AsyncClient(
            verify=tls_context(ca_pem) if ca_pem else default_tls_context(),
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,
            transport=transport,
        )
        self._auth = Authenticator(self._http, credentials, clock)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- operations ---------------------------------------------------------------------------

    async def ping(self) -> None:
        """Check that the registry speaks the distribution API and accepts our credentials (``GET /v2/``)."""
        await self._request("GET", self._url("/v2/"), None, max_body=MAX_LIST_BYTES)

    async def catalog(self, page_size: int | None = None) -> list[str]:
        """Every repository, following ``Link: <...>; rel="next"`` pages (relative links resolved).

        A repository missing from the catalog is not proof of absence (the spec says so).
        """
        return sorted(set(await self._pages(self._url("/v2/_catalog"), CATALOG_SCOPE, "repositories", page_size)))

    async def tags(self, repository: str, page_size: int | None = None) -> list[str]:
        """Every tag of ``repository``, sorted here: registries may ignore ``n`` and answer unsorted."""
        path = f"/v2/{check_repository(repository)}/tags/list"
        return sorted(set(await self._pages(self._url(path), _pull(repository), "tags", page_size)))

    async def head_manifest(self, repository: str, reference: str) -> Descriptor:
        """Resolve a tag or digest with one HEAD; raises :class:`NotFound` when it does not exist."""
        answer = await self._request(
            "HEAD", self._manifest_url(repository, reference), _pull(repository), accept_header=MANIFEST_ACCEPT
        )
        digest = answer.headers.get("docker-content-digest") or (reference if is_digest(reference) else None)
        if not digest:
            raise InvalidResponse(f"HEAD {answer.url}: no Docker-Content-Digest header")
        length = answer.headers.get("content-length")
        return Descriptor(digest, _media_type(answer.headers), int(length) if length and length.isdigit() else None)

    async def get_manifest(self, repository: str, reference: str) -> Manifest:
        """Fetch a manifest; its bytes are checked against the digest the registry and the reference claim."""
        answer = await self._request(
            "GET",
            self._manifest_url(repository, reference),
            _pull(repository),
            accept_header=MANIFEST_ACCEPT,
            max_body=MAX_MANIFEST_BYTES,
        )
        computed = "sha256:" + hashlib.sha256(answer.body).hexdigest()
        for claimed in (answer.headers.get("docker-content-digest"), reference if is_digest(reference) else None):
            if claimed and claimed.startswith("sha256:") and claimed != computed:
                raise InvalidResponse(f"GET {answer.url}: content digest {computed} does not match {claimed}")
        digest = answer.headers.get("docker-content-digest") or computed
        return Manifest(Descriptor(digest, _media_type(answer.headers), len(answer.body)), answer.body)

    async def delete_manifest(self, repository: str, digest: str) -> None:
        """Delete a manifest by digest; every tag pointing at it disappears with it.

        Raises :class:`Unsupported` when the registry has deletes disabled (405).
        """
        url = self._manifest_url(repository, check_digest(digest))
        await self._request("DELETE", url, _delete(repository), accept=(200, 202, 204))

    async def delete_tag(self, repository: str, tag: str) -> None:
        """Remove only the tag (zot, distribution 3.x); the manifest stays, untagged.

        Raises :class:`Unsupported` where the registry has no untag (distribution 2.8 answers 400).
        """
        url = self._manifest_url(repository, check_tag(tag))
        await self._request(
            "DELETE", url, _delete(repository), accept=(200, 202, 204), overrides=TAG_DELETE_UNSUPPORTED
        )

    # -- plumbing -----------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return self.base_url + path

    def _manifest_url(self, repository: str, reference: str) -> str:
        check_repository(repository)
        check_reference(reference)
        return self._url(f"/v2/{repository}/manifests/{quote(reference, safe=':')}")

    async def _pages(self, url: str, scope: str, key: str, page_size: int | None) -> list[str]:
        items: list[str] = []
        next_url: str | None = url + (f"?n={page_size}" if page_size is not None else "")
        seen: set[str] = set()
        while next_url is not None:
            if next_url in seen or len(seen) >= MAX_PAGES:
                raise InvalidResponse(f"GET {next_url}: pagination does not end")
            seen.add(next_url)
            answer = await self._request("GET", next_url, scope, max_body=MAX_LIST_BYTES)
            items.extend(_string_list(answer, key))
            next_url = _next_link(answer)
            if next_url is not None and _origin(next_url) != self._origin:
                raise InvalidResponse(f"GET {answer.url}: next page link leaves the registry: {next_url}")
        return items

    async def _request(
        self,
        method: str,
        url: str,
        scope: str | None,
        *,
        accept: tuple[int, ...] = (200,),
        accept_header: str | None = None,
        overrides: Mapping[int, type[ResponseError]] | None = None,
        max_body: int = 0,
    ) -> _Answer:
        headers = {"Accept": accept_header} if accept_header else {}
        authorization = await self._auth.authorization(scope)
        answer = await self._follow(method, url, headers, authorization, max_body)
        if answer.status == 401 and _origin(answer.url) == self._origin:
            retry = await self._auth.answer(answer.headers.get("www-authenticate", ""), scope, authorization)
            if retry is not None:
                answer = await self._follow(method, url, headers, retry, max_body)
        if answer.status not in accept:
            raise status_error(method, answer.url, answer.status, answer.body, answer.headers, self._clock(), overrides)
        return answer

    async def _follow(
        self, method: str, url: str, headers: dict[str, str], authorization: str | None, max_body: int
    ) -> _Answer:
        """Send, following redirects by hand so credentials go only to the registry's own origin."""
        for _ in range(MAX_REDIRECTS + 1):
            send = dict(headers)
            if authorization and _origin(url) == self._origin:
                send["Authorization"] = authorization
            answer = await self._send(method, url, send, max_body)
            location = answer.headers.get("location")
            if answer.status not in REDIRECT_STATUSES or not location:
                return answer
            url = urljoin(url, location)
            if answer.status == 303 and method != "HEAD":
                method = "GET"
        raise InvalidResponse(f"{method} {url}: more than {MAX_REDIRECTS} redirects")

    async def _send(self, method: str, url: str, headers: dict[str, str], max_body: int) -> _Answer:
        try:
            async with self._http.stream(method, url, headers=headers) as response:
                body = b""
                if method != "HEAD" and response.status_code not in REDIRECT_STATUSES:
                    body = await _read_capped(response, max(max_body, 64 * 1024), method, url)
                return _Answer(response.status_code, str(response.url), response.headers, body)
        except httpx.TimeoutException as exc:
            raise RequestTimeout(f"{method} {url}: timed out ({type(exc).__name__})") from exc
        except httpx.HTTPError as exc:
            raise TransportError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc


async def _read_capped(response: httpx.Response, limit: int, method: str, url: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise InvalidResponse(f"{method} {url}: answer larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def _pull(repository: str) -> str:
    return f"repository:{repository}:pull"


def _delete(repository: str) -> str:
    return f"repository:{repository}:delete"


def _media_type(headers: httpx.Headers) -> str:
    return headers.get("content-type", "").split(";", 1)[0].strip()


def _next_link(answer: _Answer) -> str | None:
    for match in _LINK.finditer(answer.headers.get("link", "")):
        rel = _REL_NEXT.search(match.group(2))
        if rel is not None and "next" in rel.group(1).split():
            return urljoin(answer.url, match.group(1))
    return None


def _string_list(answer: _Answer, key: str) -> list[str]:
    try:
        doc = json.loads(answer.body)
    except ValueError as exc:
        raise InvalidResponse(f"GET {answer.url}: answer is not JSON") from exc
    values = doc.get(key) if isinstance(doc, dict) else None
    if values is None and isinstance(doc, dict):
        return []  # distribution answers "tags": null for a repository without tags
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise InvalidResponse(f"GET {answer.url}: {key!r} is not a list of strings")
    return values
