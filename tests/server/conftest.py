from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import REPO, Endpoint, ServerProcess, make_certs


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="session")
def server(certs: Path) -> Iterator[Endpoint]:
    """``catalog-warden serve --state examples/state`` as the README runs it."""
    with ServerProcess(certs, ["--state", str(REPO / "examples" / "state")]) as endpoint:
        yield endpoint
