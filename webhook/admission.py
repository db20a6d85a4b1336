"""AdmissionReview v1 on the wire: parse, dispatch to the rule tables, frame the answer.

This module alone knows the admission wire contract (DESIGN.md section 4):

- the response echoes ``request.uid`` in an ``admission.k8s.io/v1`` AdmissionReview;
- any request that parsed gets an answer (a denial or a rule failure is ``allowed: false``
  with ``status.code``), never an HTTP error; a wrong-typed envelope field (which only a sender
  that is not kube-apiserver can produce) is a 400 naming it, an object nested deeper than
  ``policies.nesting.MAX_DEPTH`` a 422;
- a validating path never returns a patch, a mutating path returns a JSON patch that was
  applied locally first, and nothing is patched on DELETE;
- a kind outside the family's table is allowed with a warning; warnings are cut to 120 characters.
"""

from __future__ import annotations

import base64
import dataclasses
import gc
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from policies.config import PolicyConfig
from policies.decision import MAX_WARNING, Decision, allow, deny, invalid
from policies.families import TABLES
from policies.identity import is_cluster_cleanup
from policies.model import AdmissionRequest, GroupKind, Operation, UserInfo
from policies.objects import json_type, shown
from policies.patch import PatchError, apply, diff
from policies.rules import Context, Rule, RuleTable
from policies.view import View, staleness_of
from webhook.metrics import Metrics
from webhook.nesting import depth_problem

log = logging.getLogger("catalog_warden.admission")

ADMISSION_V1 = "admission.k8s.io/v1"
MAX_WARNINGS = 20
"""kube-apiserver drops warnings beyond 4096 characters in total; 20 x 120 stays under it."""

Clock = Callable[[], datetime]

MSG_UNSYNCED = "cluster state is not synced yet, so {rule} cannot decide; retry shortly"
MSG_STALE = "cluster state is stale ({stale}), so {rule} cannot decide; retry shortly"
"""While a synced cache has gone stale (a watch down or silent beyond its bound): which kinds, since when."""
MSG_FAIL_OPEN = "catalog-warden: cluster state {state}; {rule} skipped (fail open)"


def utc_now() -> datetime:
    return datetime.now(UTC)


