"""Registry credentials and bindings (ADR-010): what the renderer would otherwise fail on late.

The SolAr renderer resolves a Target's render Registry and needs its push credentials
(``spec.solarSecretRef``); for every source host it needs exactly one RegistryBinding of the
Target. Both failures surface only at render time, as a status condition. These rules refuse
the edit that causes them, while it is being made, and leave everything already in place alone:
every check runs only when the field it judges changes (on UPDATE of an invalid Registry only
new violations count, the way Kubernetes ratchets validation), so controllers adding finalizers
to existing objects are never blocked.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal

from policies.catalog_refs import (
    MSG_NOT_AN_OBJECT,
    REGISTRY_BINDINGS_BY_REGISTRY,
    REGISTRY_BINDINGS_BY_TARGET,
    fit_warning,
    json_type,
    live,
    new_reference_problem,
    ref_key,
    reference_changed,
    request_key,
    split_key,
)
from policies.decision import Decision, allow, deny, invalid
from policies.kinds import REGISTRY, REGISTRY_BINDING
from policies.model import AdmissionRequest, Obj, Operation
from policies.objects import dig, ref_of
from policies.rules import Context
from policies.view import View

# --- Registry: field validation ----------------------------------------------------------------

MSG_FLAVOR_REQUIRED = "spec.flavor is required when spec.webhookPath is set (e.g. zot)"
MSG_SCAN_INTERVAL_NOT_DURATION = 'spec.scanInterval "{value}" is not a duration such as 30s, 5m or 1h30m'
MSG_SCAN_INTERVAL_NOT_POSITIVE = (
    'spec.scanInterval "{value}" must be greater than 0; leave it unset to switch scanning off'
)
MSG_HOSTNAME_REQUIRED = "spec.hostname is required: host[:port] such as registry.example.com:5000"
MSG_HOSTNAME_INVALID = 'spec.hostname "{value}" is not host[:port] (no scheme, no path), e.g. registry.example.com:5000'

_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION_UNIT_NS = {
    "ns": Decimal(1),
    "us": Decimal(1_000),
    "µs": Decimal(1_000),
    "μs": Decimal(1_000),
    "ms": Decimal(1_000_000),
    "s": Decimal(1_000_000_000),
    "m": Decimal(60_000_000_000),
    "h": Decimal(3_600_000_000_000),
}


def go_duration_ns(value: object) -> Decimal | None:
    """Nanoseconds of a Go ``time.ParseDuration`` string (metav1.Duration's JSON form); None if invalid."""
    if not isinstance(value, str) or not value:
        return None
    sign, body = (-1, value[1:]) if value[0] == "-" else (1, value.removeprefix("+"))
    if body == "0":
        return Decimal(0)
    total, pos = Decimal(0), 0
    while pos < len(body):
        part = _DURATION_PART.match(body, pos)
        if part is None:
            return None
        total += Decimal(part.group(1)) * _DURATION_UNIT_NS[part.group(2)]
        pos = part.end()
    return sign * total if body else None


_DNS_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_HOST_PORT = re.compile(r"(?:\[(?P<ipv6>[^\]]+)\]|(?P<host>[^:\[\]]+))(?::(?P<port>\d{1,5}))?")


def _valid_host(host: str) -> bool:
    if len(host) > 253:
        return False
    try:
        ipaddress.IPv4Address(host)
        return True
    except ValueError:
        return all(_DNS_LABEL.fullmatch(label) for label in host.split("."))


def is_host_port(value: str) -> bool:
    """``host[:port]`` with a DNS name, an IPv4 address or a bracketed IPv6 address; port 1-65535."""
    m = _HOST_PORT.fullmatch(value)
    if m is None:
        return False
    port = m.group("port")
    if port is not None and not 1 <= int(port) <= 65535:
        return False
    if m.group("ipv6") is not None:
        try:
            ipaddress.IPv6Address(m.group("ipv6"))
            return True
        except ValueError:
            return False
    return _valid_host(m.group("host"))


def _flavor_violations(spec: Obj) -> Iterator[str]:
    if spec.get("webhookPath") and not spec.get("flavor"):
        yield MSG_FLAVOR_REQUIRED


def _scan_interval_violations(spec: Obj) -> Iterator[str]:
    value = spec.get("scanInterval")
    if value is None:
        return
    ns = go_duration_ns(value)
    if ns is None:
        yield MSG_SCAN_INTERVAL_NOT_DURATION.format(value=value)
    elif ns <= 0:
        yield MSG_SCAN_INTERVAL_NOT_POSITIVE.format(value=value)


def _hostname_violations(spec: Obj) -> Iterator[str]:
    value = spec.get("hostname")
    if not value:
        yield MSG_HOSTNAME_REQUIRED
    elif not isinstance(value, str) or not is_host_port(value):
        yield MSG_HOSTNAME_INVALID.format(value=value)


REGISTRY_FIELD_CHECKS: tuple[tuple[tuple[str, ...], Callable[[Obj], Iterator[str]]], ...] = (
    (("hostname",), _hostname_violations),
    (("webhookPath", "flavor"), _flavor_violations),
    (("scanInterval",), _scan_interval_violations),
)
"""Each check, with the spec fields it reads, yields the exact message of every violation it finds."""


def _unchanged(spec: Obj, old_spec: Obj, fields: tuple[str, ...]) -> bool:
    """Unset and empty count as the same value (``flavor: ""`` sets nothing)."""
    return all((spec.get(f) or None) == (old_spec.get(f) or None) for f in fields)


def registry_violations(registry: Obj | None, old: Obj | None = None) -> list[str]:
    """Every violation in ``registry``'s spec; with ``old``, only those of checks whose fields changed.

    Ratcheting as Kubernetes does it: a field left as it was is not re-judged, so an object
    created before the webhook existed can still get finalizers; a field that changes must be
    valid, even if it was invalid before (a new webhookPath still needs a flavor).
    """
    spec = dig(registry, "spec", default={})
    if not isinstance(spec, Mapping):
        if old is not None and spec == dig(old, "spec", default={}):
            return []
        return [MSG_NOT_AN_OBJECT.format(field="spec", got=json_type(spec))]
    old_spec = dig(old, "spec", default=None)
    if not isinstance(old_spec, Mapping):
        old_spec = None
    return [
        msg
        for fields, check in REGISTRY_FIELD_CHECKS
        if old_spec is None or not _unchanged(spec, old_spec, fields)
        for msg in check(spec)
    ]


def registry_fields(req: AdmissionRequest, ctx: Context) -> Decision:
    """Registry fields the aggregated SolAr API validates, plus a well-formed hostname.

    On UPDATE only the checks whose fields changed run (ratcheting, see :func:`registry_violations`).
    """
    old = req.old_object if req.operation is Operation.UPDATE else None
    found = registry_violations(req.object, old)
    return invalid("; ".join(found)) if found else allow()


# --- Target: the render Registry must carry push credentials ----------------------------------

MSG_TARGET_NO_PUSH_CREDENTIALS = (
    "render Registry {registry} has no spec.solarSecretRef (missing push credentials); "
    "set it on the Registry first or choose another spec.renderRegistryRef"
)
WARN_TARGET_REGISTRY_NOT_FOUND = "render Registry {registry} not found yet; the Target renders once it exists"


def target_render_registry(req: AdmissionRequest, ctx: Context) -> Decision:
    """A Target may name as render destination only a Registry that has push credentials.

    The renderer would fail every render of the Target otherwise (ADR-010, a hard render
    failure). A Registry not yet created passes with a warning: GitOps may apply it second.
    """
    path = ("spec", "renderRegistryRef")
    if problem := new_reference_problem(req, *path):
        return invalid(problem)
    key = ref_key(req.object, *path)
    if not key or not reference_changed(req, *path):
        return allow()
    ns, name = split_key(key)
    registry = ctx.view.get(REGISTRY, name, ns)
    if registry is None:
        return allow(fit_warning(WARN_TARGET_REGISTRY_NOT_FOUND, registry=key))
    if not dig(registry, "spec", "solarSecretRef", "name"):
        return deny(MSG_TARGET_NO_PUSH_CREDENTIALS.format(registry=key))
    return allow()


# --- RegistryBinding: one binding per (Target, registry host) ---------------------------------

MSG_BINDING_AMBIGUOUS = (
    "RegistryBindings {binding} and {other} would both bind Target {target} to registry host {host}; "
    "delete {other} or bind this one to another Target or Registry"
)
MSG_REGISTRY_HOST_AMBIGUOUS = (
    "hostname {host} would make RegistryBindings {binding} and {other} both bind Target {target} to that host; "
    "keep the hostname or delete one of the bindings"
)
WARN_BINDING_REGISTRY_NOT_FOUND = "Registry {registry} not found yet; the binding is not checked for a duplicate host"


def _host(registry: Obj | None) -> str:
    """The registry host as the renderer matches it: lowercased ``spec.hostname``."""
    return str(dig(registry, "spec", "hostname", default="")).lower()


def _same_host_bindings(view: View, target: str, host: str, skip_binding: str, pending: str = "") -> list[Obj]:
    """Live bindings of ``target`` but ``skip_binding`` (sorted) whose Registry has ``host``.

    Registries are read from the view, except ``pending`` (a ``namespace/name`` key): the Registry
    being admitted right now, which has ``host`` although the view does not know it yet.
    """
    found = []
    for other in live(view.indexed(REGISTRY_BINDING, REGISTRY_BINDINGS_BY_TARGET, target)):
        registry_key = ref_key(other, "spec", "registryRef", local=True)
        if ref_of(other) == skip_binding or not registry_key:
            continue
        ns, name = split_key(registry_key)
        if registry_key == pending or _host(view.get(REGISTRY, name, ns)) == host:
            found.append(other)
    return found


def registrybinding_ambiguous(req: AdmissionRequest, ctx: Context) -> Decision:
    """A second binding of one Target to a registry with the same hostname is ambiguous.

    The renderer needs exactly one binding per source host (ADR-010) and otherwise fails with an
    ambiguity error at render time; two bindings to the very same Registry count too.
    """
    target_path, registry_path = ("spec", "targetRef"), ("spec", "registryRef")
    if problem := new_reference_problem(req, *target_path) or new_reference_problem(req, *registry_path):
        return invalid(problem)
    target = ref_key(req.object, *target_path)
    registry_key = ref_key(req.object, *registry_path, local=True)
    changed = reference_changed(req, *target_path) or reference_changed(req, *registry_path, local=True)
    if not target or not registry_key or not changed:
        return allow()
    ns, name = split_key(registry_key)
    registry = ctx.view.get(REGISTRY, name, ns)
    if registry is None:
        return allow(fit_warning(WARN_BINDING_REGISTRY_NOT_FOUND, registry=registry_key))
    me, host = request_key(req), _host(registry)
    clashes = _same_host_bindings(ctx.view, target, host, skip_binding=me) if host else []
    if clashes:
        return deny(MSG_BINDING_AMBIGUOUS.format(binding=me, other=ref_of(clashes[0]), target=target, host=host))
    return allow()


def registry_hostname_ambiguous(req: AdmissionRequest, ctx: Context) -> Decision:
    """A Registry (re)named to a host another binding of the same Target already uses is ambiguous.

    Runs on CREATE too, since bindings may name a Registry before it exists (GitOps order). The
    view still holds this Registry's old hostname, so two bindings to this same Registry are not
    a clash the change creates and are left alone.
    """
    host = _host(req.object)
    if not host or (req.operation is Operation.UPDATE and host == _host(req.old_object)):
        return allow()
    registry_key = request_key(req)
    # The moment this Registry gets its first hostname, two bindings of one Target that both
    # name it become ambiguous; a later hostname change does not create that clash.
    pending = registry_key if not _host(req.old_object) else ""
    for binding in live(ctx.view.indexed(REGISTRY_BINDING, REGISTRY_BINDINGS_BY_REGISTRY, registry_key)):
        target = ref_key(binding, "spec", "targetRef")
        if not target:
            continue
        clashes = _same_host_bindings(ctx.view, target, host, ref_of(binding), pending)
        if clashes:
            return deny(
                MSG_REGISTRY_HOST_AMBIGUOUS.format(
                    host=host, binding=ref_of(binding), other=ref_of(clashes[0]), target=target
                )
            )
    return allow()
