"""Connection bounds against the real server process over real TLS (webhook/bounds.py).

Each phase of a connection has a deadline (short ones here: 0.5 s); a client that passes one is
cut, answered with a Kubernetes Status when no answer has started, and counted. Clients wait on
the socket itself (readable or closed) with a bounded deadline; the drips are the attack's own
cadence, not a wait for the server.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.reviews import release, review
from tests.support.server import REPO, Endpoint, ServerProcess

SHORT = "0.5"
SHORT_BOUNDS = [
    "--tls-handshake-timeout", SHORT, "--idle-timeout", SHORT, "--header-timeout", SHORT,
    "--body-timeout", SHORT, "--max-header-bytes", "4096",
]  # fmt: skip
DEADLINE = 10.0
"""How long a client waits for the server to act before the test fails (20x the bound)."""


@pytest.fixture(scope="module")
def bounded(certs: Path) -> Iterator[Endpoint]:
    with ServerProcess(certs, ["--state", str(REPO / "examples" / "state"), *SHORT_BOUNDS]) as endpoint:
        yield endpoint


def tls(endpoint: Endpoint) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", endpoint.port), timeout=DEADLINE)
    return endpoint.ssl_context().wrap_socket(raw, server_hostname="localhost")


def read_to_close(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection; fails after :data:`DEADLINE`."""
    sock.settimeout(DEADLINE)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ssl.SSLEOFError, ConnectionResetError):
            return data
        except TimeoutError:
            raise AssertionError(f"the server did not close the connection within {DEADLINE}s") from None
        if not chunk:
            return data
        data += chunk


def drip(sock: ssl.SSLSocket, payload: bytes) -> bytes:
    """Send ``payload`` one byte per 50 ms until the server answers or closes; return what it sent.

    Readable is not yet an answer: TLS 1.3 session tickets arrive after the handshake.
    """
    sock.settimeout(0.05)
    for byte in payload:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ssl.SSLWantReadError):
            chunk = None
        except (ssl.SSLEOFError, ConnectionResetError):
            return b""
        if chunk is not None:
            return chunk + read_to_close(sock) if chunk else b""
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            return read_to_close(sock)
    raise AssertionError(f"the server read all {len(payload)} dripped bytes without cutting the connection")


def read_response(sock: ssl.SSLSocket) -> bytes:
    """One whole response (head and Content-Length body) from a kept-alive connection."""
    sock.settimeout(DEADLINE)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def status_of(answer: bytes) -> tuple[int, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


def closes(endpoint: Endpoint, reason: str) -> float:
    return endpoint.metric(f'catalog_warden_connections_closed_total{{listener="webhook",reason="{reason}"}}')


HEAD = b"POST /validate/catalog HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"


def test_idle_tls_connection_is_closed_after_the_idle_timeout(bounded: Endpoint) -> None:
    before = closes(bounded, "idle_timeout")
    with tls(bounded) as sock:
        started = time.monotonic()
        assert read_to_close(sock) == b""
        assert time.monotonic() - started >= 0.45
    assert closes(bounded, "idle_timeout") == before + 1


def test_connection_that_never_sends_a_client_hello_is_closed(bounded: Endpoint) -> None:
    with socket.create_connection(("127.0.0.1", bounded.port), timeout=DEADLINE) as raw:
        assert read_to_close(raw) == b""


def test_dripped_request_head_is_cut_at_the_header_deadline_with_a_408(bounded: Endpoint) -> None:
    before = closes(bounded, "header_timeout")
    with tls(bounded) as sock:
        answer = drip(sock, HEAD + b"X-Slow: " + b"a" * 400 + b"\r\n\r\n")
    assert status_of(answer) == (408, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 408,
                                       "message": "request line and headers not received within 0.5s"})  # fmt: skip
    assert closes(bounded, "header_timeout") == before + 1


