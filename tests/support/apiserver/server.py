"""HTTP(S) front of the double: authentication, URL routing, discovery, JSON and watch streaming.

Built on the standard library's ThreadingHTTPServer (one thread per connection, HTTP/1.1 keep-alive),
because a watch is a long chunked response and threads make that the simplest faithful shape.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.apiserver import errors
from tests.support.apiserver.errors import ApiError
from tests.support.apiserver.operations import Api, Response, Target
from tests.support.apiserver.resources import ResourceType

VERSION_INFO = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.0-catalog-warden-double",
    "platform": "linux/amd64",
}


@dataclass(frozen=True)
class Request:
    """One request as the double received it (an audit log line, for tests that count API calls)."""

    method: str
    path: str
    params: dict[str, str]
    user: str


class DoubleHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], api: Api, tokens: dict[str, dict[str, Any]]) -> None:
        super().__init__(address, Handler)
        self.api = api
        self.tokens = tokens
        self.failures: list[str] = []  # unexpected exceptions (500s), for test diagnostics
        self.requests: list[Request] = []  # every authenticated request, in arrival order


def _params(query: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: Nagle + delayed ACK would cost 40 ms
    server: DoubleHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read failures, not access logs
        return

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # ---- plumbing ------------------------------------------------------------------------------

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        params = _params(url.query)
        body = self._body()
        try:
            user = self._authenticate()
            self.server.requests.append(Request(method, url.path, params, user["username"]))
            response = self._route(method, url.path, params, body, user)
        except ApiError as exc:
            self._send_json(exc.code, exc.status())
            return
        except Exception as exc:
            self.server.failures.append(traceback.format_exc())
            self._send_json(500, errors.internal(f"{type(exc).__name__}: {exc}").status())
            return
        if isinstance(response, Response):
            self._send_json(response.code, response.body, response.warnings)
        else:
            self._stream(response)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _authenticate(self) -> dict[str, Any]:
        header = self.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        user = self.server.tokens.get(token) if scheme.lower() == "bearer" else None
        if user is None:
            raise errors.unauthorized()
        return user

    def _send_json(self, code: int, body: Any, warnings: list[str] = ()) -> None:  # type: ignore[assignment]
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for warning in warnings:
            self.send_header("Warning", f'299 - "{warning}"')
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, events: Iterator[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in events:
                data = json.dumps(event).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self.close_connection = True

    # ---- routing -------------------------------------------------------------------------------

    def _route(
        self, method: str, path: str, params: dict[str, str], body: bytes, user: dict[str, Any]
    ) -> Response | Iterator[dict[str, Any]]:
        parts = [p for p in path.split("/") if p]
        discovery = self._discovery(parts)
        if discovery is not None:
            if method != "GET":
                raise errors.method_not_allowed(method)
            return Response(200, discovery)
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        target, collection = self._target(group, version, rest)
        if collection:
            return self._collection(method, target, params, body, user)
        return self._object(method, target, params, body, user)

    def _target(self, group: str, version: str, rest: list[str]) -> tuple[Target, bool]:
        api = self.server.api
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces" and not (group == "" and rest[2] in ("status", "finalize")):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        resource = api.registry.lookup(group, version, rest[0])
        if resource is None or (namespace and not resource.namespaced):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub and not (sub == "status" and resource.has_status(version)):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if resource.namespaced and name and not namespace:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return Target(resource, version, namespace, name, sub), not name

    def _collection(
        self, method: str, target: Target, params: dict[str, str], body: bytes, user: dict[str, Any]
    ) -> Response | Iterator[dict[str, Any]]:
        api = self.server.api
        if method == "GET":
            return api.watch(target, params) if params.get("watch") in ("true", "1") else api.list(target, params)
        if method == "POST":
            if target.resource.namespaced and not target.namespace:
                raise errors.method_not_allowed(method)
            return api.create(target, _json(body), user, params)
        if method == "DELETE":
            return self._delete_collection(target, params, body, user)
        raise errors.method_not_allowed(method)

    def _object(
        self, method: str, target: Target, params: dict[str, str], body: bytes, user: dict[str, Any]
    ) -> Response:
        api = self.server.api
        if method == "GET":
            return api.get(target)
        if method == "PUT":
            return api.update(target, _json(body), user, params)
        if method == "PATCH":
            return api.patch(target, body, self.headers.get("Content-Type", ""), user, params)
        if method == "DELETE" and not target.sub:
            return api.delete(target, _json(body) if body else {}, user, params)
        raise errors.method_not_allowed(method)

    def _delete_collection(self, target: Target, params: dict[str, str], body: bytes, user: dict[str, Any]) -> Response:
        api = self.server.api
        listed = api.list(target, params).body
        options = _json(body) if body else {}
        for item in listed["items"]:
            metadata = item["metadata"]
            one = Target(target.resource, target.version, metadata.get("namespace", ""), metadata["name"])
            try:
                api.delete(one, options, user, params)
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return Response(200, {**listed, "items": []})

    # ---- discovery -----------------------------------------------------------------------------

    def _discovery(self, parts: list[str]) -> dict[str, Any] | None:
        registry = self.server.api.registry
        if parts == ["version"]:
            return VERSION_INFO
        if parts == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if parts == ["api", "v1"]:
            return _resource_list("v1", [r for r in registry.all() if r.group == ""], "v1")
        groups = registry.groups()
        if parts == ["apis"]:
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g, v) for g, v in groups.items()]}
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups:
            return {"kind": "APIGroup", "apiVersion": "v1", **_group(parts[1], groups[parts[1]])}
        if len(parts) == 3 and parts[0] == "apis" and parts[2] in groups.get(parts[1], ()):
            members = [r for r in registry.all() if r.group == parts[1] and parts[2] in r.versions]
            return _resource_list(f"{parts[1]}/{parts[2]}", members, parts[2])
        return None


def _json(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except ValueError as exc:
        raise errors.bad_request(f"error decoding body: {exc}") from exc


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _resource_list(group_version: str, resources: list[ResourceType], version: str) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    for r in resources:
        entries.append(
            {
                "name": r.plural,
                "singularName": r.singular,
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": VERBS,
                **({"shortNames": list(r.short_names)} if r.short_names else {}),
            }
        )
        if r.has_status(version):
            entries.append(
                {
                    "name": f"{r.plural}/status",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": entries}
