"""The registry events endpoint: notifications in, early re-checks out, never a deletion.

``POST /events`` accepts

- zot CloudEvents (``zotregistry.image.deleted`` / ``zotregistry.image.updated``, or any
  ``typePrefix`` ending in ``.image.deleted`` / ``.image.updated``) in structured mode
  (``application/cloudevents+json``, or a batch as ``application/cloudevents-batch+json``) and in
  binary mode (``ce-*`` headers, the data as the JSON body), which is sdk-go's default;
- distribution notification envelopes (``application/vnd.docker.distribution.events.v1+json``,
  ``{"events": [...]}``), actions ``push`` and ``delete``.

Each notice names a repository and a tag and/or a digest. The ComponentVersions whose artifact
is in that repository with that tag, or whose label digest or ``resolvedDigest`` is that digest,
are queued for an early availability check. The host is not compared: a registry may be
reached under several names, and a needless re-check costs one HEAD. Other event types and
actions (pulls, mounts, zot scans) are accepted and ignored. Event delivery is never relied on:
the periodic pass finds every change anyway (GC and retention emit no events at all).

Answers: 202 with the matched entries; 400 naming what is wrong with the payload; 401 when a
token is configured (``CATALOG_WARDEN_EVENTS_TOKEN``) and the request does not carry it; 413 over
1 MiB; 415 for a content type that is none of the above. ``GET /healthz``, ``GET /readyz`` and
``GET /metrics`` are served on the same port.
"""

from __future__ import annotations

import base64
import hmac
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from policies.artifacts import Unresolved, artifact_of
from policies.kinds import COMPONENT_VERSION
from policies.objects import dig, ref_of
from policies.view import View
from webhook.sidecar.metrics import SidecarMetrics

MAX_BODY = 1024 * 1024

CLOUDEVENTS = "application/cloudevents+json"
CLOUDEVENTS_BATCH = "application/cloudevents-batch+json"
DISTRIBUTION = "application/vnd.docker.distribution.events.v1+json"
JSON = "application/json"

ZOT_ACTIONS = {".image.deleted": "deleted", ".image.updated": "updated"}
"""CloudEvent type suffix -> what happened; other zot types (repository.created, scanned, ...) are ignored."""
DISTRIBUTION_ACTIONS = {"delete": "deleted", "push": "updated"}
"""Distribution action -> what happened; pull and mount are ignored."""

MSG_NOT_JSON = "body is not JSON: {error}"
MSG_NOT_EVENT = "a CloudEvent must be a JSON object with string specversion, id, source and type"
MSG_NOT_BATCH = "a CloudEvents batch must be a JSON array of CloudEvents"
MSG_BINARY_HEADERS = "a binary-mode CloudEvent needs the headers ce-specversion, ce-id, ce-source and ce-type"
MSG_DATA = "CloudEvent {id}: data must be a JSON object with a string 'name' (the repository)"
MSG_ENVELOPE = "a distribution notification must be a JSON object with an 'events' array"
MSG_DIST_EVENT = "distribution event {index}: needs 'action' and a 'target' object with a string 'repository'"
MSG_TOO_LARGE = "body larger than {limit} bytes"
MSG_CONTENT_TYPE = (
    "unsupported content type {content_type!r}: send CloudEvents (application/cloudevents+json, binary mode "
    "with ce-* headers) or distribution notifications (" + DISTRIBUTION + ")"
)


