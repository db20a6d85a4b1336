"""Fixtures for the registry client's integration tests: real docker-registry instances and scripted servers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.registry.scripted_server import ScriptedServer
from tests.support.registry import RegistryServer, TokenServer, make_tls


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """An anonymous registry shared by a module; tests use their own repositories (see ``repo``)."""
    with RegistryServer(tmp_path_factory.mktemp("registry")) as server:
        yield server


@pytest.fixture(scope="module")
def basic_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    with RegistryServer(tmp_path_factory.mktemp("basic-registry"), auth="basic") as server:
        yield server


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenServer]:
    server = TokenServer(tmp_path_factory.mktemp("token-issuer")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def token_registry(tmp_path_factory: pytest.TempPathFactory, token_server: TokenServer) -> Iterator[RegistryServer]:
    with RegistryServer(tmp_path_factory.mktemp("token-registry"), auth=token_server) as server:
        yield server


@pytest.fixture
def tls_registry(tmp_path: Path) -> Iterator[RegistryServer]:
    with RegistryServer(tmp_path / "registry", tls=make_tls(tmp_path / "tls")) as server:
        yield server


@pytest.fixture
def repo(request: pytest.FixtureRequest) -> str:
    """A repository prefix unique to the test, so tests sharing a registry never see each other's artifacts."""
    return "t/" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    server = ScriptedServer().start()
    yield server
    server.stop()


@pytest.fixture
def other_host() -> Iterator[ScriptedServer]:
    """A second scripted server: another origin, for redirects that must not carry credentials."""
    server = ScriptedServer().start()
    yield server
    server.stop()


class CountingTransport(httpx.AsyncBaseTransport):
    """Counts every request the client sends (registry and token endpoint alike)."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.requests: list[tuple[str, str]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path))
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.fixture
def counting() -> CountingTransport:
    return CountingTransport()
