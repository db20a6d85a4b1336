"""A leader-election candidate process for the tests: `python tests/kube/leader_candidate.py ...`.

It logs one line per callback to `--log` (opened O_APPEND, one write per line, so the order of lines in
the file is the order in which the candidates' callbacks ran): `started ID`, `stopped ID`, `leader ID HOLDER`,
`exited ID`. SIGTERM stops it gracefully (releasing the Lease); SIGKILL is what the tests use to lose a leader.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from webhook.kube.client import Kube, build_api_client
from webhook.kube.leader import LeaderElector, LeaseTiming


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--identity", required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--namespace", default="catalog-warden")
    parser.add_argument("--lease", default="catalog-warden-sidecar")
    parser.add_argument("--lease-duration", type=int, default=2)
    parser.add_argument("--renew-deadline", type=float, default=1.0)
    parser.add_argument("--retry-period", type=float, default=0.2)
    args = parser.parse_args()
    fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(*words: str) -> None:
        os.write(fd, (" ".join(words) + "\n").encode())

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    elector = LeaderElector(
        Kube(build_api_client(args.kubeconfig)),
        args.namespace,
        args.lease,
        args.identity,
        timing=LeaseTiming(args.lease_duration, args.renew_deadline, args.retry_period),
        on_started_leading=lambda: log("started", args.identity),
        on_stopped_leading=lambda: log("stopped", args.identity),
        on_new_leader=lambda holder: log("leader", args.identity, holder),
    )
    log("candidate", args.identity)
    elector.run(stop)
    log("exited", args.identity)


if __name__ == "__main__":
    main()
