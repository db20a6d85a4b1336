"""Answering registry auth challenges: HTTP Basic and Docker/OCI Bearer tokens.

The client learns the scheme from the first ``WWW-Authenticate`` challenge and from then on
authorizes requests up front, so a steady pass costs one request per operation: Basic is sent
on every request; Bearer tokens are fetched from the challenge's realm once per
(realm, service, scope) and cached until shortly before they expire. Without credentials the
token request is anonymous, and the server may grant fewer actions than asked (not an error
here: the registry's next 401 is).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import httpx

from webhook.registry.credentials import Credentials
from webhook.registry.errors import (
    InvalidResponse,
    RequestTimeout,
    ResponseError,
    TransportError,
    UnexpectedStatus,
)
from webhook.registry.responses import status_error

DEFAULT_TOKEN_LIFETIME = timedelta(seconds=60)
"""The token spec's default when ``expires_in`` is absent."""

TOKEN_EXPIRY_MARGIN = timedelta(seconds=5)
"""A cached token is dropped this long before it expires, so it does not expire in flight."""

TOKEN_STATUS_OVERRIDES: Mapping[int, type[ResponseError]] = {404: UnexpectedStatus}
"""A 404 from the token realm says nothing about the artifact asked for. Raised as
:class:`~webhook.registry.errors.NotFound` it would read as a missing manifest, and a
misrouted auth service would turn every entry of the registry red."""

_SCHEME = re.compile(r"\s*,?\s*([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*)(?=\s|$|,)")
_PARAM = re.compile(r'\s*,?\s*([A-Za-z0-9_-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,\s]*)')


@dataclass(frozen=True, slots=True)
class Challenge:
    """One ``WWW-Authenticate`` challenge: the scheme (lower case) and its parameters."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)

    @property
    def realm(self) -> str:
        return self.params.get("realm", "")

    @property
    def service(self) -> str | None:
        return self.params.get("service")

    @property
    def scope(self) -> str | None:
        return self.params.get("scope")


def parse_challenges(header: str) -> list[Challenge]:
    """Parse a ``WWW-Authenticate`` value, which may hold several challenges.

    Quoted values may contain commas (``scope="repository:a:pull,push"``) and escaped quotes.
    """
    challenges: list[Challenge] = []
    pos = 0
    while pos < len(header):
        scheme = _SCHEME.match(header, pos)
        if scheme is None:
            break
        pos = scheme.end()
        params: dict[str, str] = {}
        while (param := _PARAM.match(header, pos)) is not None:
            value = param.group(2)
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            params[param.group(1).lower()] = value
            pos = param.end()
        challenges.append(Challenge(scheme.group(1).lower(), params))
    return challenges


@dataclass(frozen=True, slots=True)
class _Token:
    value: str
    expires_at: datetime


class TokenCache:
    """Bearer tokens per (realm, service, scope), valid until their expiry minus a margin."""

    def __init__(self) -> None:
        self._tokens: dict[tuple[str, str, str], _Token] = {}

    def get(self, key: tuple[str, str, str], now: datetime) -> str | None:
        token = self._tokens.get(key)
        if token is None or now >= token.expires_at:
            return None
        return token.value

    def put(self, key: tuple[str, str, str], value: str, lifetime: timedelta, now: datetime) -> None:
        self._tokens[key] = _Token(value, now + lifetime - TOKEN_EXPIRY_MARGIN)


class Authenticator:
    """Decides the ``Authorization`` header of each registry request and answers challenges.

    ``scope`` is the token scope an operation needs (``repository:<name>:pull``,
    ``registry:catalog:*``), or ``None`` for the ping.
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        credentials: Credentials | None,
        clock: Callable[[], datetime],
    ) -> None:
        self._http = http
        self._credentials = credentials
        self._clock = clock
        self._challenge: Challenge | None = None
        self._fetching: dict[tuple[str, str, str], asyncio.Lock] = {}
        self.tokens = TokenCache()

    async def authorization(self, scope: str | None) -> str | None:
        """The header to send up front, fetching a token when the scheme is known to be Bearer."""
        challenge = self._challenge
        if challenge is None:
            return None
        if challenge.scheme == "basic":
            return self._credentials.basic_header() if self._credentials else None
        return "Bearer " + await self._token(challenge, scope)

    async def answer(self, header: str, scope: str | None, sent: str | None) -> str | None:
        """The header to retry with after a 401 carrying ``header``, or ``None`` when retrying is pointless.

        Pointless: no supported challenge, Basic without credentials, or the answer would be
        exactly what was already sent.
        """
        usable = [c for c in parse_challenges(header) if c.scheme in ("bearer", "basic")]
        if not usable:
            return None
        challenge = next((c for c in usable if c.scheme == "bearer"), usable[0])
        self._challenge = Challenge(challenge.scheme, {k: v for k, v in challenge.params.items() if k != "scope"})
        if challenge.scheme == "basic":
            retry = self._credentials.basic_header() if self._credentials else None
        else:
            retry = "Bearer " + await self._token(challenge, challenge.scope or scope, fresh=sent is not None)
        return None if retry == sent else retry

    async def _token(self, challenge: Challenge, scope: str | None, fresh: bool = False) -> str:
        key = (challenge.realm, challenge.service or "", scope or "")
        # One fetch per key at a time: concurrent requests for one scope share the token.
        async with self._fetching.setdefault(key, asyncio.Lock()):
            cached = None if fresh else self.tokens.get(key, self._clock())
            if cached is not None:
                return cached
            value, lifetime = await self._fetch_token(challenge, scope)
            self.tokens.put(key, value, lifetime, self._clock())
            return value

    async def _fetch_token(self, challenge: Challenge, scope: str | None) -> tuple[str, timedelta]:
        if not challenge.realm.startswith(("https://", "http://")):
            raise InvalidResponse(f"bearer challenge without a usable realm: {challenge.realm!r}")
        params: list[tuple[str, str]] = []
        if challenge.service:
            params.append(("service", challenge.service))
        params.extend(("scope", s) for s in (scope or "").split() if s)
        headers = {"Authorization": self._credentials.basic_header()} if self._credentials else {}
        try:
            response = await self._http.get(challenge.realm, params=params, headers=headers)
        except httpx.TimeoutException as exc:
            raise RequestTimeout(f"GET {challenge.realm}: {exc!r}") from exc
        except httpx.HTTPError as exc:
            raise TransportError(f"GET {challenge.realm}: {exc!r}") from exc
        if response.status_code != 200:
            raise status_error(
                "GET",
                challenge.realm,
                response.status_code,
                response.content,
                response.headers,
                self._clock(),
                TOKEN_STATUS_OVERRIDES,
            )
        return _token_from(response, challenge.realm)


def _token_from(response: httpx.Response, realm: str) -> tuple[str, timedelta]:
    try:
        doc = response.json()
    except ValueError as exc:
        raise InvalidResponse(f"token endpoint {realm} answered with non-JSON") from exc
    token = doc.get("token") or doc.get("access_token") if isinstance(doc, dict) else None
    if not isinstance(token, str) or not token:
        raise InvalidResponse(f"token endpoint {realm} answered without a token")
    expires_in = doc.get("expires_in")
    lifetime = (
        timedelta(seconds=expires_in)
        if isinstance(expires_in, int) and not isinstance(expires_in, bool) and expires_in > 0
        else DEFAULT_TOKEN_LIFETIME
    )
    return token, lifetime