class BadPayload(ValueError):
    """A payload that is not what its content type promises; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class Notice:
    """One registry change: ``deleted`` or ``updated``, in ``repository``, naming a tag and/or a digest."""

    action: str
    repository: str
    tag: str = ""
    digest: str = ""


# ---- parsing ----------------------------------------------------------------------------------


def _strings(doc: Mapping[str, Any], *keys: str) -> bool:
    return all(isinstance(doc.get(k), str) and doc.get(k) for k in keys)


def _zot_notice(event_id: str, event_type: str, data: Any) -> Notice | None:
    action = next((a for suffix, a in ZOT_ACTIONS.items() if event_type.endswith(suffix)), None)
    if action is None:
        return None
    if not isinstance(data, Mapping) or not _strings(data, "name"):
        raise BadPayload(MSG_DATA.format(id=event_id))
    reference = str(data.get("reference") or "")
    digest = str(data.get("digest") or "")
    tag = "" if reference.startswith("sha256:") else reference
    if not digest and reference.startswith("sha256:"):
        digest = reference
    return Notice(action, str(data["name"]), tag, digest)


def parse_structured(doc: Any) -> Notice | None:
    """One structured-mode CloudEvent (``data`` inline JSON, or ``data_base64`` holding JSON)."""
    if not isinstance(doc, Mapping) or not _strings(doc, "specversion", "id", "source", "type"):
        raise BadPayload(MSG_NOT_EVENT)
    data = doc.get("data")
    if data is None and isinstance(doc.get("data_base64"), str):
        try:
            data = json.loads(base64.b64decode(doc["data_base64"], validate=True))
        except ValueError as exc:
            raise BadPayload(MSG_DATA.format(id=doc["id"])) from exc
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise BadPayload(MSG_DATA.format(id=doc["id"])) from exc
    return _zot_notice(str(doc["id"]), str(doc["type"]), data)


def parse_binary(headers: Mapping[str, str], body: Any) -> Notice | None:
    """A binary-mode CloudEvent: attributes in ``ce-*`` headers, the data as the JSON body."""
    attributes = {k: headers.get(f"ce-{k}", "") for k in ("specversion", "id", "source", "type")}
    if not all(attributes.values()):
        raise BadPayload(MSG_BINARY_HEADERS)
    return _zot_notice(attributes["id"], attributes["type"], body)


def parse_distribution(doc: Any) -> list[Notice | None]:
    """A distribution notification envelope (None for pulls and mounts); blob pushes match nothing later."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("events"), list):
        raise BadPayload(MSG_ENVELOPE)
    notices: list[Notice | None] = []
    for index, event in enumerate(doc["events"]):
        target = event.get("target") if isinstance(event, Mapping) else None
        if not isinstance(target, Mapping) or not _strings(target, "repository") or not _strings(event, "action"):
            raise BadPayload(MSG_DIST_EVENT.format(index=index))
        action = DISTRIBUTION_ACTIONS.get(str(event["action"]))
        tag, digest = str(target.get("tag") or ""), str(target.get("digest") or "")
        notices.append(None if action is None else Notice(action, str(target["repository"]), tag, digest))
    return notices


def parse(content_type: str, headers: Mapping[str, str], body: bytes) -> list[Notice | None]:
    """Every notice in a request (None for an event that is accepted and ignored).

    Raises :class:`BadPayload` (400) or :class:`UnsupportedContentType` (415).
    """
    media = content_type.split(";", 1)[0].strip().lower()
    if media not in (CLOUDEVENTS, CLOUDEVENTS_BATCH, DISTRIBUTION, JSON):
        raise UnsupportedContentType(MSG_CONTENT_TYPE.format(content_type=content_type))
    if media == JSON and not headers.get("ce-type"):
        raise UnsupportedContentType(MSG_CONTENT_TYPE.format(content_type=content_type))
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise BadPayload(MSG_NOT_JSON.format(error=exc)) from exc
    if media == CLOUDEVENTS:
        return [parse_structured(doc)]
    if media == CLOUDEVENTS_BATCH:
        if not isinstance(doc, list):
            raise BadPayload(MSG_NOT_BATCH)
        return [parse_structured(event) for event in doc]
    if media == DISTRIBUTION:
        return parse_distribution(doc)
    return [parse_binary(headers, doc)]


class UnsupportedContentType(ValueError):
    """Neither a CloudEvent nor a distribution notification (415)."""


# ---- matching ---------------------------------------------------------------------------------


