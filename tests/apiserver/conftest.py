"""Fixtures for the double's own tests: test CRDs, a scripted TLS webhook, and a double factory."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.apiserver.helpers import MakeDouble
from tests.support.apiserver import ApiServerDouble, TestCA
from tests.support.apiserver.fixtures import apiserver  # noqa: F401  (re-exported for tests here)
from tests.support.apiserver.scripted_webhook import ScriptedWebhook

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def ca() -> TestCA:
    return TestCA()


@pytest.fixture
def webhook(ca: TestCA) -> Iterator[ScriptedWebhook]:
    with ScriptedWebhook(ca) as hook:
        yield hook


@pytest.fixture
def make_double(tmp_path: Path) -> Iterator[MakeDouble]:
    """Start a double over the test CRDs plus the given webhook configuration documents."""
    started: list[ApiServerDouble] = []

    def make(
        *configs: dict[str, Any], webhook_base_url: str | None = None, ca_bundle: bytes | None = None, **kwargs: Any
    ) -> ApiServerDouble:
        manifests = tmp_path / f"manifests-{len(started)}"
        shutil.copytree(HERE / "manifests", manifests)
        (manifests / "webhooks.yaml").write_text(yaml.safe_dump_all(configs))
        double = ApiServerDouble(manifests, webhook_base_url=webhook_base_url, ca_bundle=ca_bundle, **kwargs)
        started.append(double.start())
        return double

    yield make
    for double in started:
        double.stop()


@pytest.fixture
def double(make_double: MakeDouble) -> ApiServerDouble:
    return make_double()
