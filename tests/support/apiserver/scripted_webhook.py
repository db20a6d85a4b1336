"""A tiny TLS webhook server whose answers a test scripts: the other end of the double's webhook calls.

It is a minimal ASGI app on uvicorn (the same stack as the real server) in a background thread,
serving a certificate from a `TestCA`, so the double's caBundle verification is exercised for real.
The script is a function `(path, body) -> Reply`; it runs in a worker thread and may block (to test
timeouts) or call back into the double (to force interleavings).
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import tempfile
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from tests.support.apiserver.pki import TestCA

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]


@dataclass
class Reply:
    body: Any
    status: int = 200


Script = Callable[[str, dict[str, Any]], Reply]


def review_response(review: dict[str, Any], **response: Any) -> Reply:
    """An AdmissionReview v1 answer echoing the request uid."""
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], **response},
    }
    return Reply(body)


def allow(review: dict[str, Any], *warnings: str) -> Reply:
    return review_response(review, allowed=True, **({"warnings": list(warnings)} if warnings else {}))


def deny(review: dict[str, Any], message: str, code: int = 403, reason: str = "Forbidden") -> Reply:
    return review_response(review, allowed=False, status={"code": code, "reason": reason, "message": message})


def patch(review: dict[str, Any], operations: list[dict[str, Any]]) -> Reply:
    encoded = base64.b64encode(json.dumps(operations).encode()).decode()
    return review_response(review, allowed=True, patchType="JSONPatch", patch=encoded)


def _allow_all(_path: str, review: dict[str, Any]) -> Reply:
    return allow(review)


@dataclass
class ScriptedWebhook:
    """Start with `with ScriptedWebhook(ca) as hook:`; set `hook.script`; read `hook.requests`."""

    ca: TestCA
    script: Script = field(default_factory=lambda: _allow_all)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # tracebacks of scripts that raised (answered with 500)

    def __post_init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="scripted-webhook-")
        cert, key = self.ca.issue().write(Path(self._tmp.name))
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(
            self._app,
            ssl_certfile=str(cert),
            ssl_keyfile=str(key),
            log_level="critical",
            lifespan="off",
            interface="asgi3",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def __enter__(self) -> ScriptedWebhook:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("scripted webhook did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()
        self._tmp.cleanup()

    async def _app(
        self, scope: Scope, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Awaitable[None]]
    ) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = json.loads(b"".join(chunks) or b"null")
        path = scope["path"]
        self.requests.append((path, body))
        try:
            reply = await asyncio.to_thread(self.script, path, body)
        except Exception:
            self.errors.append(traceback.format_exc())
            reply = Reply({"error": "script failed"}, status=500)
        data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": data})
