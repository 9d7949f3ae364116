"""TLS listeners: all four clients over SSL (server authentication) and mutual TLS; the broker
refuses clients without a certificate, with an expired one or one from an unknown CA, and
plaintext bytes on a TLS port, without crashing or hanging; fetches over TLS (no sendfile)
return the same bytes as over plaintext."""

from __future__ import annotations

import shutil
import socket
import ssl
import struct
import time

import pytest
from certs import CertificateAuthority
from clients import CLIENTS, Security, roundtrip, values
from conftest import Pki, Ports
from kopfka_process import KopfkaProcess


def _client(client: str) -> None:
    if client == "kcat" and shutil.which("kcat") is None:
        pytest.skip("kcat not installed")


@pytest.mark.parametrize("client", CLIENTS)
def test_ssl_roundtrip(client: str, tls_broker: tuple[KopfkaProcess, Ports], pki: Pki) -> None:
    """Server-authenticated TLS with hostname verification; ≥ 64 KiB fetches take the TLS write path."""
    _client(client)
    _proc, ports = tls_broker
    roundtrip(client, f"127.0.0.1:{ports.ssl}", f"ssl-{client}", Security("SSL", ca=str(pki.ca_pem)))


@pytest.mark.parametrize("client", CLIENTS)
def test_mtls_roundtrip(client: str, tls_broker: tuple[KopfkaProcess, Ports], pki: Pki) -> None:
    _client(client)
    _proc, ports = tls_broker
    sec = Security("SSL", ca=str(pki.ca_pem), cert=str(pki.alice_cert), key=str(pki.alice_key))
    roundtrip(client, f"127.0.0.1:{ports.mtls}", f"mtls-{client}", sec)


def _handshake(port: int, ctx: ssl.SSLContext) -> None:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s,
    ):
        # TLS 1.3: the server checks the client certificate after the client's handshake ends;
        # a refusal shows as an alert on the first read
        s.sendall(_api_versions_request())
        data = s.recv(4)
        if not data:
            raise ConnectionError("closed by the broker")


def _api_versions_request(corr: int = 7) -> bytes:
    body = struct.pack(">hhih", 18, 0, corr, 4) + b"test"
    return struct.pack(">i", len(body)) + body


def _client_ctx(pki: Pki, cert: tuple[str, str] | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca_pem))
    if cert is not None:
        ctx.load_cert_chain(*cert)
    return ctx


@pytest.mark.parametrize("case", ["no-certificate", "expired", "unknown-ca"])
def test_mtls_refuses_bad_client_certificates(case: str, tls_broker: tuple[KopfkaProcess, Ports], pki: Pki) -> None:
    proc, ports = tls_broker
    if case == "no-certificate":
        cert = None
    elif case == "expired":
        cert = pki.client_files(pki.ca.issue("old", expired=True), "expired")
    else:
        cert = pki.client_files(CertificateAuthority("rogue-ca").issue("mallory"), "rogue")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _handshake(ports.mtls, _client_ctx(pki, cert))
    # the broker is unharmed: a good client still gets through at once
    _handshake(ports.mtls, _client_ctx(pki, (str(pki.alice_cert), str(pki.alice_key))))
    assert proc.alive


def test_client_refuses_unknown_broker_certificate(tls_broker: tuple[KopfkaProcess, Ports], tmp_path) -> None:
    """A client trusting another CA does not talk to the broker (server authentication works)."""
    _proc, ports = tls_broker
    other = CertificateAuthority("other").write_pem(tmp_path / "other.pem")
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(ports.ssl, ssl.create_default_context(cafile=str(other)))


def test_plaintext_on_tls_port_is_refused_without_harm(tls_broker: tuple[KopfkaProcess, Ports], pki: Pki) -> None:
    """A plaintext Kafka request, garbage, and a silent half-open connection on the TLS port:
    each is dropped (or left waiting alone) while TLS clients keep working."""
    proc, ports = tls_broker
    silent = socket.create_connection(("127.0.0.1", ports.ssl), timeout=5)  # never speaks
    try:
        for payload in (_api_versions_request(), b"\x16\x03\x01\x00\x05hello" + bytes(range(256)), b"\0" * 100_000):
            with socket.create_connection(("127.0.0.1", ports.ssl), timeout=10) as s:
                t0 = time.monotonic()
                try:
                    s.sendall(payload)
                    while s.recv(65536):  # an alert may come back; then the broker closes
                        pass
                except ConnectionResetError:
                    pass
                assert time.monotonic() - t0 < 5, "the broker kept a garbage TLS connection open"
        _handshake(ports.ssl, _client_ctx(pki, None))
        roundtrip("confluent", f"127.0.0.1:{ports.ssl}", "after-garbage", Security("SSL", ca=str(pki.ca_pem)), n=5)
        assert proc.alive
    finally:
        silent.close()


def test_tls_and_plaintext_fetch_same_bytes(tls_broker: tuple[KopfkaProcess, Ports], pki: Pki) -> None:
    """Records written over plaintext read back identically over TLS (no sendfile) and plaintext
    (sendfile), in fetches far larger than the 1 MiB TLS write piece."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    _proc, ports = tls_broker
    topic = "tls-vs-plain"
    sent = values(60, big_every=2)  # ~3 MB
    p = Producer({"bootstrap.servers": f"127.0.0.1:{ports.plaintext}", "message.max.bytes": 2_000_000})
    for v in sent:
        p.produce(topic, v)
    assert p.flush(30) == 0
    for port, sec in ((ports.plaintext, Security()), (ports.ssl, Security("SSL", ca=str(pki.ca_pem)))):
        c = Consumer(
            {
                "bootstrap.servers": f"127.0.0.1:{port}",
                "group.id": "x",
                "fetch.max.bytes": 50_000_000,
                "max.partition.fetch.bytes": 50_000_000,
                **sec.librdkafka(),
            }
        )
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            got = []
            while len(got) < len(sent):
                m = c.poll(30)
                assert m is not None and m.error() is None
                got.append(m.value())
        finally:
            c.close()
        assert got == sent


def test_pem_files_from_a_mounted_secret_directory(pki: Pki, tmp_path) -> None:
    """The operator's hook: a Kubernetes TLS Secret mounted as tls.crt / tls.key / ca.crt, read
    through Kafka's DirectoryConfigProvider into PEM keystore and truststore values."""
    from kopfka_process import free_port

    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "tls.crt").write_bytes(pki.server.chain_pem())
    (secret / "tls.key").write_bytes(pki.server.key_pem())
    (secret / "ca.crt").write_bytes(pki.ca.pem())
    plain, tls = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls},CONTROLLER://127.0.0.1:9093"
    proc = KopfkaProcess(
        tmp_path / "data",
        port=plain,
        overrides={
            "listeners": listeners,
            "advertised.listeners": listeners.rsplit(",", 1)[0],
            "config.providers": "secret",
            "config.providers.secret.class": "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
            "config.providers.secret.param.allowed.paths": str(secret),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": f"${{secret:{secret}:tls.crt}}",
            "ssl.keystore.key": f"${{secret:{secret}:tls.key}}",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": f"${{secret:{secret}:ca.crt}}",
            "ssl.client.auth": "required",
        },
    ).start()
    try:
        sec = Security("SSL", ca=str(pki.ca_pem), cert=str(pki.alice_cert), key=str(pki.alice_key))
        roundtrip("confluent", f"127.0.0.1:{tls}", "from-secret", sec, n=3)
        assert "was supplied but isn't a known config" not in proc.log_text()
    finally:
        proc.kill()
