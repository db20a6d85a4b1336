"""Validation of repository names, tags and digests before they become URL paths.

A name from a custom resource must never smuggle ``..`` or ``?`` into a request path; the
grammar is the distribution spec's (``spec.md``, *Pulling manifests*).
"""

from __future__ import annotations

import re

from webhook.registry.errors import RegistryError

_REPOSITORY = re.compile(r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*")
_TAG = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}")
_DIGEST = re.compile(r"[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+")

BAD_REPOSITORY = "not a valid repository name: {value!r}"
BAD_REFERENCE = "not a valid tag or digest: {value!r}"
BAD_DIGEST = "not a valid digest: {value!r}"
BAD_TAG = "not a valid tag: {value!r}"


class InvalidReference(RegistryError, ValueError):
    """A repository, tag or digest that the distribution grammar rejects; no request was sent."""


def is_digest(reference: str) -> bool:
    """Whether ``reference`` is a digest (``algorithm:hex``) rather than a tag."""
    return _DIGEST.fullmatch(reference) is not None


def check_repository(name: str) -> str:
    if _REPOSITORY.fullmatch(name) is None:
        raise InvalidReference(BAD_REPOSITORY.format(value=name))
    return name


def check_reference(reference: str) -> str:
    if _TAG.fullmatch(reference) is None and not is_digest(reference):
        raise InvalidReference(BAD_REFERENCE.format(value=reference))
    return reference


def check_digest(reference: str) -> str:
    if not is_digest(reference):
        raise InvalidReference(BAD_DIGEST.format(value=reference))
    return reference


def check_tag(reference: str) -> str:
    if _TAG.fullmatch(reference) is None:
        raise InvalidReference(BAD_TAG.format(value=reference))
    return reference
