"""The API client and the table of resources catalog-warden reads and writes.

``build_api_client`` makes an official ``kubernetes`` ApiClient from ``--kubeconfig`` or the
in-cluster service account, so authentication (tokens, exec plugins, client certificates) and TLS
are the client's. :class:`Kube` then sends raw JSON over it: objects stay the decoded dicts the
policies read, errors become the small :class:`ApiError` hierarchy (catch ``Conflict`` or
``NotFound`` where they mean something), and a watch is a stream of decoded events that another
thread can cut short.

``RESOURCES`` maps each :class:`~policies.model.GroupKind` to where it is served. It is a literal
table (an installed wheel carries no ``manifests/``), kept equal to the CRD manifests by a test
through :func:`resources_from_crds`; each CRD is listed at its storage version, the one to watch.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

import urllib3
import yaml
from kubernetes import client, config

from policies import kinds
from policies.model import GroupKind

Obj = dict[str, Any]
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


@dataclass(frozen=True, slots=True)
class Resource:
    """Where one kind is served: group, version, plural, namespaced, and whether status is a subresource.

    Without a status subresource (ComponentVersion, as on the aggregated API) status is written
    through the main resource.
    """

    kind: GroupKind
    version: str
    plural: str
    namespaced: bool
    status_subresource: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.kind.group}/{self.version}" if self.kind.group else self.version

    def path(self, namespace: str = "", name: str = "", subresource: str = "") -> str:
        """The REST path; ``namespace=""`` on a namespaced kind means all namespaces (list and watch)."""
        root = f"/apis/{self.kind.group}/{self.version}" if self.kind.group else f"/api/{self.version}"
        parts = [root]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(self.plural)
        if name:
            parts.append(quote(name, safe=""))
        if subresource:
            parts.append(subresource)
        return "/".join(parts)


def _r(kind: GroupKind, version: str, plural: str, namespaced: bool = True, status: bool = False) -> Resource:
    return Resource(kind, version, plural, namespaced, status)


RESOURCES: Mapping[GroupKind, Resource] = {
    r.kind: r
    for r in (
        _r(kinds.COMPONENT, "v1alpha1", "components"),
        _r(kinds.COMPONENT_VERSION, "v1alpha1", "componentversions"),
        _r(kinds.RELEASE, "v1alpha1", "releases", status=True),
        _r(kinds.TARGET, "v1alpha1", "targets", status=True),
        _r(kinds.REGISTRY, "v1alpha1", "registries"),
        _r(kinds.REGISTRY_BINDING, "v1alpha1", "registrybindings"),
        _r(kinds.RELEASE_BINDING, "v1alpha1", "releasebindings"),
        _r(kinds.REFERENCE_GRANT, "v1alpha1", "referencegrants"),
        _r(kinds.PROFILE, "v1alpha1", "profiles", status=True),
        _r(kinds.RENDER_TASK, "v1alpha1", "rendertasks", status=True),
        _r(kinds.RENDER_ARTIFACT, "v1alpha1", "renderartifacts", status=True),
        _r(kinds.RENDER_BINDING, "v1alpha1", "renderbindings"),
        _r(kinds.PACKAGE_REVISION, "v1alpha2", "packagerevisions", status=True),
        _r(kinds.REPOSITORY, "v1alpha1", "repositories", status=True),
        _r(kinds.HELM_CLUSTER_ADDON, "v1alpha1", "helmclusteraddons", namespaced=False, status=True),
        _r(kinds.HELM_CLUSTER_ADDON_CHART, "v1alpha1", "helmclusteraddoncharts", namespaced=False, status=True),
        _r(
            kinds.HELM_CLUSTER_ADDON_REPOSITORY,
            "v1alpha1",
            "helmclusteraddonrepositories",
            namespaced=False,
            status=True,
        ),
        _r(kinds.NAMESPACE, "v1", "namespaces", namespaced=False, status=True),
        _r(kinds.SECRET, "v1", "secrets"),
        _r(kinds.CONFIG_MAP, "v1", "configmaps"),
        _r(kinds.EVENT, "v1", "events"),
        _r(kinds.LEASE, "v1", "leases"),
    )
}

BUILTIN_KINDS = frozenset({kinds.NAMESPACE, kinds.SECRET, kinds.CONFIG_MAP, kinds.EVENT, kinds.LEASE})


def resources_from_crds(directory: Path) -> dict[GroupKind, Resource]:
    """Every CustomResourceDefinition under ``directory``, at its storage version."""
    found: dict[GroupKind, Resource] = {}
    for path in sorted(directory.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            storage = next(v for v in spec["versions"] if v.get("storage"))
            kind = GroupKind(spec["group"], spec["names"]["kind"])
            status = "status" in (storage.get("subresources") or {})
            found[kind] = Resource(
                kind, storage["name"], spec["names"]["plural"], spec["scope"] == "Namespaced", status
            )
    return found


# ---- errors ------------------------------------------------------------------------------------


class ApiError(Exception):
    """A non-2xx answer from the apiserver, with its Status ``reason`` and ``message``."""

    def __init__(self, status: int, reason: str, message: str, body: Obj | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}


class NotFound(ApiError):
    """404: the object (or its namespace) does not exist."""


class Conflict(ApiError):
    """409: a stale resourceVersion, a failed delete precondition, or AlreadyExists."""


class Gone(ApiError):
    """410: the requested resourceVersion is older than the server keeps (relist)."""


class Unreachable(ApiError):
    """No HTTP answer at all (connection refused, reset, timed out); status 0."""


_ERRORS: Mapping[int, type[ApiError]] = {404: NotFound, 409: Conflict, 410: Gone}


def error_from_status(status: int, body: Obj) -> ApiError:
    """The :class:`ApiError` for an HTTP status and its (possibly empty) Status body."""
    cls = _ERRORS.get(status, ApiError)
    return cls(status, str(body.get("reason") or ""), str(body.get("message") or ""), body)


def _decode(data: bytes) -> Obj:
    try:
        decoded = json.loads(data) if data else {}
    except ValueError:
        return {"message": data[:200].decode(errors="replace")}
    return decoded if isinstance(decoded, dict) else {}


# ---- the client --------------------------------------------------------------------------------


def build_api_client(
    kubeconfig: Path | None = None, context: str | None = None, pool_size: int = 32
) -> client.ApiClient:
    """An official ApiClient from ``kubeconfig`` (and ``context``), or in-cluster config when None.

    ``pool_size`` bounds the HTTP connections kept open: the informer cache holds one watch per
    kind (13 by default), and the client's default of 10 would make urllib3 discard and reopen
    connections on every request beyond them.
    """
    configuration = client.Configuration()
    if kubeconfig is not None:
        config.load_kube_config(config_file=str(kubeconfig), context=context, client_configuration=configuration)
    else:
        config.load_incluster_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = pool_size
    return client.ApiClient(configuration)


Query = Sequence[tuple[str, str]]


def _read(raw: urllib3.BaseHTTPResponse, method: str, path: str) -> bytes:
    """The whole body, the connection handed back to the pool; a broken read is :class:`Unreachable`."""
    try:
        return raw.data
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise Unreachable(0, "Unreachable", f"{method} {path}: {exc}") from exc
    finally:
        raw.release_conn()


class WatchStream:
    """One open watch: iterate decoded events; :meth:`close` from any thread ends the iteration.

    A broken connection (reset, ended mid-chunk, a read that timed out) raises
    :class:`Unreachable`, as a failed request does, so callers handle one error type whatever the
    transport did; a line that is not JSON raises ``ValueError``. After :meth:`close` the iteration
    just ends.
    """

    def __init__(self, response: urllib3.BaseHTTPResponse, what: str = "watch") -> None:
        self._response = response
        self._what = what
        self._closed = False

    def __iter__(self) -> Iterator[Obj]:
        buffer = b""
        try:
            for chunk in self._response.stream(amt=None, decode_content=True):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if not self._closed:
                raise Unreachable(0, "Unreachable", f"{self._what}: {exc}") from exc
        except ValueError:
            if not self._closed:
                raise
        finally:
            self._response.close()  # a finished watch's connection is closed by the server: never reuse it
            self._response.release_conn()

    def close(self) -> None:
        """Cut the connection (unblocks a reader waiting in ``recv`` on another thread)."""
        self._closed = True
        # RuntimeError: already back in the pool; ValueError: the connection is already closed.
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            self._response.shutdown()  # urllib3 >= 2.3: shuts the socket down, a blocked recv returns

    def __enter__(self) -> WatchStream:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Kube:
    """Raw JSON verbs over an official ApiClient, addressed by :class:`GroupKind`.

    Thread-safe as far as the underlying urllib3 pool is (one pool, many threads). ``timeout``
    is seconds for the whole request; None uses the client's default (no timeout).
    """

    def __init__(self, api_client: client.ApiClient, resources: Mapping[GroupKind, Resource] = RESOURCES) -> None:
        self.api_client = api_client
        self.resources = resources

    def resource(self, kind: GroupKind) -> Resource:
        try:
            return self.resources[kind]
        except KeyError:
            raise KeyError(f"no resource known for {kind}") from None

    def _send(
        self,
        method: str,
        path: str,
        query: Query = (),
        body: Any = None,
        content_type: str = JSON,
        timeout: float | tuple[float, float] | None = None,
    ) -> urllib3.BaseHTTPResponse:
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        method, url, headers, body, _post = self.api_client.param_serialize(
            method,
            path,
            query_params=list(query) or None,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api_client.call_api(method, url, header_params=headers, body=body, _request_timeout=timeout)
        except (urllib3.exceptions.HTTPError, OSError, client.ApiException) as exc:
            raise Unreachable(0, "Unreachable", f"{method} {path}: {exc}") from exc
        raw: urllib3.BaseHTTPResponse = response.response
        if not 200 <= raw.status < 300:
            raise error_from_status(raw.status, _decode(_read(raw, method, path)))
        return raw

    def request(
        self,
        method: str,
        path: str,
        query: Query = (),
        body: Any = None,
        content_type: str = JSON,
        timeout: float | tuple[float, float] | None = None,
    ) -> Obj:
        """Send one request and return the decoded JSON answer (raises :class:`ApiError`)."""
        return _decode(_read(self._send(method, path, query, body, content_type, timeout), method, path))

    def stream(self, path: str, query: Query, timeout: float | tuple[float, float] | None = None) -> WatchStream:
        """Open a watch (``watch=true`` must be in ``query``); the caller iterates and closes it."""
        return WatchStream(self._send("GET", path, query, timeout=timeout), f"GET {path} (watch)")

    # ---- typed conveniences ------------------------------------------------------------------

    def get(self, kind: GroupKind, name: str, namespace: str = "", timeout: float | None = None) -> Obj:
        return self.request("GET", self.resource(kind).path(namespace, name), timeout=timeout)

    def create(self, kind: GroupKind, obj: Obj, timeout: float | None = None) -> Obj:
        namespace = str(obj.get("metadata", {}).get("namespace", ""))
        return self.request("POST", self.resource(kind).path(namespace), body=obj, timeout=timeout)

    def replace(self, kind: GroupKind, obj: Obj, timeout: float | None = None) -> Obj:
        """PUT ``obj``; its ``metadata.resourceVersion`` makes it conditional (409 when stale)."""
        metadata = obj.get("metadata", {})
        path = self.resource(kind).path(str(metadata.get("namespace", "")), str(metadata["name"]))
        return self.request("PUT", path, body=obj, timeout=timeout)

    def patch(
        self,
        kind: GroupKind,
        name: str,
        namespace: str,
        patch: Any,
        content_type: str = MERGE_PATCH,
        subresource: str = "",
        timeout: float | None = None,
    ) -> Obj:
        path = self.resource(kind).path(namespace, name, subresource)
        return self.request("PATCH", path, body=patch, content_type=content_type, timeout=timeout)

    def delete(
        self, kind: GroupKind, name: str, namespace: str = "", options: Obj | None = None, timeout: float | None = None
    ) -> Obj:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", **(options or {})}
        return self.request("DELETE", self.resource(kind).path(namespace, name), body=body, timeout=timeout)

    def list(
        self, kind: GroupKind, namespace: str = "", query: Iterable[tuple[str, str]] = (), timeout: float | None = None
    ) -> Obj:
        return self.request("GET", self.resource(kind).path(namespace), query=tuple(query), timeout=timeout)
