"""A throwaway CA and serving certificates for tests (what cert-manager issues in a cluster).

The double verifies webhook servers against the CA it was given, exactly as kube-apiserver verifies
against the injected caBundle, so tests need a real chain, not `verify=False`.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path, cert_name: str = "tls.crt", key_name: str = "tls.key") -> tuple[Path, Path]:
        """Write as a cert-manager Secret mounts it; returns (cert path, key path)."""
        directory.mkdir(parents=True, exist_ok=True)
        cert_path, key_path = directory / cert_name, directory / key_name
        cert_path.write_bytes(self.cert_pem)
        key_path.write_bytes(self.key_pem)
        return cert_path, key_path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


class TestCA:
    """A self-signed ECDSA P-256 CA that issues serving certificates for 127.0.0.1 and localhost."""

    __test__ = False  # not a pytest test class

    def __init__(self, common_name: str = "catalog-warden test CA") -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.cert_pem = self._cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, dns_names: tuple[str, ...] = ("localhost",), ips: tuple[str, ...] = ("127.0.0.1",)) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(dns_names[0] if dns_names else ips[0]))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=12))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))
