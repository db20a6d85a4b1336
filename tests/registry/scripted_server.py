"""A tiny HTTP server on 127.0.0.1 answering from a script, for quirks a real registry cannot produce.

Each route maps (method, path) to a function of the request returning (status, headers, body);
every request is recorded with its headers so tests can assert what the client sent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: str
    headers: dict[str, str]


Reply = tuple[int, dict[str, str], bytes]
Route = Callable[[Seen], Reply]


@dataclass
class ScriptedServer:
    routes: dict[tuple[str, str], Route] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)

    @property
    def hostname(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    @property
    def base_url(self) -> str:
        return f"http://{self.hostname}"

    def route(self, method: str, path: str, reply: Route) -> None:
        self.routes[(method, path)] = reply

    def start(self) -> ScriptedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        script = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                parts = urlsplit(self.path)
                seen = Seen(self.command, parts.path, parts.query, {k.lower(): v for k, v in self.headers.items()})
                script.seen.append(seen)
                route = script.routes.get((self.command, parts.path))
                status, headers, body = route(seen) if route else (404, {}, b'{"errors":[{"code":"NOT_SCRIPTED"}]}')
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_HEAD = do_DELETE = _answer

        return Handler
