"""The one answer type every admission rule returns, and the only ways to build it.

Modelled on controller-runtime's ``admission/response.go``: :func:`allow`, :func:`deny`,
:func:`mutate`. A mutating rule states the object as it should be (built with
:class:`policies.patch.Edit`, so only what changes is copied); the shell chains the rules on
that desired object and computes one JSON patch per request from the final one. A rule's own
:attr:`Decision.patch` is computed on demand only (tests read it), so a rule re-run on its own
output visibly yields an empty patch (idempotence).
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.model import Obj
from policies.patch import JSONPatchOp, diff


@dataclass(frozen=True, slots=True)
class Decision:
    """An admission verdict.

    ``code`` and ``reason`` become the AdmissionResponse ``status`` (metav1.Status) on a denial;
    ``desired`` is the object as a mutating rule wants it and ``base`` the object it was computed
    from (mutating rules only; None otherwise).
    """

    allowed: bool = True
    code: int = 200
    reason: str = ""
    message: str = ""
    warnings: tuple[str, ...] = ()
    base: Obj | None = None
    desired: Obj | None = None

    @property
    def patch(self) -> tuple[JSONPatchOp, ...]:
        """The RFC 6902 operations from ``base`` to ``desired`` (empty when the rule changes nothing)."""
        return () if self.desired is None else tuple(diff(self.base, self.desired))


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
    """Admit with ``original`` changed into ``desired`` (``original`` itself is never modified)."""
    return Decision(warnings=tuple(warnings), base=original, desired=desired)


MAX_WARNING = 120
"""kube-apiserver and kubectl show warnings of at most this many characters; the server cuts longer ones."""
_MIN_FIELD = 12


def _elide(value: str, length: int) -> str:
    """``value`` cut to ``length`` characters by replacing its middle with an ellipsis."""
    if len(value) <= length:
        return value
    head = length // 2
    tail = length - 1 - head
    return value[:head] + "…" + value[len(value) - tail :]


def fit_warning(template: str, **fields: object) -> str:
    """``template`` formatted so it fits :data:`MAX_WARNING` characters.

    The server cuts an over-long warning at its end, which loses the way out. Instead the
    longest filled-in value (a name, a reason) is shortened in its middle, so both ends of each
    name stay readable and the fixed text stays whole. Only names nobody could shorten enough
    leave a cut text, and then it is cut here, deterministically.
    """
    values = {k: str(v) for k, v in fields.items()}
    text = template.format(**values)
    while len(text) > MAX_WARNING:
        longest = max(values, key=lambda k: len(values[k]), default=None)
        if longest is None or len(values[longest]) <= _MIN_FIELD:
            return text[: MAX_WARNING - 1] + "…"
        excess = len(text) - MAX_WARNING
        values[longest] = _elide(values[longest], max(_MIN_FIELD, len(values[longest]) - excess))
        text = template.format(**values)
    return text
