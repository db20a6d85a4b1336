"""Structured JSON logs, one object per line on stderr.

Fields passed as ``extra={"fields": {...}}`` are merged into the record, so a request's uid,
kind, name, namespace, operation, user, decision and duration are searchable keys.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if fields:
            entry.update(fields)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at emit time, not the one at setup.

    A caller that swaps stderr (a test runner capturing output, then closing its capture) would
    otherwise leave every later log line raising "I/O operation on closed file".
    """

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        """StreamHandler assigns the stream in ``__init__``; the live ``sys.stderr`` is used instead."""


def setup(level: str = "info") -> None:
    """Route every logger (ours, uvicorn's) through one JSON handler on stderr."""
    handler = _StderrHandler()
    handler.setFormatter(JSONFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
