"""CI runs exactly the README's test command, so what a new user types is what CI proves."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_ci_runs_the_readmes_second_command_exactly() -> None:
    block = re.search(r"```sh\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert block is not None, "README.md has no ```sh block"
    test_command = block.group(1).splitlines()[1]

    assert "tests/support/install.sh" in test_command and "pytest" in test_command
    assert test_command in (REPO / ".ci" / "run").read_text().splitlines()
