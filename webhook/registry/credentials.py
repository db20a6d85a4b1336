"""Registry credentials and how they are read from a Kubernetes Secret.

``Registry.spec.solarSecretRef`` names a Secret whose ``data`` holds ``username`` and ``password``
(base64, as the API returns them); that is the only format SolAr's discovery accepts.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field

SECRET_USERNAME_KEY = "username"
SECRET_PASSWORD_KEY = "password"

MISSING_KEYS = "secret data lacks {keys}: a registry Secret needs base64 data keys 'username' and 'password'"
NOT_BASE64 = "secret data key {key!r} is not valid base64"


class InvalidSecret(ValueError):
    """The Secret cannot be turned into credentials (missing keys, bad base64)."""


@dataclass(frozen=True, slots=True)
class Credentials:
    """A username and password for Basic auth or a token server. The password never shows in ``repr``."""

    username: str
    password: str = field(repr=False)

    def basic_header(self) -> str:
        """The ``Authorization`` value for HTTP Basic."""
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")


def credentials_from_secret_data(data: Mapping[str, str] | None) -> Credentials:
    """Decode a Secret's ``data`` (base64 values) into :class:`Credentials`.

    Raises :class:`InvalidSecret` naming what is wrong, so the caller can report it on the Registry.
    """
    data = data or {}
    missing = [k for k in (SECRET_USERNAME_KEY, SECRET_PASSWORD_KEY) if k not in data]
    if missing:
        raise InvalidSecret(MISSING_KEYS.format(keys=", ".join(repr(k) for k in missing)))
    return Credentials(_decode(data, SECRET_USERNAME_KEY), _decode(data, SECRET_PASSWORD_KEY))


def _decode(data: Mapping[str, str], key: str) -> str:
    try:
        return base64.b64decode(data[key], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidSecret(NOT_BASE64.format(key=key)) from exc
