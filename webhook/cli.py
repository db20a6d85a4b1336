"""``catalog-warden``: serve, sidecar, certs, review.

Every user error (bad flag, missing file, unreadable state) is one line on stderr naming the
path or flag, and a non-zero exit; never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

import yaml

from policies.families import FAMILIES
from policies.view import MemoryView, View
from webhook.admission import Admission, WireError, normalize, response
from webhook.certs import write_dev_certs
from webhook.config import ConfigError, load_config
from webhook.state import StateError, load_state
from webhook.tls import CertError
from webhook.yamlerrors import describe

PROG = "catalog-warden"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Admission and conversion webhooks for OCI artifact catalogs.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("serve", help="run the admission and conversion webhook server")
    s.add_argument("--cert-dir", type=Path, default=Path("certs"), help="directory with tls.crt and tls.key")
    s.add_argument("--client-ca", type=Path, help="require client certificates signed by this CA")
    s.add_argument("--host", default="0.0.0.0", help="address of the HTTPS listener")
    s.add_argument("--port", type=int, default=9443, help="HTTPS port (admission and conversion)")
    s.add_argument("--probe-host", default="0.0.0.0", help="address of the probe listener")
    s.add_argument("--probe-port", type=int, default=8080, help="plain-HTTP port for /healthz, /readyz, /metrics")
    source = s.add_mutually_exclusive_group()
    source.add_argument("--state", type=Path, help="read cluster state from YAML files in DIR instead of a cluster")
    source.add_argument("--kubeconfig", type=Path, help="kubeconfig of the cluster to cache (default: in-cluster)")
    s.add_argument("--config", type=Path, help="YAML configuration (identities, families, thresholds)")
    s.add_argument("--cert-poll-seconds", type=float, default=5.0, help="how often to check the pair for rotation")
    s.add_argument(
        "--drain-seconds", type=int, default=10, help="on SIGTERM, how long in-flight requests may take to finish"
    )
    s.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    _add_bounds(s)

    sc = sub.add_parser("sidecar", help="run the availability, referenced-set and reclamation loops")
    sc.add_argument("--kubeconfig", type=Path, help="kubeconfig file (default: the in-cluster service account)")
    sc.add_argument("--config", type=Path, help="YAML configuration (the sidecar: section)")
    sc.add_argument("--events-host", default="0.0.0.0", help="address of the events listener")
    sc.add_argument("--events-port", type=int, default=8081, help="port for /events, /healthz, /readyz, /metrics")
    sc.add_argument("--identity", default="", help="this replica's Lease identity (default: $POD_NAME or hostname)")
    sc.add_argument("--namespace", default="", help="namespace of the Lease (default: $POD_NAMESPACE or config)")
    sc.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])

    c = sub.add_parser("certs", help="write a development CA and serving certificate")
    c.add_argument("--out", type=Path, required=True, help="directory to write ca.crt, tls.crt, tls.key into")
    c.add_argument("--dns", nargs="+", default=[], metavar="NAME", help="DNS names for the serving certificate")

    r = sub.add_parser("review", help="evaluate an AdmissionReview file offline and print the response")
    r.add_argument("file", type=Path, help="AdmissionReview (JSON or YAML); - reads standard input")
    r.add_argument("--state", type=Path, help="read cluster state from YAML files in DIR")
    r.add_argument("--config", type=Path, help="YAML configuration")
    r.add_argument("--mutating", action="store_true", help="evaluate as /mutate/{family} instead of /validate")
    r.add_argument("--family", choices=sorted(FAMILIES), help="family to evaluate (default: from the request kind)")
    return p


def _positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if value <= 0:
            what = "a positive whole number" if kind is int else "a positive number of seconds"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


def _add_bounds(s: argparse.ArgumentParser) -> None:
    """The connection bounds of ``serve`` (webhook/bounds.py; defaults are :class:`Bounds`'s)."""
    from webhook.bounds import Bounds

    d = Bounds()
    g = s.add_argument_group("connection bounds (both listeners; docs/configuration.md)")
    for flag, default, kind, what in (
        ("--limit-concurrency", d.limit_concurrency, int, "open connections plus running requests before a 503"),
        ("--backlog", d.backlog, int, "connections the kernel queues before accept"),
        ("--tls-handshake-timeout", d.tls_handshake_timeout, float, "seconds to finish the TLS handshake"),
        ("--idle-timeout", d.idle_timeout, float, "seconds a connection may wait for its next request"),
        ("--header-timeout", d.header_timeout, float, "seconds from a request's first byte to its last header"),
        ("--body-timeout", d.body_timeout, float, "seconds from the headers to the last body byte"),
        ("--max-header-bytes", d.max_header_bytes, int, "size limit of the request line plus headers"),
    ):
        g.add_argument(flag, type=_positive(kind), default=default, help=f"{what} (default {default})")
    s.add_argument("--stall-timeout", type=_positive(float), default=10.0,
                   help="readiness fails when the admission loop has not run for this many seconds")  # fmt: skip


def _fail(message: str) -> NoReturn:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    raise SystemExit(1)


def _cmd_serve(args: argparse.Namespace) -> None:
    from webhook import logs
    from webhook.bounds import Bounds
    from webhook.server import ServeSettings, Warden

    logs.setup(args.log_level)
    for flag, path in (("--cert-dir", args.cert_dir),):
        if not path.is_dir():
            _fail(f"{flag} {path}: no such directory (create one with `{PROG} certs --out {path}`)")
    config = load_config(args.config)
    cache = None
    if args.state is not None:
        view: View = load_state(args.state)
    else:
        from kubernetes.config.config_exception import ConfigException

        from webhook.kube.cache import InformerCache
        from webhook.kube.client import Kube, build_api_client

        try:
            api_client = build_api_client(args.kubeconfig)
        except (ConfigException, OSError) as exc:
            where = f"--kubeconfig {args.kubeconfig}" if args.kubeconfig else "in-cluster config (no --kubeconfig)"
            _fail(f"cannot connect with {where} ({str(exc).rstrip('.')}); pass --state DIR to serve from files")
        cache = InformerCache.configured(Kube(api_client), config.informer).start()
        view = cache
    settings = ServeSettings(
        cert_dir=args.cert_dir,
        host=args.host,
        port=args.port,
        probe_host=args.probe_host,
        probe_port=args.probe_port,
        client_ca=args.client_ca,
        cert_poll_seconds=args.cert_poll_seconds,
        drain_seconds=args.drain_seconds,
        bounds=Bounds(
            limit_concurrency=args.limit_concurrency,
            backlog=args.backlog,
            tls_handshake_timeout=args.tls_handshake_timeout,
            idle_timeout=args.idle_timeout,
            header_timeout=args.header_timeout,
            body_timeout=args.body_timeout,
            max_header_bytes=args.max_header_bytes,
        ),
        stall_timeout=args.stall_timeout,
    )
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(Warden(settings, lambda: view, config).run())
    finally:
        if cache is not None:
            cache.stop()


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when installed (uvicorn[standard] brings it), as ``uvicorn`` itself would choose."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _cmd_sidecar(args: argparse.Namespace) -> None:
    import os
    import socket

    from webhook import logs
    from webhook.kube.client import Kube, build_api_client
    from webhook.sidecar.runner import Sidecar, SidecarSettings

    logs.setup(args.log_level)
    config = load_config(args.config)
    if args.kubeconfig is not None and not args.kubeconfig.is_file():
        _fail(f"--kubeconfig {args.kubeconfig}: no such file")
    try:
        kube = Kube(build_api_client(args.kubeconfig))
    except Exception as exc:  # the kubernetes client raises ConfigException and others
        _fail(f"cannot connect to the cluster: {exc}")
    settings = SidecarSettings(
        namespace=args.namespace or os.environ.get("POD_NAMESPACE") or config.sidecar.referencedSet.namespace,
        identity=args.identity or os.environ.get("POD_NAME") or socket.gethostname(),
        events_host=args.events_host,
        events_port=args.events_port,
    )
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(Sidecar(kube, config, settings).run())


def _cmd_certs(args: argparse.Namespace) -> None:
    try:
        bundle = write_dev_certs(args.out, args.dns)
    except OSError as exc:
        _fail(f"cannot write certificates to {args.out}: {exc.strerror}")
    print(bundle)


def _family_of(kind: dict) -> str | None:
    from webhook.state import group_kind

    gk = group_kind({"apiVersion": f"{kind.get('group', '')}/{kind.get('version', '')}", "kind": kind.get("kind")})
    return next((name for name, fam in FAMILIES.items() if gk in fam.kinds), None)


def _cmd_review(args: argparse.Namespace) -> None:
    try:
        text = sys.stdin.read() if str(args.file) == "-" else args.file.read_text()
    except OSError as exc:
        _fail(f"cannot read {args.file}: {exc.strerror}")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        _fail(f"{args.file} is not JSON or YAML: {describe(exc)}")
    if not isinstance(doc, dict) or not isinstance(doc.get("request"), dict):
        _fail(f"{args.file}: not an AdmissionReview with a request")
    view = load_state(args.state) if args.state else MemoryView()
    config = load_config(args.config)
    try:
        req = normalize(doc["request"])
    except WireError as exc:
        _fail(f"{args.file}: {exc.message}")
    family = args.family or _family_of(doc["request"].get("kind") or {})
    admission = Admission(lambda: view, config)
    if family is None:
        from policies.decision import allow
        from webhook.admission import Verdict

        answer = response(req.uid, Verdict(allow(f"catalog-warden: no rule family guards {req.kind}; admitted")))
    else:
        answer = response(req.uid, admission.evaluate(family, args.mutating, req))
    print(json.dumps(answer, indent=2))


COMMANDS = {"serve": _cmd_serve, "sidecar": _cmd_sidecar, "certs": _cmd_certs, "review": _cmd_review}


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        COMMANDS[args.command](args)
    except (StateError, ConfigError, CertError) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
