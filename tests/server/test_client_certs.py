"""``webhook.certs.make_client``: a client certificate kube-apiserver reads as a user in groups."""

from __future__ import annotations

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.certs import make_ca, make_client


def test_the_user_is_the_common_name_and_the_groups_are_the_organizations() -> None:
    ca, ca_key = make_ca()
    pair = make_client(ca, ca_key, "admin", ["system:masters", "developers"])
    cert = x509.load_pem_x509_certificate(pair.cert_pem)

    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == ["admin"]
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:masters",
        "developers",
    ]
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem))
