"""A test PKI (made at test time) and a kopfka with PLAINTEXT, SSL and mutual-TLS listeners."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kopfka_process import KopfkaProcess, free_port

sys.path.insert(0, str(Path(__file__).parent))

from certs import PASSWORD, CertificateAuthority, Issued


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
    proc = KopfkaProcess(
        tmp_path_factory.mktemp("tls") / "data", port=ports.plaintext, overrides=tls_overrides(pki, ports)
    ).start()
    try:
        yield proc, ports
    finally:
        proc.kill()


PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-pw" user_admin="admin-pw" user_alice="alice-pw";'
)
SCRAM_USERS = {"bob": "bob-pw", "carol": "carol-pw"}


@dataclass
class SaslPorts:
    plaintext: int
    sasl: int  # SASL_PLAINTEXT: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    sasl_ssl: int  # SASL_SSL: PLAIN, SCRAM-SHA-512
    reauth: int  # SASL_PLAINTEXT with connections.max.reauth.ms


REAUTH_MS = 1500


def sasl_overrides(pki: Pki, ports: SaslPorts, extra: dict[str, str] | None = None) -> dict[str, str]:
    listeners = (
        f"PLAINTEXT://127.0.0.1:{ports.plaintext},SASL_PLAINTEXT://127.0.0.1:{ports.sasl},"
        f"SASL_SSL://127.0.0.1:{ports.sasl_ssl},REAUTH://127.0.0.1:{ports.reauth},CONTROLLER://127.0.0.1:9093"
    )
    return {
        "listeners": listeners,
        "advertised.listeners": listeners.rsplit(",", 1)[0],
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
        "REAUTH:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.reauth.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(pki.server_p12),
        "ssl.keystore.password": PASSWORD,
        **(extra or {}),
    }


def add_scram_users(bootstrap: str, users: dict[str, str]) -> None:
    """Through `kopfka configs` as kafka-configs would, both mechanisms per user."""
    import subprocess

    for user, password in users.items():
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "kopfka.cli.main",
                "configs",
                "--bootstrap-server",
                bootstrap,
                "--entity-type",
                "users",
                "--entity-name",
                user,
                "--alter",
                "--add-config",
                f"SCRAM-SHA-512=[iterations=8192,password={password}],SCRAM-SHA-256=[password={password}]",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr


@pytest.fixture(scope="module")
def sasl_broker(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KopfkaProcess, SaslPorts]]:
    ports = SaslPorts(free_port(), free_port(), free_port(), free_port())
    proc = KopfkaProcess(
        tmp_path_factory.mktemp("sasl") / "data", port=ports.plaintext, overrides=sasl_overrides(pki, ports)
    ).start()
    try:
        add_scram_users(proc.bootstrap, SCRAM_USERS)
        yield proc, ports
    finally:
        proc.kill()
