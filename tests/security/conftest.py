"""A test PKI (made at test time) and a kopfka with PLAINTEXT, SSL and mutual-TLS listeners."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kopfka_process import KopfkaProcess, free_port

sys.path.insert(0, str(Path(__file__).parent))

from certs import PASSWORD, CertificateAuthority, Issued  # noqa: E402


@dataclass
class Pki:
    dir: Path
    ca: CertificateAuthority
    ca_pem: Path
    server: Issued
    server_pem: Path  # key + chain, PEM keystore file
    server_p12: Path
    truststore_p12: Path
    alice: Issued  # client certificates signed by the CA
    alice_cert: Path
    alice_key: Path

    def client_files(self, issued: Issued, name: str) -> tuple[str, str]:
        cert, key = self.dir / f"{name}.crt", self.dir / f"{name}.key"
        cert.write_bytes(issued.chain_pem())
        key.write_bytes(issued.key_pem())
        return str(cert), str(key)


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority()
    server = ca.issue("broker", server=True)
    alice = ca.issue("alice", ou="eng")
    pki = Pki(
        d,
        ca,
        ca.write_pem(d / "ca.pem"),
        server,
        server.write_pem(d / "server.pem", key_password="keypass"),
        server.write_p12(d / "server.p12"),
        ca.write_p12_truststore(d / "truststore.p12"),
        alice,
        Path(),
        Path(),
    )
    cert, key = pki.client_files(alice, "alice")
    pki.alice_cert, pki.alice_key = Path(cert), Path(key)
    return pki


@dataclass
class Ports:
    plaintext: int
    ssl: int
    mtls: int


def tls_overrides(pki: Pki, ports: Ports, extra: dict[str, str] | None = None) -> dict[str, str]:
    """SSL: a PEM keystore file with an encrypted key, no client auth. MTLS: PKCS12 keystore and
    truststore, ssl.client.auth=required, all set as listener.name.mtls.* overrides."""
    listeners = (
        f"PLAINTEXT://127.0.0.1:{ports.plaintext},SSL://127.0.0.1:{ports.ssl},MTLS://127.0.0.1:{ports.mtls},"
        "CONTROLLER://127.0.0.1:9093"
    )
    return {
        "listeners": listeners,
        "advertised.listeners": listeners.rsplit(",", 1)[0],
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server_pem),
        "ssl.key.password": "keypass",
        "listener.name.mtls.ssl.keystore.type": "PKCS12",
        "listener.name.mtls.ssl.keystore.location": str(pki.server_p12),
        "listener.name.mtls.ssl.keystore.password": PASSWORD,
        "listener.name.mtls.ssl.key.password": PASSWORD,
        "listener.name.mtls.ssl.truststore.type": "PKCS12",
        "listener.name.mtls.ssl.truststore.location": str(pki.truststore_p12),
        "listener.name.mtls.ssl.truststore.password": PASSWORD,
        "listener.name.mtls.ssl.client.auth": "required",
        **(extra or {}),
    }


@pytest.fixture(scope="module")
def tls_broker(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KopfkaProcess, Ports]]:
    ports = Ports(free_port(), free_port(), free_port())
    proc = KopfkaProcess(tmp_path_factory.mktemp("tls") / "data", port=ports.plaintext,
                         overrides=tls_overrides(pki, ports)).start()
    try:
        yield proc, ports
    finally:
        proc.kill()
