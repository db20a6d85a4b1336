"""``families.<name>``: on/off and the install mode (DESIGN.md section 3, docs/configuration.md).

The mode is the one switch of the loops that do an upstream controller's work: an explicit
``sidecar.<loop>.enabled`` that disagrees with it is an error naming both keys.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.config import FamilyConfig, Mode, PolicyConfig
from webhook.config import ConfigError, load_config


def test_every_family_defaults_to_alongside_and_on() -> None:
    families = PolicyConfig().families
    for name in ("catalog", "packages", "charts"):
        assert families.of(name) == FamilyConfig(enabled=True, mode=Mode.ALONGSIDE)
        assert not PolicyConfig().runs_upstream_loop(name)


@pytest.mark.parametrize(
    ("raw", "enabled", "mode"),
    [
        (True, True, Mode.ALONGSIDE),
        (False, False, Mode.ALONGSIDE),
        ({"mode": "standalone"}, True, Mode.STANDALONE),
        ({"enabled": False, "mode": "standalone"}, False, Mode.STANDALONE),
    ],
)
def test_the_shorthand_and_the_long_form(raw, enabled: bool, mode: Mode) -> None:
    families = PolicyConfig.model_validate({"families": {"packages": raw}}).families
    assert (families.enabled("packages"), families.of("packages").mode) == (enabled, mode)


CONTRADICTIONS = [
    (
        "families: {packages: {mode: standalone}}\nsidecar: {packages: {enabled: false}}\n",
        "sidecar.packages.enabled: false contradicts families.packages.mode: standalone "
        "(nothing else does the package bookkeeping there); the mode switches this loop: "
        "remove sidecar.packages.enabled or change families.packages.mode",
    ),
    (
        "sidecar: {packages: {enabled: true}}\n",
        "sidecar.packages.enabled: true contradicts families.packages.mode: alongside "
        "(Porch's own controllers do the package bookkeeping there); the mode switches this loop: "
        "remove sidecar.packages.enabled or change families.packages.mode",
    ),
    (
        "families: {charts: {mode: alongside}}\nsidecar: {chartIndex: {enabled: true}}\n",
        "sidecar.chartIndex.enabled: true contradicts families.charts.mode: alongside "
        "(operator-helm's controllers do the chart index there); the mode switches this loop: "
        "remove sidecar.chartIndex.enabled or change families.charts.mode",
    ),
    ("families: {packages: {mode: upstream}}\n", "families.packages.mode: Input should be 'alongside' or 'standalone'"),
    (
        "families: {packages: {mode: standalone, enable: true}}\n",
        "families.packages.enable: Extra inputs are not permitted",
    ),
]


@pytest.mark.parametrize(("text", "message"), CONTRADICTIONS)
def test_a_loop_switch_that_contradicts_the_mode_is_an_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"config file {path}: {message}"


@pytest.mark.parametrize(
    "text",
    [
        "families: {packages: {mode: standalone}}\nsidecar: {packages: {enabled: true}}\n",
        "sidecar: {packages: {enabled: false}, chartIndex: {enabled: false}}\n",
        "families: {charts: {mode: standalone}}\nsidecar: {chartIndex: {enabled: true, concurrency: 2}}\n",
    ],
)
def test_a_loop_switch_that_agrees_is_accepted(tmp_path: Path, text: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    load_config(path)


def test_a_config_directory_merges_its_files_in_name_order(tmp_path: Path) -> None:
    """How components/standalone-<family> adds its mode beside the base's config.yaml."""
    (tmp_path / "config.yaml").write_text(
        "families:\n  packages: {enabled: true, mode: alongside}\n  charts: {enabled: false}\nmaxListedReferrers: 3\n"
    )
    (tmp_path / "standalone-packages.yaml").write_text("families: {packages: {mode: standalone}}\n")
    (tmp_path / "notes.txt").write_text("not read")
    config = load_config(tmp_path)
    assert config.families.of("packages") == FamilyConfig(enabled=True, mode=Mode.STANDALONE)
    assert (config.families.enabled("charts"), config.maxListedReferrers) == (False, 3)


def test_a_bad_file_in_a_config_directory_is_named(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("{}\n")
    (tmp_path / "standalone-packages.yaml").write_text("- a list\n")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert str(err.value) == f"config file {tmp_path / 'standalone-packages.yaml'}: expected a mapping at the top level"
