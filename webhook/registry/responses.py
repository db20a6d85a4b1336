"""Turning a registry's HTTP answer into a result or the right exception.

The status table is data: which exception a status means. Operations that give a status a
special meaning (a 400 on tag delete means "no untag here") pass overrides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

from webhook.registry.errors import (
    ErrorDetail,
    Forbidden,
    NotFound,
    RateLimited,
    ResponseError,
    Unauthorized,
    UnexpectedStatus,
    Unsupported,
)

STATUS_ERRORS: Mapping[int, type[ResponseError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: Unsupported,
}


def error_details(body: bytes) -> tuple[ErrorDetail, ...]:
    """The ``errors`` of a distribution-spec error body; empty when the body is not one."""
    try:
        doc = json.loads(body)
    except ValueError:
        return ()
    errors = doc.get("errors") if isinstance(doc, dict) else None
    if not isinstance(errors, list):
        return ()
    return tuple(
        ErrorDetail(code=str(e.get("code", "")), message=str(e.get("message", "")))
        for e in errors
        if isinstance(e, dict)
    )


def parse_retry_after(value: str | None, now: datetime) -> timedelta | None:
    """Retry-After as a duration from ``now``: delta-seconds or an HTTP date (RFC 9110 10.2.3).

    A date in the past means "now" (zero); an unparsable value means "not said" (``None``).
    """
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return timedelta(seconds=int(value))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(when - now, timedelta(0))


def status_error(
    method: str,
    url: str,
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    now: datetime,
    overrides: Mapping[int, type[ResponseError]] | None = None,
) -> ResponseError:
    """The exception for an unaccepted status, with the parsed error body attached."""
    details = error_details(body)
    if status == 429:
        return RateLimited(method, url, status, details, parse_retry_after(headers.get("retry-after"), now))
    cls = (overrides or {}).get(status) or STATUS_ERRORS.get(status, UnexpectedStatus)
    return cls(method, url, status, details)
