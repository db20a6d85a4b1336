"""Certificate rotation as cert-manager performs it: an atomic symlink swap of the mounted Secret."""

from __future__ import annotations

import os
import socket
import ssl
import threading
import warnings
from pathlib import Path

import pytest
from cryptography import x509

from tests.server.reviews import release, review
from tests.support.server import Endpoint, ServerProcess, wait_until
from webhook.certs import make_ca, make_serving


class SecretMount:
    """A directory laid out like a kubelet Secret volume: ``tls.crt -> ..data/tls.crt``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.generation = 0
        self.ca, self.ca_key = make_ca()
        (root / "ca.crt").write_bytes(self.ca.cert_pem)
        self.publish(*self.new_pair())
        for name in ("tls.crt", "tls.key"):
            os.symlink(f"..data/{name}", root / name)

    def new_pair(self) -> tuple[bytes, bytes]:
        pair = make_serving(self.ca, self.ca_key, ["catalog-warden.catalog-warden.svc"])
        return pair.cert_pem, pair.key_pem

    def publish(self, cert: bytes, key: bytes) -> None:
        self.generation += 1
        gen = self.root / f"..2026_11_29_{self.generation}"
        gen.mkdir()
        (gen / "tls.crt").write_bytes(cert)
        (gen / "tls.key").write_bytes(key)
        tmp = self.root / "..data_tmp"
        os.symlink(gen.name, tmp)
        os.replace(tmp, self.root / "..data")  # the atomic swap


def served_serial(endpoint: Endpoint) -> int:
    """The serial number of the certificate a brand-new handshake presents."""
    ctx = endpoint.ssl_context()
    with (
        socket.create_connection(("127.0.0.1", endpoint.port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(der).serial_number


def serial_of(pem: bytes) -> int:
    return x509.load_pem_x509_certificate(pem).serial_number


@pytest.fixture
def mount(tmp_path: Path) -> SecretMount:
    d = tmp_path / "serving"
    d.mkdir()
    return SecretMount(d)


def test_rotation_keeps_connections_and_serves_the_new_pair(mount: SecretMount, tmp_path: Path) -> None:
    first = serial_of((mount.root / "tls.crt").read_bytes())
    with ServerProcess(mount.root, ["--state", "examples/state", "--cert-poll-seconds", "0.2"]) as ep:
        assert served_serial(ep) == first
        body = review("CREATE", release("ocm-demo-v1.2.0"))

        # Keep-alive connections opened with the old certificate, hammering through the swap.
        failures: list[str] = []
        answered = [0]
        swapped = threading.Event()
        after_swap = [0]

        def worker() -> None:
            with ep.client() as c:
                while after_swap[0] < 40:
                    r = c.post("/validate/catalog", json=body)
                    if r.status_code != 200 or r.json()["response"]["allowed"] is not True:
                        failures.append(r.text)
                    answered[0] += 1
                    if swapped.is_set():
                        after_swap[0] += 1

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        wait_until(lambda: answered[0] >= 20, what="requests before the swap")
        cert, key = mount.new_pair()
        mount.publish(cert, key)
        swapped.set()
        wait_until(lambda: served_serial(ep) == serial_of(cert), timeout=10, what="new certificate on new handshakes")
        for t in threads:
            t.join(timeout=30)
        assert failures == []
        assert ep.metric("catalog_warden_certificate_reloads_total") == 1

        # A broken replacement (key of another pair) keeps the last good pair.
        other_cert, _ = mount.new_pair()
        mount.publish(other_cert, b"-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n")
        wait_until(lambda: ep.metric("catalog_warden_certificate_reload_errors_total") == 1, timeout=10,
                   what="the reload error to be counted")  # fmt: skip
        assert served_serial(ep) == serial_of(cert)
        with ep.client() as c:
            assert c.post("/validate/catalog", json=body).status_code == 200

        # A mismatched pair (valid cert, valid key of another pair) is refused as well.
        c3, _k3 = mount.new_pair()
        _c4, k4 = mount.new_pair()
        mount.publish(c3, k4)
        wait_until(lambda: ep.metric("catalog_warden_certificate_reload_errors_total") == 2, timeout=10,
                   what="the mismatch to be counted")  # fmt: skip
        assert served_serial(ep) == serial_of(cert)


def test_tls_below_1_2_is_refused(mount: SecretMount) -> None:
    with ServerProcess(mount.root, ["--state", "examples/state"]) as ep:
        ctx = ep.ssl_context()
        with warnings.catch_warnings():  # the point is to use a deprecated version
            warnings.simplefilter("ignore", DeprecationWarning)
            ctx.minimum_version = ssl.TLSVersion.TLSv1
            ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        ctx.set_ciphers("ALL:@SECLEVEL=0")
        with socket.create_connection(("127.0.0.1", ep.port), timeout=5) as raw, pytest.raises(ssl.SSLError):
            ctx.wrap_socket(raw, server_hostname="localhost")


def test_client_ca_requires_a_client_certificate(tmp_path: Path, mount: SecretMount) -> None:
    client_ca, client_ca_key = make_ca("test client CA")
    (tmp_path / "client-ca.crt").write_bytes(client_ca.cert_pem)
    client = make_serving(client_ca, client_ca_key, ["apiserver"], client_auth=True)
    (tmp_path / "client.crt").write_bytes(client.cert_pem)
    (tmp_path / "client.key").write_bytes(client.key_pem)
    args = ["--state", "examples/state", "--client-ca", str(tmp_path / "client-ca.crt")]
    body = review("CREATE", release("ocm-demo-v1.2.0"))
    with ServerProcess(mount.root, args) as ep:
        import httpx

        ctx = ep.ssl_context()
        with httpx.Client(base_url=ep.url, verify=ctx) as c, pytest.raises(httpx.HTTPError):
            c.post("/validate/catalog", json=body)
        ctx.load_cert_chain(tmp_path / "client.crt", tmp_path / "client.key")
        with httpx.Client(base_url=ep.url, verify=ctx) as c:
            assert c.post("/validate/catalog", json=body).json()["response"]["allowed"] is True