class WireError(Exception):
    """A request that cannot be answered with an AdmissionReview: HTTP ``status`` and a message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for one request (re-entrant; process-wide while it lasts).

    Decoded JSON holds no reference cycles, yet each container it is made of counts towards a
    collection: a 3 MiB body of small containers triggered collection after collection over the
    half-built tree, 80% of its decode time (docs/performance.md), and the first allocation after
    the decode one more pass over all of it. Objects freed by reference counting before the
    collector resumes are counted off again and never traversed.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def decode_json(body: bytes) -> Any:
    """``body`` decoded, or :class:`WireError` 400: the one JSON decoder of the admission port."""
    with collector_paused():
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise WireError(400, f"body is not JSON: {exc}") from None


def parse_review(body: bytes) -> AdmissionRequest:
    """Decode and normalize an AdmissionReview v1 request, or raise :class:`WireError` (400)."""
    if not body:
        raise WireError(400, "empty body: expected an admission.k8s.io/v1 AdmissionReview")
    review = decode_json(body)
    if not isinstance(review, dict):
        raise WireError(400, "body is not a JSON object: expected an admission.k8s.io/v1 AdmissionReview")
    api_version, kind = review.get("apiVersion"), review.get("kind")
    if kind != "AdmissionReview" or api_version != ADMISSION_V1:
        raise WireError(
            400,
            f"unsupported apiVersion {shown(api_version) if api_version else '(none)'} "
            f"kind {shown(kind) if kind else '(none)'}: "
            f"only {ADMISSION_V1} AdmissionReview is served",
        )
    req = review.get("request")
    if not isinstance(req, dict):
        raise WireError(400, "AdmissionReview has no request")
    return normalize(req)


_TYPE_NAMES: dict[type, str] = {str: "a string", dict: "an object"}

MSG_FIELD_TYPE = "AdmissionReview request.{field} must be {expected}, not {found}"
"""A wrong-typed envelope field (400). Every field here is filled by kube-apiserver itself, so a
wrong type means the sender is not an apiserver and no admission answer would be meaningful; what
a user wrote (the object) is judged by the rules instead and answered with 422."""

FieldTypes = tuple[tuple[str, type, str], ...]
"""(field, the Python type orjson decodes its JSON type to, that JSON type as messages name it)."""

OPTIONAL_FIELDS: FieldTypes = (
    ("name", str, "a string"),
    ("namespace", str, "a string"),
    ("subResource", str, "a string"),
    ("userInfo", dict, "an object"),
    ("object", dict, "an object"),
    ("oldObject", dict, "an object"),
    ("dryRun", bool, "a boolean"),
)
"""Request fields the rules read, with their JSON type; absent or null reads as empty."""

USER_FIELDS: FieldTypes = (
    ("username", str, "a string"),
    ("uid", str, "a string"),
    ("groups", list, "an array of strings"),
)
KIND_FIELDS: FieldTypes = (
    ("group", str, "a string"),
    ("version", str, "a string"),
)


def _field(req: Mapping[str, Any], name: str, typ: type) -> Any:
    value = req.get(name)
    if not isinstance(value, typ) or not value:
        raise WireError(400, f"AdmissionReview request.{name} is missing or not {_TYPE_NAMES[typ]}")
    return value


def _typed(parent: Mapping[str, Any], prefix: str, fields: FieldTypes) -> dict[str, Any]:
    """The ``fields`` of ``parent`` that are present, each checked against its type (400 if wrong)."""
    out: dict[str, Any] = {}
    for name, typ, expected in fields:
        value = parent.get(name)
        if value is None:
            continue
        if not isinstance(value, typ):
            raise WireError(400, MSG_FIELD_TYPE.format(field=prefix + name, expected=expected, found=json_type(value)))
        out[name] = value
    return out


def _groups(groups: list[Any]) -> tuple[str, ...]:
    for i, group in enumerate(groups):
        if not isinstance(group, str):
            raise WireError(
                400, MSG_FIELD_TYPE.format(field=f"userInfo.groups[{i}]", expected="a string", found=json_type(group))
            )
    return tuple(groups)


def normalize(req: Mapping[str, Any]) -> AdmissionRequest:
    """The wire request as the :class:`AdmissionRequest` rules receive (raises WireError 400).

    Every field a rule or a log line reads is type-checked here, so nothing past this point can
    fail on the envelope (issue 11: a list where ``userInfo`` belongs was an HTTP 500).
    """
    uid = _field(req, "uid", str)
    kind = _field(req, "kind", dict)
    try:
        operation = Operation(_field(req, "operation", str))
    except ValueError:
        raise WireError(
            400, f"AdmissionReview request.operation {shown(req.get('operation'))!r} is not known"
        ) from None
    if not isinstance(kind.get("kind"), str) or not kind["kind"]:
        raise WireError(400, "AdmissionReview request.kind.kind is missing")
    gv = _typed(kind, "kind.", KIND_FIELDS)
    fields = _typed(req, "", OPTIONAL_FIELDS)
    user = _typed(fields.get("userInfo", {}), "userInfo.", USER_FIELDS)
    return AdmissionRequest(
        uid=uid,
        operation=operation,
        kind=GroupKind(gv.get("group", ""), kind["kind"]),
        version=gv.get("version", ""),
        name=fields.get("name", ""),
        namespace=fields.get("namespace", ""),
        sub_resource=fields.get("subResource", ""),
        object=fields.get("object"),
        old_object=fields.get("oldObject"),
        user=UserInfo(
            username=user.get("username", ""),
            groups=_groups(user.get("groups", [])),
            uid=user.get("uid", ""),
        ),
        dry_run=fields.get("dryRun", False),
    )


@dataclass(frozen=True, slots=True)
class Verdict:
    """A family's final answer to one request: the decision and, on mutating paths, the patch."""

    decision: Decision
    patch: list[dict[str, Any]] | None = None
    rule: str = ""


