"""pytest fixtures any test directory can import into its conftest.py:

    from tests.support.apiserver.fixtures import apiserver, make_apiserver  # noqa: F401

`apiserver` is a started double serving the project's real `manifests/` (CRDs and, with no webhook
URL, webhook configurations pointing nowhere: pass `webhook_base_url` yourself to call a server).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.apiserver.double import ApiServerDouble

PROJECT_MANIFESTS = Path(__file__).resolve().parents[3] / "manifests"


@pytest.fixture
def apiserver() -> Iterator[ApiServerDouble]:
    """The double over the project's manifests/, without webhooks (no webhook_base_url, so none match)."""
    with ApiServerDouble(PROJECT_MANIFESTS, webhook_base_url=None) as double:
        double.admission.hooks.clear()
        yield double


MakeApiServer = Callable[..., ApiServerDouble]


@pytest.fixture
def make_apiserver() -> Iterator[MakeApiServer]:
    """A factory for doubles over the project's manifests/ with webhooks: `make_apiserver(webhook_base_url=...,
    ca_bundle=...)`; every double it starts is stopped after the test."""
    started: list[ApiServerDouble] = []

    def make(**kwargs: Any) -> ApiServerDouble:
        started.append(ApiServerDouble(PROJECT_MANIFESTS, **kwargs).start())
        return started[-1]

    yield make
    for double in started:
        double.stop()
