"""SIGTERM drains ``catalog-warden serve``: requests in flight get their answers, within a bound.

The server is the real CLI process (a signal reaches only a process's main thread, so a server run
in a test thread cannot receive one). The request is held in flight by the client: it sends the
headers and part of the body, and the rest only once the server has stopped accepting new
connections, so the request is provably in flight across the signal without any timing guess.
"""

from __future__ import annotations

import json
import signal
import socket
import ssl
import time
from pathlib import Path

from tests.server.reviews import release, review
from tests.support.server import REPO, Endpoint, ServerProcess, wait_until

STATE = ["--state", str(REPO / "examples" / "state")]


def held_request(endpoint: Endpoint, body: bytes) -> ssl.SSLSocket:
    """A POST /validate/catalog whose headers and first bytes are sent; the rest is the caller's."""
    raw = socket.create_connection(("127.0.0.1", endpoint.port), timeout=20)
    tls = endpoint.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")
    head = (
        "POST /validate/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    tls.sendall(head.encode() + body[:10])
    wait_until(lambda: endpoint.metric("catalog_warden_admission_in_flight") == 1, what="the request in flight")
    return tls


def accepts(endpoint: Endpoint) -> bool:
    try:
        socket.create_connection(("127.0.0.1", endpoint.port), timeout=1).close()
    except OSError:
        return False
    return True


def read_response(tls: ssl.SSLSocket) -> tuple[int, bytes, dict[str, object]]:
    """Status, the header block (lower-cased) and the JSON body of one HTTP/1.1 answer."""
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < content_length(data):
        chunk = tls.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head.lower(), json.loads(body)


def content_length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def test_sigterm_lets_an_in_flight_admission_request_finish_then_exits_0(certs: Path) -> None:
    body = json.dumps(review("CREATE", release("ocm-demo-v1.1.0"), uid="uid-drain")).encode()
    server = ServerProcess(certs, STATE)
    with server as endpoint:
        tls = held_request(endpoint, body)
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: not accepts(endpoint), what="the listener to stop accepting")
        assert server.proc.poll() is None, "exited with a request in flight"
        tls.sendall(body[10:])
        status, head, answer = read_response(tls)
        assert b"\r\nconnection: close" in head
        tls.close()  # as a client told `connection: close` does: the drain waits for that
        assert (status, answer["response"]["uid"], answer["response"]["allowed"]) == (200, "uid-drain", False)  # type: ignore[index]
        assert server.proc.wait(timeout=20) == 0, server.logs()
    assert "timeout graceful shutdown exceeded" not in server.logs()


def test_the_drain_is_bounded_by_drain_seconds(certs: Path) -> None:
    body = json.dumps(review("CREATE", release("ocm-demo-v1.1.0"))).encode()
    server = ServerProcess(certs, [*STATE, "--drain-seconds", "1"])
    with server as endpoint:
        tls = held_request(endpoint, body)  # and never completed
        assert server.proc is not None
        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=20) == 0, server.logs()
        waited = time.monotonic() - signalled
        tls.close()
    assert 1 <= waited < 10, waited  # it waited for the request, up to 1 s, not the default 10 s
    assert "timeout graceful shutdown exceeded" in server.logs()


def test_a_kept_alive_connection_idle_at_sigterm_still_gets_its_next_answer_then_closes(certs: Path) -> None:
    """kube-apiserver writes its next call on a kept-alive connection without warning: closing that
    connection the instant shutdown starts would lose the call. It gets an answer with
    ``connection: close`` instead, so the client dials again (another replica, in a cluster)."""
    first, second = (json.dumps(review("CREATE", release("ocm-demo-v1.1.0"), uid=u)).encode() for u in ("u1", "u2"))
    server = ServerProcess(certs, STATE)
    with server as endpoint:
        raw = socket.create_connection(("127.0.0.1", endpoint.port), timeout=20)
        tls = endpoint.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")

        def post(body: bytes) -> None:
            head = (
                "POST /validate/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            tls.sendall(head.encode() + body)

        post(first)
        status, head, _ = read_response(tls)
        assert status == 200 and b"\r\nconnection: close" not in head  # kept alive, now idle
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: not accepts(endpoint), what="the listener to stop accepting")
        post(second)
        status, head, answer = read_response(tls)
        assert (status, answer["response"]["uid"]) == (200, "u2"), head  # type: ignore[index]
        assert b"\r\nconnection: close" in head
        assert tls.recv(1) == b""  # and closes the connection after it
        tls.close()
        assert server.proc.wait(timeout=20) == 0, server.logs()