def _cut(warnings: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for w in warnings:
        seen.setdefault(w if len(w) <= MAX_WARNING else w[: MAX_WARNING - 1] + "…", None)
    return list(seen)[:MAX_WARNINGS]


def response(uid: str, verdict: Verdict) -> dict[str, Any]:
    """The AdmissionReview answer for ``verdict``."""
    d = verdict.decision
    resp: dict[str, Any] = {"uid": uid, "allowed": d.allowed}
    if not d.allowed:
        resp["status"] = {"code": d.code, "message": d.message, "reason": d.reason}
    if d.warnings:
        resp["warnings"] = _cut(list(d.warnings))
    if verdict.patch:
        resp["patchType"] = "JSONPatch"
        resp["patch"] = base64.b64encode(orjson.dumps(verdict.patch)).decode()
    return {"apiVersion": ADMISSION_V1, "kind": "AdmissionReview", "response": resp}


class Admission:
    """Evaluates requests against the rule tables: the one place rules are run for admission.

    ``view`` is read at call time (``view_source()``), so the server can swap a state directory
    for the informer cache without rebuilding this object.
    """

    def __init__(
        self,
        view_source: Callable[[], View],
        config: PolicyConfig,
        metrics: Metrics | None = None,
        clock: Clock = utc_now,
        tables: Mapping[str, RuleTable] = TABLES,
    ) -> None:
        self._view_source = view_source
        self._config = config
        self._metrics = metrics
        self._clock = clock
        self._tables = tables

    def has_family(self, family: str) -> bool:
        return family in self._tables

    def evaluate(self, family: str, mutating: bool, req: AdmissionRequest) -> Verdict:
        """Run every rule of ``family`` that matches ``req``; the first denial wins."""
        table = self._tables[family]
        if not self._config.families.enabled(family):
            return Verdict(allow())
        if req.kind not in table.family.kinds:
            return Verdict(allow(f"catalog-warden: {req.kind} is not guarded by the {family} rules; admitted"))
        if req.operation is Operation.DELETE and is_cluster_cleanup(req.user):
            # DESIGN.md section 4: blocking them leaves owners and namespaces stuck Terminating,
            # so no rule (and no unsynced cache) may refuse their deletes.
            return Verdict(allow())
        if req.object is not None and req.operation in WRITES_WITH_OBJECT:
            problem = depth_problem(req.object)
            if problem is not None:
                return Verdict(self._framed(NESTING_RULE, req, invalid(problem)), rule=NESTING_RULE.name)
        rules = table.lookup(mutating, req.kind, req.operation, req.sub_resource)
        if not rules:
            return Verdict(allow())
        ctx = Context(view=self._view_source(), now=self._clock(), config=self._config)
        if mutating and req.operation is not Operation.DELETE and req.object is not None:
            return self._mutate(rules, req, ctx)
        warnings: list[str] = []
        for rule in rules:
            decision = self._run(rule, req, ctx)
            warnings.extend(decision.warnings)
            if not decision.allowed:
                return Verdict(self._framed(rule, req, decision), rule=rule.name)
        return Verdict(allow(*warnings))

    def _mutate(self, rules: tuple[Rule, ...], req: AdmissionRequest, ctx: Context) -> Verdict:
        """Chain the mutating rules on one desired object, then diff it against the request once.

        Each rule sees the previous one's desired object and builds its own copy-on-write
        (:class:`policies.patch.Edit`), so a 3 MiB object is neither copied nor walked per rule.
        """
        original = req.object
        assert original is not None
        current: Any = original
        warnings: list[str] = []
        for rule in rules:
            decision = self._run(rule, _with_object(req, current), ctx)
            warnings.extend(decision.warnings)
            if not decision.allowed:
                return Verdict(self._framed(rule, req, decision), rule=rule.name)
            if decision.desired is not None:
                current = decision.desired
        patch = [] if current is original else diff(original, current)
        if not patch:
            return Verdict(allow(*warnings))
        # Applied locally before it is returned: a patch the apiserver cannot apply rejects the
        # request even under failurePolicy Ignore, so it must never leave this process.
        try:
            reproduced = apply(original, patch) == current
        except PatchError:
            reproduced = False
        if not reproduced:
            return Verdict(self._failed(rules[-1], req, RuntimeError("patch does not reproduce the mutation")))
        return Verdict(allow(*warnings), patch=patch)

    def _run(self, rule: Rule, req: AdmissionRequest, ctx: Context) -> Decision:
        if rule.needs_view and not ctx.view.synced:
            stale = staleness_of(ctx.view)
            if self._config.failOpenWhenUnsynced:
                return allow(MSG_FAIL_OPEN.format(state="stale" if stale else "not synced", rule=rule.name))
            message = MSG_STALE.format(stale=stale, rule=rule.name) if stale else MSG_UNSYNCED.format(rule=rule.name)
            return deny(message, code=503, reason="ServiceUnavailable")
        try:
            return rule.fn(req, ctx)
        except Exception as exc:  # a broken rule must never take the server down
            return self._failed(rule, req, exc)

    def _failed(self, rule: Rule, req: AdmissionRequest, exc: BaseException) -> Decision:
        log.error(
            "rule failed",
            exc_info=exc,
            extra={"fields": {"rule": rule.name, "uid": req.uid, "kind": str(req.kind), "name": req.ref}},
        )
        if self._metrics is not None:
            self._metrics.rule_errors.labels(rule.name).inc()
        return deny(
            f"{req.kind.kind} {req.ref}: internal error in rule {rule.name}: {type(exc).__name__}: {exc}",
            code=500,
            reason="InternalError",
        )

    @staticmethod
    def _framed(rule: Rule, req: AdmissionRequest, decision: Decision) -> Decision:
        if decision.code == 500 and decision.reason == "InternalError":
            return decision
        message = f"{req.kind.kind} {req.ref} denied by {rule.name}: {decision.message}"
        return Decision(False, decision.code, decision.reason, message, decision.warnings)


WRITES_WITH_OBJECT = frozenset({Operation.CREATE, Operation.UPDATE})

NESTING_RULE = Rule("nesting.max-depth", GroupKind("", ""), WRITES_WITH_OBJECT, lambda req, ctx: allow())
"""Names the depth bound (``policies/nesting.py``) in denials and logs; it is checked by the shell
before any rule, for every guarded kind, because conversion refuses the same objects."""


def _with_object(req: AdmissionRequest, obj: Any) -> AdmissionRequest:
    return req if obj is req.object else dataclasses.replace(req, object=obj)


def review(admission: Admission, family: str, mutating: bool, body: bytes) -> tuple[AdmissionRequest, dict[str, Any]]:
    """Parse ``body``, evaluate it and return the request and its AdmissionReview answer (raises WireError).

    The request comes back without its objects: they are released here, while the collector is
    still paused, so a large request is freed by reference counting and never traversed by it.
    """
    started = time.perf_counter()
    with collector_paused():
        req = parse_review(body)
        try:
            verdict = admission.evaluate(family, mutating, req)
        except Exception as exc:  # a shell bug must still answer the parsed request, with its uid
            log.error("admission failed", exc_info=exc, extra={"fields": {"uid": req.uid, "kind": str(req.kind)}})
            message = f"{req.kind.kind} {req.ref}: internal error: {type(exc).__name__}"
            verdict = Verdict(deny(message, code=500, reason="InternalError"))
        answer = response(req.uid, verdict)
        if log.isEnabledFor(logging.INFO):
            _log_decision(req, verdict, mutating, family, started)
        released = dataclasses.replace(req, object=None, old_object=None)
        del req, verdict
    return released, answer


def _log_decision(req: AdmissionRequest, verdict: Verdict, mutating: bool, family: str, started: float) -> None:
    d = verdict.decision
    log.info(
        "admission",
        extra={
            "fields": {
                "uid": req.uid,
                "path": f"/{'mutate' if mutating else 'validate'}/{family}",
                "kind": str(req.kind),
                "name": req.name,
                "namespace": req.namespace,
                "operation": req.operation.value,
                "user": req.user.username,
                "dryRun": req.dry_run,
                "decision": "allowed" if d.allowed else "denied",
                "code": d.code,
                "rule": verdict.rule,
                "patched": bool(verdict.patch),
                "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            }
        },
    )
