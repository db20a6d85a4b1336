"""The ASGI applications: the webhook app (TLS port) and the probe app (plain HTTP).

HTTP-level rules live here: content type (415), body size (413, refused before it is all read),
unknown path or family (404), wrong method (405), malformed envelope (400). Everything past a
parsed request is answered with HTTP 200.

The webhook app is a plain ASGI callable rather than a FastAPI router: it sits on every
admission call of the cluster, and the framework's per-request machinery (routing, request
objects, dependency resolution) cost three quarters of the throughput of a bare ASGI app on
the same stack (``bench/bench_admission.py``, ``docs/performance.md``). The probes, which are
not on that path, are a FastAPI app.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
from fastapi import FastAPI
from fastapi.responses import Response

from webhook.admission import Admission, WireError, decode_json, review
from webhook.metrics import UNKNOWN, Metrics

MAX_BODY = 7 * 1024 * 1024
"""controller-runtime's cap: two 3 MB objects plus 1 MB of envelope."""

JSON = "application/json"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ConvertFn = Callable[[Any], dict[str, Any]]

_JSON_HEADERS = [(b"content-type", JSON.encode())]


def status_body(code: int, message: str) -> bytes:
    """A Kubernetes ``Status`` object, the shape kube clients expect an error body to have."""
    return orjson.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "message": message})


async def _send(send: Send, status: int, body: bytes) -> None:
    headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def read_body(scope: Scope, receive: Receive) -> bytes:
    """The request body, or WireError 415/413 before reading more than :data:`MAX_BODY` bytes."""
    ctype = length = b""
    for name, value in scope["headers"]:
        if name == b"content-type":
            ctype = value
        elif name == b"content-length":
            length = value
    text = ctype.decode("latin-1")
    if text.split(";", 1)[0].strip().lower() != JSON:
        raise WireError(415, f"unsupported content type {text or '(none)'!r}: expected {JSON}")
    if length.isdigit() and int(length) > MAX_BODY:
        raise WireError(413, f"request body of {int(length)} bytes exceeds the limit of {MAX_BODY} bytes")
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":  # the client left, or webhook/bounds.py cut a slow body
            raise WireError(408, "the connection closed before the request body was complete")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            raise WireError(413, f"request body exceeds the limit of {MAX_BODY} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class WebhookApp:
    """``POST /validate/{family}``, ``POST /mutate/{family}``, ``POST /convert``."""

    def __init__(self, admission: Admission, metrics: Metrics, convert: ConvertFn | None = None) -> None:
        self.admission = admission
        self.metrics = metrics
        self.convert = convert

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        kind, _, family = path.strip("/").partition("/")
        if kind not in ("validate", "mutate", "convert") or (kind == "convert") == bool(family) or "/" in family:
            await _send(send, 404, status_body(404, f"no such path {path}: expected /validate/{{family}}, "
                                                     "/mutate/{family} or /convert"))  # fmt: skip
            self.metrics.observe(UNKNOWN, UNKNOWN, "", "false", "404", seconds=0.0)
            return
        if scope["method"] != "POST":
            await _send(send, 405, status_body(405, f"method {scope['method']} not allowed on {path}: use POST"))
            return
        started = time.perf_counter()
        self.metrics.in_flight.inc()
        try:
            if kind == "convert":
                labels = await self._convert(scope, receive, send)
            else:
                labels = await self._admit(kind, family, scope, receive, send)
        finally:
            self.metrics.in_flight.dec()
        self.metrics.observe(kind, family, *labels, seconds=time.perf_counter() - started)

    async def _admit(self, kind: str, family: str, scope: Scope, receive: Receive, send: Send) -> tuple[str, str, str]:
        try:
            if not self.admission.has_family(family):
                raise WireError(404, f"unknown rule family {family!r}: expected catalog, packages or charts")
            body = await read_body(scope, receive)
            req, answer = review(self.admission, family, kind == "mutate", body)
        except WireError as exc:
            await _send(send, exc.status, status_body(exc.status, exc.message))
            return "", "false", str(exc.status)
        await _send(send, 200, orjson.dumps(answer))
        resp = answer["response"]
        code = resp["status"]["code"] if "status" in resp else 200
        return req.operation.value, "true" if resp["allowed"] else "false", str(code)

    async def _convert(self, scope: Scope, receive: Receive, send: Send) -> tuple[str, str, str]:
        try:
            body = await read_body(scope, receive)
            if self.convert is None:
                raise WireError(404, "conversion is not enabled on this server")
            payload = decode_json(body)
            try:
                answer = self.convert(payload)
            except ValueError as exc:  # MalformedReview: the envelope itself is unusable
                raise WireError(400, str(exc)) from None
        except WireError as exc:
            await _send(send, exc.status, status_body(exc.status, exc.message))
            return "", "false", str(exc.status)
        await _send(send, 200, orjson.dumps(answer))
        succeeded = answer.get("response", {}).get("result", {}).get("status") == "Success"
        return "", "true" if succeeded else "false", "200"


def create_probe_app(metrics: Metrics, ready: Callable[[], tuple[bool, str]]) -> FastAPI:
    """The plain-HTTP probe application: ``/healthz``, ``/readyz``, ``/metrics``."""
    app = FastAPI(title="catalog-warden probes", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    async def healthz() -> Response:
        return Response("ok", media_type="text/plain")

    @app.get("/readyz")
    async def readyz() -> Response:
        ok, why = ready()
        return Response("ok" if ok else why, status_code=200 if ok else 503, media_type="text/plain")

    @app.get("/metrics")
    async def prom() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    return app
