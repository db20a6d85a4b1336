"""The one answer type every admission rule returns, and the only ways to build it.

Modelled on controller-runtime's ``admission/response.go``: :func:`allow`, :func:`deny`,
:func:`mutate`. A mutating rule states the object as it should be; the JSON patch is computed
here (``jsonpatch.make_patch``), so a patch always applies and a rule re-run on its own output
yields an empty patch (idempotence is visible).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jsonpatch

from policies.model import Obj

JSONPatchOp = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Decision:
    """An admission verdict.

    ``code`` and ``reason`` become the AdmissionResponse ``status`` (metav1.Status) on a denial;
    ``patch`` holds RFC 6902 operations against the request object (mutating rules only).
    """

    allowed: bool = True
    code: int = 200
    reason: str = ""
    message: str = ""
    warnings: tuple[str, ...] = ()
    patch: tuple[JSONPatchOp, ...] = ()


ALLOW = Decision()


def allow(*warnings: str) -> Decision:
    """Admit the request, optionally with warnings shown to the user (kubectl prints them)."""
    return Decision(warnings=tuple(warnings)) if warnings else ALLOW


def deny(message: str, code: int = 403, reason: str = "Forbidden") -> Decision:
    """Refuse the request. ``message`` names the subject and, where there is one, the way out."""
    return Decision(allowed=False, code=code, reason=reason, message=message)


def invalid(message: str) -> Decision:
    """Refuse a request whose object is malformed (HTTP 422, reason Invalid, as the apiserver does)."""
    return deny(message, code=422, reason="Invalid")


def mutate(original: Obj, desired: Obj, *warnings: str) -> Decision:
    """Admit with the JSON patch that turns ``original`` into ``desired``."""
    ops = jsonpatch.make_patch(original, desired).patch
    return Decision(warnings=tuple(warnings), patch=tuple(ops))
