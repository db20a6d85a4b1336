"""pytest fixtures any test directory can import into its conftest.py:

    from tests.support.apiserver.fixtures import apiserver  # noqa: F401

`apiserver` is a started double serving the project's real `manifests/` (CRDs and, with no webhook
URL, webhook configurations pointing nowhere: pass `webhook_base_url` yourself to call a server).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.apiserver.double import ApiServerDouble

PROJECT_MANIFESTS = Path(__file__).resolve().parents[3] / "manifests"


@pytest.fixture
def apiserver() -> Iterator[ApiServerDouble]:
    """The double over the project's manifests/, without webhooks (no webhook_base_url, so none match)."""
    with ApiServerDouble(PROJECT_MANIFESTS, webhook_base_url=None) as double:
        double.admission.hooks.clear()
        yield double