def test_dripped_body_is_cut_at_the_body_deadline_with_a_408(bounded: Endpoint) -> None:
    before = closes(bounded, "body_timeout")
    body = json.dumps(review("CREATE", release("ocm-demo-v1.2.0"))).encode()
    with tls(bounded) as sock:
        sock.sendall(HEAD + b"Content-Length: %d\r\n\r\n" % len(body))
        answer = drip(sock, body)
    assert status_of(answer) == (408, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 408,
                                       "message": "request body not complete within 0.5s"})  # fmt: skip
    assert closes(bounded, "body_timeout") == before + 1


def test_request_head_over_the_size_limit_is_refused_with_a_431(bounded: Endpoint) -> None:
    with tls(bounded) as sock:
        sock.sendall(HEAD + b"X-Big: " + b"a" * 5000 + b"\r\n")
        answer = read_to_close(sock)
    message = "request line and headers exceed the limit of 4096 bytes"
    assert status_of(answer) == (431, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 431,
                                       "message": message})  # fmt: skip
    assert closes(bounded, "header_too_large") >= 1


def test_requests_within_the_bounds_are_answered_on_a_kept_alive_connection(bounded: Endpoint) -> None:
    with bounded.client() as c:
        for uid in ("keep-1", "keep-2"):
            r = c.post("/validate/catalog", json=review("CREATE", release("ocm-demo-v1.2.0"), uid=uid))
            assert r.json()["response"] == {"uid": uid, "allowed": True}


# --- the concurrency limit: a server of its own, with the default (long) deadlines ---------------


@pytest.fixture(scope="module")
def limited(certs: Path) -> Iterator[Endpoint]:
    with ServerProcess(
        certs, ["--state", str(REPO / "examples" / "state"), "--limit-concurrency", "3", "--idle-timeout", "60"]
    ) as endpoint:
        yield endpoint


def test_over_the_concurrency_limit_the_server_answers_503_instead_of_queueing(limited: Endpoint) -> None:
    body = json.dumps(review("CREATE", release("ocm-demo-v1.2.0"), uid="held")).encode()
    head = HEAD + b"Content-Length: %d\r\n\r\n" % len(body)
    held = [tls(limited), tls(limited)]
    try:
        # Two requests in flight (bodies not complete). uvicorn counts open connections, this one
        # included, and running requests: the third connection reaches the limit of 3.
        for sock in held:
            sock.sendall(head + body[:10])
        with tls(limited) as third:
            third.sendall(head + body)
            answer = read_to_close(third)  # uvicorn answers 503 with Connection: close
        assert answer.split(b"\r\n", 1)[0] == b"HTTP/1.1 503 Service Unavailable"
        assert limited.metric('catalog_warden_connections_closed_total{listener="webhook",reason="over_concurrency"}')
        answers: list[bytes] = []

        def finish(sock: ssl.SSLSocket) -> None:
            sock.sendall(body[10:])
            sock.settimeout(DEADLINE)
            answers.append(sock.recv(65536))

        workers = [threading.Thread(target=finish, args=(s,)) for s in held]
        for w in workers:
            w.start()
        for w in workers:
            w.join(DEADLINE)
        assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"HTTP/1.1 200 OK"] * 2
    finally:
        for sock in held:
            sock.close()


def test_a_new_connection_at_the_limit_evicts_the_longest_idle_one_and_is_served(limited: Endpoint) -> None:
    before = limited.metric('catalog_warden_connections_closed_total{listener="webhook",reason="evicted"}')
    body = json.dumps(review("CREATE", release("ocm-demo-v1.2.0"), uid="after-eviction")).encode()
    with tls(limited) as oldest, tls(limited) as newer:
        newer.sendall(HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body)  # busy once, then idle again
        assert read_response(newer).startswith(b"HTTP/1.1 200 OK")
        with limited.client() as c:  # the third connection reaches the limit of 3
            r = c.post("/validate/catalog", json=review("CREATE", release("ocm-demo-v1.2.0"), uid="third"))
        assert r.json()["response"] == {"uid": "third", "allowed": True}
        assert read_to_close(oldest) == b""  # the one idle the longest was closed to make room
        newer.sendall(HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        assert read_response(newer).startswith(b"HTTP/1.1 200 OK")  # the more recently busy one was kept
    assert limited.metric('catalog_warden_connections_closed_total{listener="webhook",reason="evicted"}') == before + 1
