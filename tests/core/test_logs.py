"""The JSON log handler follows ``sys.stderr`` as it is when a record is emitted."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from webhook import logs


def test_a_record_goes_to_the_current_stderr_not_the_one_at_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    try:
        logs.setup()
        first.close()  # what a test runner does with its capture when the test ends
        second = io.StringIO()
        monkeypatch.setattr(sys, "stderr", second)
        logging.getLogger("catalog_warden.test").info("after the swap", extra={"fields": {"k": "v"}})
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    (line,) = second.getvalue().splitlines()
    assert json.loads(line) | {"ts": None} == {
        "ts": None,
        "level": "info",
        "logger": "catalog_warden.test",
        "msg": "after the swap",
        "k": "v",
    }
