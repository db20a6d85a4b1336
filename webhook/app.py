"""The ASGI applications: the admission/conversion app (TLS port) and the probe app (plain HTTP).

HTTP-level rules live here: content type (415), body size (413), unknown family (404),
malformed envelope (400). Everything past a parsed request is answered with HTTP 200.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from webhook.admission import Admission, WireError, review
from webhook.metrics import Metrics

MAX_BODY = 7 * 1024 * 1024
"""controller-runtime's cap: two 3 MB objects plus 1 MB of envelope."""

JSON = "application/json"


def _status(code: int, message: str) -> Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "message": message}
    return Response(json.dumps(body), status_code=code, media_type=JSON)


def _ok(payload: dict[str, Any]) -> Response:
    return Response(json.dumps(payload, separators=(",", ":")), media_type=JSON)


async def read_body(request: Request) -> bytes:
    """The request body, or WireError 415/413 before reading more than :data:`MAX_BODY` bytes."""
    ctype = request.headers.get("content-type", "")
    if ctype.split(";", 1)[0].strip().lower() != JSON:
        raise WireError(415, f"unsupported content type {ctype or '(none)'!r}: expected {JSON}")
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY:
        raise WireError(413, f"request body of {length} bytes exceeds the limit of {MAX_BODY} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise WireError(413, f"request body exceeds the limit of {MAX_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


ConvertFn = Callable[[Any], dict[str, Any]]


def create_app(admission: Admission, metrics: Metrics, convert: ConvertFn | None = None) -> FastAPI:
    """The TLS-served application: ``/validate/{family}``, ``/mutate/{family}``, ``/convert``."""
    app = FastAPI(title="catalog-warden", docs_url=None, redoc_url=None, openapi_url=None)

    async def handle(kind: str, family: str, request: Request) -> Response:
        started = time.perf_counter()
        metrics.in_flight.inc()
        operation, allowed, code = "", "false", 200
        try:
            if not admission.has_family(family):
                raise WireError(404, f"unknown rule family {family!r}: expected catalog, packages or charts")
            body = await read_body(request)
            req, answer = review(admission, family, kind == "mutate", body)
            resp = answer["response"]
            operation = req.operation.value
            allowed = "true" if resp["allowed"] else "false"
            code = resp.get("status", {}).get("code", 200)
            return _ok(answer)
        except WireError as exc:
            code = exc.status
            return _status(exc.status, exc.message)
        finally:
            metrics.in_flight.dec()
            metrics.requests.labels(kind, family, operation, allowed, str(code)).inc()
            metrics.latency.labels(kind, family, operation).observe(time.perf_counter() - started)

    @app.post("/validate/{family}")
    async def validate(family: str, request: Request) -> Response:
        return await handle("validate", family, request)

    @app.post("/mutate/{family}")
    async def mutate(family: str, request: Request) -> Response:
        return await handle("mutate", family, request)

    @app.post("/convert")
    async def convert(request: Request) -> Response:
        started = time.perf_counter()
        code, result = 200, "Failed"
        metrics.in_flight.inc()
        try:
            body = await read_body(request)
            if convert is None:
                raise WireError(404, "conversion is not enabled on this server")
            try:
                payload = json.loads(body)
            except (ValueError, UnicodeDecodeError) as exc:
                raise WireError(400, f"body is not JSON: {exc}") from None
            try:
                answer = convert(payload)
            except ValueError as exc:  # MalformedReview: the envelope itself is unusable
                raise WireError(400, str(exc)) from None
            result = answer.get("response", {}).get("result", {}).get("status", "Failed")
            return _ok(answer)
        except WireError as exc:
            code = exc.status
            return _status(exc.status, exc.message)
        finally:
            metrics.in_flight.dec()
            metrics.requests.labels("convert", "", "", str(result == "Success").lower(), str(code)).inc()
            metrics.latency.labels("convert", "", "").observe(time.perf_counter() - started)

    return app


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
