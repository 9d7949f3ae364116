"""Certificates, the service-account key pair and kubeconfigs, generated fresh at every `up`.

One CA signs everything, as kubeadm's does; identities follow Kubernetes' conventions
(system:kube-controller-manager, system:node:<name> in system:nodes, ...), so the API server's
Node and RBAC authorizers treat each component as on a real cluster.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=30)


@dataclass(frozen=True)
class Identity:
    file: str
    common_name: str
    organizations: tuple[str, ...] = ()
    server_names: tuple[str, ...] = ()  # DNS names and IPs: makes it a serving certificate
    client: bool = True


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


class Authority:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key = _key()
        now = datetime.datetime.now(datetime.UTC)
        subject = _name("kopfka-testbed-ca")
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
            .sign(self.key, hashes.SHA256())
        )
        self.cert_path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        (self.dir / "ca.key").write_bytes(_pem_key(self.key))
        (self.dir / "ca.key").chmod(0o600)

    @property
    def cert_path(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def key_path(self) -> Path:
        return self.dir / "ca.key"

    def issue(self, ident: Identity) -> tuple[Path, Path]:
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        usages = []
        if ident.client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        if ident.server_names:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(ident.common_name, ident.organizations))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if ident.server_names:
            alt: list[x509.GeneralName] = []
            for name in ident.server_names:
                try:
                    alt.append(x509.IPAddress(ipaddress.ip_address(name)))
                except ValueError:
                    alt.append(x509.DNSName(name))
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        crt, keyfile = self.dir / f"{ident.file}.crt", self.dir / f"{ident.file}.key"
        crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        keyfile.write_bytes(_pem_key(key))
        keyfile.chmod(0o600)
        return crt, keyfile


def service_account_keys(directory: Path) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private, public = directory / "sa.key", directory / "sa.pub"
    private.write_bytes(_pem_key(key))
    private.chmod(0o600)
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return private, public


def write_kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path, user: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kopfka-testbed", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": "kopfka-testbed", "context": {"cluster": "kopfka-testbed", "user": user}}],
        "current-context": "kopfka-testbed",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path
