"""The registry client's exception hierarchy.

Callers catch at the level their decision needs: the availability loop treats :class:`NotFound`
as a miss and every other :class:`RegistryError` as "unknown"; the chart indexer tells
:class:`RateLimited` (back off until ``retry_after``) from :class:`TransportError` (the registry
is unreachable). A :class:`NotFound` is never a :class:`TransportError`: a registry that answered
404 was reached.

::

    RegistryError
    ├── TransportError          no HTTP answer: refused, reset, DNS, TLS, timeout
    │   └── RequestTimeout
    ├── InvalidResponse         an answer that breaks the protocol (bad JSON, no digest, redirect loop)
    └── ResponseError           an HTTP status the operation does not accept (``status``, ``errors``)
        ├── NotFound            404 (MANIFEST_UNKNOWN, NAME_UNKNOWN, ...)
        ├── Unauthorized        401 after the client answered the challenge (or could not)
        ├── Forbidden           403
        ├── RateLimited         429, with ``retry_after`` from the Retry-After header
        ├── Unsupported         the registry does not offer the operation (405; 400 on tag delete)
        └── UnexpectedStatus    anything else (5xx, 400, ...)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True, slots=True)
class ErrorDetail:
    """One entry of the distribution spec's ``{"errors": [{"code", "message", "detail"}]}`` body."""

    code: str
    message: str = ""


class RegistryError(Exception):
    """Anything that went wrong talking to a registry."""


class TransportError(RegistryError):
    """The request got no HTTP answer (connection refused or reset, DNS, TLS handshake, timeout)."""


class RequestTimeout(TransportError):
    """The registry did not answer within the client's timeout."""


class InvalidResponse(RegistryError):
    """The registry answered, but not as the protocol says (bad JSON, missing digest, redirect loop)."""


class ResponseError(RegistryError):
    """The registry answered with a status the operation does not accept.

    ``errors`` holds the parsed error body when there was one, so callers can tell
    ``MANIFEST_UNKNOWN`` from ``NAME_UNKNOWN`` without re-reading the response.
    """

    def __init__(self, method: str, url: str, status: int, errors: tuple[ErrorDetail, ...] = ()) -> None:
        self.method = method
        self.url = url
        self.status = status
        self.errors = errors
        super().__init__(self._describe())

    @property
    def codes(self) -> tuple[str, ...]:
        """The error codes of the body, in order (empty when the body had none)."""
        return tuple(e.code for e in self.errors)

    def _describe(self) -> str:
        text = f"{self.method} {self.url}: HTTP {self.status}"
        if self.errors:
            text += " " + "; ".join(f"{e.code}: {e.message}" if e.message else e.code for e in self.errors)
        return text


class NotFound(ResponseError):
    """404: the repository, tag or digest does not exist (the registry was reached)."""


class Unauthorized(ResponseError):
    """401 although the client answered the challenge: credentials missing, wrong or insufficient."""


class Forbidden(ResponseError):
    """403: authenticated, but not allowed."""


class Unsupported(ResponseError):
    """The registry does not offer this operation (deletes disabled, no untag in distribution 2.8)."""


class UnexpectedStatus(ResponseError):
    """Any other status, e.g. a 5xx: the outcome is unknown."""


class RateLimited(ResponseError):
    """429: the registry asks the caller to wait.

    ``retry_after`` is how long, measured from the client's clock when the answer arrived
    (``None`` when the registry sent no usable Retry-After). The client never sleeps: the caller
    decides whether to wait, skip or give up.
    """

    def __init__(
        self,
        method: str,
        url: str,
        status: int,
        errors: tuple[ErrorDetail, ...] = (),
        retry_after: timedelta | None = None,
    ) -> None:
        self.retry_after = retry_after
        super().__init__(method, url, status, errors)

    def _describe(self) -> str:
        text = super()._describe()
        if self.retry_after is not None:
            text += f" (retry after {self.retry_after.total_seconds():g}s)"
        return text
