"""The probe listener runs off the admission event loop, and readiness still tells the truth.

Both races are forced with events: a ``/metrics`` render that waits until the test lets it go,
and a rule that blocks the admission loop until the test lets it go.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from policies.decision import allow
from policies.kinds import CATALOG_KINDS, RELEASE
from policies.model import Operation
from policies.rules import Family, Rule, RuleTable
from tests.server.reviews import release, review
from tests.support.server import REPO, ServerThread, free_port, wait_until


def test_admission_is_answered_while_a_metrics_render_is_blocked(certs: Path) -> None:
    entered, release_render = threading.Event(), threading.Event()
    server = ServerThread(certs)
    metrics = server.warden.metrics
    render = metrics.render

    def blocked_render() -> bytes:
        entered.set()
        release_render.wait(30)
        return render()

    metrics.render = blocked_render  # type: ignore[method-assign]
    scraped: list[httpx.Response] = []
    with server as ep:
        scrape = threading.Thread(target=lambda: scraped.append(httpx.get(f"{ep.probe_url}/metrics", timeout=30)))
        scrape.start()
        try:
            assert entered.wait(10), "the /metrics request never reached the render"
            with ep.client() as c:  # 10 s: the render stays blocked far longer
                r = c.post("/validate/catalog", json=review("CREATE", release("any"), uid="during-render"))
            assert r.status_code == 200
            assert r.json()["response"]["uid"] == "during-render"
            assert scrape.is_alive()  # the render was still blocked while admission answered
        finally:
            release_render.set()
            scrape.join(10)
    assert scraped[0].status_code == 200


def _blocking_tables(entered: threading.Event, go: threading.Event) -> dict[str, RuleTable]:
    def blocks(req, ctx):
        entered.set()
        go.wait(30)  # blocks the admission event loop itself: rules are synchronous
        return allow()

    rule = Rule("test.blocks", RELEASE, frozenset(Operation), blocks, needs_view=False)
    fam = Family("catalog", CATALOG_KINDS, (rule,))
    return {"catalog": RuleTable.build(fam)}


def test_readiness_turns_false_while_the_admission_loop_is_stalled_and_back_after(certs: Path) -> None:
    entered, go = threading.Event(), threading.Event()
    with ServerThread(certs, tables=_blocking_tables(entered, go), stall_timeout=0.5) as ep:
        answers: list[httpx.Response] = []

        def admit() -> None:
            with httpx.Client(base_url=ep.url, verify=ep.ssl_context(), timeout=30) as c:
                answers.append(c.post("/validate/catalog", json=review("CREATE", release("x"), uid="stalled")))

        poster = threading.Thread(target=admit)
        poster.start()
        try:
            assert entered.wait(10), "the blocking rule never ran"
            seen: list[httpx.Response] = []

            def reports_stall() -> bool:
                seen[:] = [httpx.get(f"{ep.probe_url}/readyz", timeout=2)]
                return seen[0].status_code == 503

            wait_until(reports_stall, timeout=10, what="/readyz to report the stalled admission loop")
            assert seen[0].text.startswith("admission event loop stalled for ")
            assert httpx.get(f"{ep.probe_url}/healthz", timeout=2).text == "ok"
        finally:
            go.set()
            poster.join(10)
        assert answers[0].json()["response"] == {"uid": "stalled", "allowed": True}
        wait_until(ep.ready, timeout=10, what="readiness after the stall")


def test_a_probe_port_that_cannot_be_bound_stops_the_server(certs: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        cmd = [sys.executable, "-m", "webhook.cli", "serve", "--cert-dir", str(certs), "--state",
               str(REPO / "examples" / "state"), "--host", "127.0.0.1", "--port", str(free_port()),
               "--probe-host", "127.0.0.1", "--probe-port", str(busy.getsockname()[1])]  # fmt: skip
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, timeout=60)
    assert done.returncode != 0
    assert b"address already in use" in done.stderr.lower()
