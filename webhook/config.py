"""``--config FILE``: the YAML policy configuration (DESIGN.md section 4), with clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from policies.config import PolicyConfig
from webhook.yamlerrors import describe


class ConfigError(Exception):
    """A configuration file that cannot be used; the message names the file and the key."""


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` laid on ``base`` key by key: mappings merge, anything else is replaced."""
    out = dict(base)
    for key, value in over.items():
        below = out.get(key)
        out[key] = merged(below, value) if isinstance(below, dict) and isinstance(value, dict) else value
    return out


def _read(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {describe(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: expected a mapping at the top level")
    return data


def config_files(path: Path) -> list[Path]:
    """``path`` itself, or for a directory (a mounted ConfigMap) its ``*.yaml`` files in name order.

    A directory lets each kustomize component add its own file (``standalone-packages.yaml``) beside
    ``config.yaml``: ConfigMap keys merge, the text inside one key cannot.
    """
    return sorted(p for p in path.glob("*.yaml") if p.is_file()) if path.is_dir() else [path]


def load_config(path: Path | None) -> PolicyConfig:
    if path is None:
        return PolicyConfig()
    data: dict[str, Any] = {}
    for file in config_files(path):
        data = merged(data, _read(file))
    try:
        return PolicyConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f"{p}: " for p in [".".join(str(p) for p in first["loc"])] if p)
        # A check across keys (a model validator) has no location: its message names the keys itself.
        message = first["msg"] if where else first["msg"].removeprefix("Value error, ")
        raise ConfigError(f"config file {path}: {where}{message}") from None
