"""policies/ stays pure: no I/O libraries, no webhook imports, no clock reads."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

POLICIES = Path(__file__).resolve().parents[2] / "policies"
FORBIDDEN_MODULES = {"webhook", "httpx", "kubernetes", "socket", "subprocess", "requests", "os", "time", "random",
                     "asyncio", "threading", "logging", "fastapi", "uvicorn"}  # fmt: skip
CLOCK_CALLS = {("datetime", "now"), ("datetime", "utcnow"), ("date", "today"), ("datetime", "today")}
FILES = sorted(POLICIES.rglob("*.py"))
ALLOWED = {"view.py": {"threading"}}
"""MemoryView guards its writers with a lock: shared by the informer thread and the server."""


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(POLICIES)) for p in FILES])
def test_module_is_pure(path: Path) -> None:
    tree = ast.parse(path.read_text())
    problems: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        forbidden = FORBIDDEN_MODULES - ALLOWED.get(path.name, set())
        problems += [f"line {node.lineno}: imports {n}" for n in names if n.split(".")[0] in forbidden]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            owner_name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
            if (owner_name, node.func.attr) in CLOCK_CALLS:
                problems.append(f"line {node.lineno}: reads the clock ({owner_name}.{node.func.attr})")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"open", "print"}:
            problems.append(f"line {node.lineno}: calls {node.func.id}()")
    assert problems == []
