"""Development TLS material: a CA and a serving certificate signed by it.

For trying the server locally and for tests. In a cluster, cert-manager issues the serving
certificate (``manifests/``) and injects the CA into the webhook configurations. The CA outlives
the leaf (a CA expiring before its leaf broke Kyverno clusters, kyverno#10063).
"""

from __future__ import annotations

import base64
import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ALWAYS_DNS = ("localhost",)
ALWAYS_IPS = ("127.0.0.1",)


@dataclass(frozen=True)
class Pair:
    cert_pem: bytes
    key_pem: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def make_ca(
    common_name: str = "catalog-warden development CA", days: int = 3650
) -> tuple[Pair, ec.EllipticCurvePrivateKey]:
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Pair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)), key


def make_serving(
    ca: Pair,
    ca_key: ec.EllipticCurvePrivateKey,
    dns: list[str] | tuple[str, ...],
    days: int = 365,
    client_auth: bool = False,
) -> Pair:
    """A serving certificate for ``dns`` plus localhost and 127.0.0.1, signed by ``ca``.

    ``client_auth`` adds the client-authentication usage, for testing ``--client-ca``.
    """
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client_auth else [])
    names = list(dict.fromkeys([*dns, *ALWAYS_DNS]))
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ALWAYS_IPS]
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    return _leaf(ca, ca_key, subject, sans, usages, days)


def make_client(
    ca: Pair,
    ca_key: ec.EllipticCurvePrivateKey,
    user: str,
    groups: list[str] | tuple[str, ...] = (),
    days: int = 365,
) -> Pair:
    """A client certificate signed by ``ca`` that kube-apiserver reads as ``user`` in ``groups``.

    kube-apiserver's x509 authenticator takes the user name from the common name and the groups
    from the organizations (``system:masters`` is the group that bypasses RBAC).
    """
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, user)]
    attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
    return _leaf(ca, ca_key, x509.Name(attributes), [], [ExtendedKeyUsageOID.CLIENT_AUTH], days)


def _leaf(
    ca: Pair,
    ca_key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    sans: list[x509.GeneralName],
    usages: list[x509.ObjectIdentifier],
    days: int,
) -> Pair:
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    key = _key()
    now = datetime.now(UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = (
        builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return Pair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def write_dev_certs(out: Path, dns: list[str] | tuple[str, ...]) -> str:
    """Write ``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key`` into ``out``; return the base64 caBundle."""
    out.mkdir(parents=True, exist_ok=True)
    ca, ca_key = make_ca()
    leaf = make_serving(ca, ca_key, dns)
    (out / "ca.crt").write_bytes(ca.cert_pem)
    (out / "ca.key").write_bytes(ca.key_pem)
    (out / "ca.key").chmod(0o600)
    (out / "tls.crt").write_bytes(leaf.cert_pem)
    (out / "tls.key").write_bytes(leaf.key_pem)
    (out / "tls.key").chmod(0o600)
    return base64.b64encode(ca.cert_pem).decode()
