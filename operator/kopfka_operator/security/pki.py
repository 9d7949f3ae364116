"""Certificates with `cryptography`: self-signed CAs, leaf certificates they sign, PEM in and
out, and when a certificate must be issued again. Pure functions (the clock is an argument), so
the renewal decisions are tested without waiting for time to pass.

Keys are ECDSA P-256: as strong as RSA-3072 for TLS, generated in a millisecond (an RSA-4096 CA
key takes seconds of a shared CPU), and understood by every Kafka client.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ORGANIZATION = "kopfka.io"
# Backdating absorbs clock skew between the operator and the nodes checking the certificate.
BACKDATE = datetime.timedelta(minutes=5)
# A certificate expiring this close to its CA lives as long as it can.
CAP_SLACK = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class KeyPair:
    cert: x509.Certificate
    key: CertificateIssuerPrivateKeyTypes  # ours are ECDSA; a user-provided CA may be RSA

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def keystore_pem(self) -> bytes:
        """Key and certificate in one file: a Kafka PEM keystore (`ssl.keystore.type=PEM`)."""
        return self.key_pem() + self.cert_pem()


def name(common_name: str, organization: str | None = ORGANIZATION) -> x509.Name:
    """O before CN, so the RFC 2253 form (the Kafka principal) reads `CN=...,O=...`."""
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)] if organization else []
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def principal_of(subject: x509.Name) -> str:
    """The Kafka principal a certificate with this subject gets without mapping rules."""
    return f"User:{subject.rfc4514_string()}"


def new_ca(common_name: str, validity_days: int, now: datetime.datetime) -> KeyPair:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=validity_days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert, key)


def issue(
    ca: KeyPair,
    subject: x509.Name,
    validity_days: int,
    now: datetime.datetime,
    hosts: Iterable[str] = (),
) -> KeyPair:
    """A leaf certificate for TLS servers and clients alike (nodes are both to each other), never
    valid beyond its CA. `hosts` become DNS or IP subject alternative names."""
    key = ec.generate_private_key(ec.SECP256R1())
    not_after = min(now + datetime.timedelta(days=validity_days), ca.cert.not_valid_after_utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, True, False, True, False, False, False, False),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )
    sans = _general_names(hosts)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return KeyPair(builder.sign(ca.key, hashes.SHA256()), key)


def _general_names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for host in hosts:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            out.append(x509.DNSName(host))
    return out


def sans_of(cert: x509.Certificate) -> frozenset[str]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return frozenset()
    return frozenset(
        [*ext.get_values_for_type(x509.DNSName), *(str(ip) for ip in ext.get_values_for_type(x509.IPAddress))]
    )


def load(cert_pem: bytes, key_pem: bytes) -> KeyPair:
    """ValueError when either is unreadable or the key is not the certificate's."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    key = serialization.load_pem_private_key(key_pem, None)
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError(f"unsupported key type {type(key).__name__} (use ECDSA or RSA)")
    if key.public_key() != cert.public_key():
        raise ValueError("the private key does not belong to the certificate")
    return KeyPair(cert, key)


def load_keystore(pem: bytes) -> KeyPair:
    """A PEM keystore as `KeyPair.keystore_pem` wrote it."""
    marker = b"-----BEGIN CERTIFICATE-----"
    at = pem.find(marker)
    if at < 0:
        raise ValueError("no certificate in the keystore")
    return load(pem[at:], pem[:at])


def fingerprint(cert: x509.Certificate) -> str:
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


def renewal_reason(
    cert: x509.Certificate,
    now: datetime.datetime,
    renewal_days: int,
    issuer: x509.Certificate | None = None,
    subject: x509.Name | None = None,
    hosts: Iterable[str] | None = None,
) -> str | None:
    """Why `cert` must be issued again, or None: it expires within `renewal_days` (or has),
    another CA signs now, or its subject or names are no longer the ones wanted. A certificate
    that already lives as long as its `issuer` is not renewed for its window: a new one could not
    live longer (certificates are capped at their CA's expiry), so it would be issued again and
    again; the CA's own renewal is due then."""
    expires = cert.not_valid_after_utc
    if expires <= now:
        return f"expired at {expires:%Y-%m-%dT%H:%M:%SZ}"
    capped = issuer is not None and expires >= issuer.not_valid_after_utc - CAP_SLACK
    if expires - now <= datetime.timedelta(days=renewal_days) and not capped:
        return f"expires at {expires:%Y-%m-%dT%H:%M:%SZ}, within the {renewal_days}-day renewal window"
    if issuer is not None:
        if cert.issuer != issuer.subject:
            return "signed by another CA"
        try:
            cert.verify_directly_issued_by(issuer)
        except (InvalidSignature, ValueError, TypeError):
            return "signed by another CA"
    if subject is not None and cert.subject != subject:
        return f"subject {cert.subject.rfc4514_string()} is not {subject.rfc4514_string()}"
    if hosts is not None and sans_of(cert) != frozenset(hosts):
        return "its subject alternative names changed"
    return None
