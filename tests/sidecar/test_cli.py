"""``catalog-warden sidecar``: its flags, and user errors as one line with a non-zero exit."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.cli import main


def test_missing_kubeconfig_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(SystemExit) as exited:
        main(["sidecar", "--kubeconfig", str(missing)])
    assert exited.value.code == 1
    assert capsys.readouterr().err == f"catalog-warden: error: --kubeconfig {missing}: no such file\n"


def test_bad_config_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("sidecar:\n  availability:\n    interval: 0s\n")
    with pytest.raises(SystemExit) as exited:
        main(["sidecar", "--config", str(config), "--kubeconfig", str(tmp_path / "nope")])
    assert exited.value.code == 1
    assert capsys.readouterr().err == (
        f"catalog-warden: error: config file {config}: sidecar.availability.interval: "
        "Value error, must be greater than 0\n"
    )


def test_help_lists_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sidecar", "--help"])
    out = capsys.readouterr().out
    for flag in ("--kubeconfig", "--config", "--events-port", "--identity", "--namespace"):
        assert flag in out
