"""Test PKI made at test time with `cryptography`: a CA, server and client certificates
(valid, expired, or from an unknown CA), written as PEM and PKCS12 files. No key is checked in."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PASSWORD = "changeit"


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COUNTRY_NAME, "US"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kopfka")]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


@dataclass
class Issued:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    chain: list[x509.Certificate]

    def key_pem(self, password: str | None = None) -> bytes:
        enc = serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)

    def chain_pem(self) -> bytes:
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [self.cert, *self.chain])

    def write_pem(self, path: Path, key_password: str | None = None) -> Path:
        """One PEM file holding the key and the chain (Kafka's PEM keystore file)."""
        path.write_bytes(self.key_pem(key_password) + self.chain_pem())
        return path

    def write_p12(self, path: Path, password: str = PASSWORD) -> Path:
        path.write_bytes(
            pkcs12.serialize_key_and_certificates(
                b"kopfka", self.key, self.cert, self.chain, serialization.BestAvailableEncryption(password.encode())
            )
        )
        return path


class CertificateAuthority:
    def __init__(self, cn: str = "kopfka-test-ca") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(_name(cn))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def write_pem(self, path: Path) -> Path:
        path.write_bytes(self.pem())
        return path

    def write_p12_truststore(self, path: Path, password: str = PASSWORD) -> Path:
        path.write_bytes(
            pkcs12.serialize_java_truststore(
                [pkcs12.PKCS12Certificate(self.cert, b"ca")], serialization.BestAvailableEncryption(password.encode())
            )
        )
        return path

    def issue(
        self,
        cn: str,
        *,
        ou: str | None = None,
        server: bool = False,
        expired: bool = False,
        hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start, end = (
            (now - datetime.timedelta(days=10), now - datetime.timedelta(days=1))
            if expired
            else (
                now - datetime.timedelta(hours=1),
                now + datetime.timedelta(days=10),
            )
        )
        b = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, ou))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        )
        if server:
            sans: list[x509.GeneralName] = []
            for h in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(h)))
                except ValueError:
                    sans.append(x509.DNSName(h))
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return Issued(key, b.sign(self.key, hashes.SHA256()), [])