def affected(view: View, notices: Iterable[Notice]) -> list[str]:
    """The ComponentVersions (``ns/name``, sorted) whose artifact a notice names (see the module doc)."""
    wanted = [n for n in notices if n.tag or n.digest]
    if not wanted:
        return []
    repositories = {n.repository for n in wanted}
    found: set[str] = set()
    for cv in view.list(COMPONENT_VERSION):
        ref = artifact_of(cv, view)
        if isinstance(ref, Unresolved) or ref.repository not in repositories:
            continue
        digests = {d for d in (ref.digest, str(dig(cv, "status", "availability", "resolvedDigest", default=""))) if d}
        for notice in wanted:
            if notice.repository == ref.repository and (
                (notice.tag and notice.tag == ref.tag) or (notice.digest and notice.digest in digests)
            ):
                found.add(ref_of(cv))
    return sorted(found)


# ---- the app ----------------------------------------------------------------------------------


TOKEN_ENV = "CATALOG_WARDEN_EVENTS_TOKEN"
MSG_UNAUTHORIZED = (
    "missing or wrong bearer token: configure the registry's notification endpoint to send "
    "the header Authorization: Bearer <the value of " + TOKEN_ENV + ">"
)


def events_app(
    view: View,
    recheck: Callable[[Sequence[str]], None],
    metrics: SidecarMetrics | None = None,
    healthy: Callable[[], tuple[bool, str]] = lambda: (True, "ok"),
    token: str = "",
    ready: Callable[[], tuple[bool, str]] = lambda: (True, "ok"),
) -> Starlette:
    """The sidecar's HTTP app: ``POST /events``, ``GET /healthz``, ``GET /readyz``, ``GET /metrics``.

    ``/healthz`` is liveness (a restart would help: an informer thread ended); ``/readyz`` says
    whether the loops may act (the cache synced and live), with the reason when not. Both answer
    503 with that reason as plain text.

    With ``token`` set, ``POST /events`` requires ``Authorization: Bearer <token>`` (distribution
    notification endpoints and zot's HTTP sink can send a fixed header): an event can only cause a
    re-check, but a flood of spoofed ones should not reach the registry at all.
    """
    metrics = metrics or SidecarMetrics()
    expected = f"Bearer {token}".encode()

    async def post_events(request: Request) -> Response:
        if token and not hmac.compare_digest(request.headers.get("authorization", "").encode(), expected):
            metrics.events.labels("unauthorized").inc()
            return JSONResponse({"error": MSG_UNAUTHORIZED}, status_code=401)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                metrics.events.labels("invalid").inc()
                return JSONResponse({"error": MSG_TOO_LARGE.format(limit=MAX_BODY)}, status_code=413)
        try:
            notices = parse(request.headers.get("content-type", ""), request.headers, body)
        except UnsupportedContentType as exc:
            metrics.events.labels("invalid").inc()
            return JSONResponse({"error": str(exc)}, status_code=415)
        except BadPayload as exc:
            metrics.events.labels("invalid").inc()
            return JSONResponse({"error": str(exc)}, status_code=400)
        relevant = [n for n in notices if n is not None]
        matched = affected(view, relevant)
        if matched:
            recheck(matched)
        metrics.events.labels("matched").inc(len(relevant))
        metrics.events.labels("ignored").inc(len(notices) - len(relevant))
        return JSONResponse({"matched": matched, "ignored": len(notices) - len(relevant)}, status_code=202)

    def probe(check: Callable[[], tuple[bool, str]]) -> Callable[[Request], Awaitable[Response]]:
        async def answer(_request: Request) -> Response:
            ok, why = check()
            return PlainTextResponse("ok" if ok else why, status_code=200 if ok else 503)

        return answer

    async def get_metrics(_request: Request) -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    return Starlette(
        routes=[
            Route("/events", post_events, methods=["POST"]),
            Route("/healthz", probe(healthy), methods=["GET"]),
            Route("/readyz", probe(ready), methods=["GET"]),
            Route("/metrics", get_metrics, methods=["GET"]),
        ]
    )
