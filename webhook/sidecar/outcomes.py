"""What a failed manifest lookup means for availability: the registry client's exceptions as data.

The table is ordered most specific first (``RequestTimeout`` is a ``TransportError``; every class
is a ``RegistryError``), and the detail is a stable code (``HTTP 503``, ``ConnectError``), never the
exception's text: the detail ends up in the condition message, and a message that changed from
pass to pass would be a status write per pass.
"""

from __future__ import annotations

from policies.availability import Outcome
from webhook.registry.errors import (
    Forbidden,
    NotFound,
    RateLimited,
    RegistryError,
    RequestTimeout,
    ResponseError,
    TransportError,
    Unauthorized,
)

OUTCOMES: tuple[tuple[type[RegistryError], Outcome], ...] = (
    (NotFound, Outcome.NOT_FOUND),
    (Unauthorized, Outcome.UNAUTHORIZED),
    (Forbidden, Outcome.FORBIDDEN),
    (RateLimited, Outcome.RATE_LIMITED),
    (RequestTimeout, Outcome.TIMEOUT),
    (TransportError, Outcome.TRANSPORT_ERROR),
    (RegistryError, Outcome.SERVER_ERROR),
)
"""First match wins. The last row catches 5xx, other statuses and answers that break the protocol."""

INVALID_RESPONSE = "invalid response"


def outcome_of(exc: RegistryError) -> Outcome:
    """The availability outcome of a lookup that raised ``exc``."""
    return next(outcome for cls, outcome in OUTCOMES if isinstance(exc, cls))


def detail_of(exc: RegistryError) -> str:
    """A short code for ``exc`` that stays the same while the failure does (see the module doc)."""
    if isinstance(exc, ResponseError):
        return f"HTTP {exc.status}"
    if isinstance(exc, TransportError):
        cause = exc.__cause__
        return type(cause).__name__ if cause is not None else type(exc).__name__
    return INVALID_RESPONSE
