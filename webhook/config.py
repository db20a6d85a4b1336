"""``--config FILE``: the YAML policy configuration (DESIGN.md section 4), with clear errors."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from policies.config import PolicyConfig
from webhook.yamlerrors import describe


class ConfigError(Exception):
    """A configuration file that cannot be used; the message names the file and the key."""


def load_config(path: Path | None) -> PolicyConfig:
    if path is None:
        return PolicyConfig()
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {describe(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: expected a mapping at the top level")
    try:
        return PolicyConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f"{p}: " for p in [".".join(str(p) for p in first["loc"])] if p)
        # A check across keys (a model validator) has no location: its message names the keys itself.
        message = first["msg"] if where else first["msg"].removeprefix("Value error, ")
        raise ConfigError(f"config file {path}: {where}{message}") from None
