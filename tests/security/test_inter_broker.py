"""A KRaft cluster secured end to end: the controller listener is SASL_SSL with PLAIN and mutual
TLS (raft between three controllers, brokers' registration/heartbeats/forwarded requests), the broker
listener SASL_SSL with SCRAM-SHA-512 for clients and for the brokers' own replica fetchers and
transaction channels (the credential bootstrapped with `kopfka storage format --add-scram`),
and the StandardAuthorizer on, with the brokers' identity a super user. Replication, produce
and consume work through all of it; a wrong inter-broker password is refused."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from certs import PASSWORD, CertificateAuthority

sys.path.insert(0, str(Path(__file__).parents[1] / "kraft"))

from cluster import Cluster, wait_until
from kopfka.client.admin import Admin
from kopfka.security.client import AuthenticationError, ClientSecurity

ADMIN = ("admin", "admin-pw")
HOSTS = ("127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.21", "127.0.0.22", "localhost")


@pytest.fixture(scope="module")
def secured_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    d = tmp_path_factory.mktemp("secured-kraft")
    ca = CertificateAuthority()
    keystore = ca.issue("kopfka-node", server=True, hosts=HOSTS).write_p12(d / "node.p12")
    ca_pem = ca.write_pem(d / "ca.pem")
    plain_jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{ADMIN[0]}" password="{ADMIN[1]}" user_{ADMIN[0]}="{ADMIN[1]}";'
    )
    scram_jaas = (
        f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{ADMIN[0]}" password="{ADMIN[1]}";'
    )
    props = {
        # listener names are the test harness's: PLAINTEXT is the brokers' (SASL_SSL) listener
        "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:SASL_SSL",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(keystore),
        "ssl.keystore.password": PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_pem),
        "listener.name.controller.ssl.client.auth": "required",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": plain_jaas,
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.plaintext.scram-sha-512.sasl.jaas.config": scram_jaas,
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{ADMIN[0]}",
        "offsets.topic.replication.factor": "2",
        "transaction.state.log.replication.factor": "2",
        "transaction.state.log.min.isr": "1",
    }
    cluster = Cluster(d, controllers=3, brokers=2, dynamic=False, props=props)
    for n in cluster.nodes:
        n.write_config(cluster.quorum_props())
        extra = ("--add-scram", f"SCRAM-SHA-512=[name={ADMIN[0]},password={ADMIN[1]}]")
        res = n.format(cluster.cluster_id, *extra)
        assert res.returncode == 0, res.stderr
    try:
        cluster.start(timeout=90)
        yield cluster, ca_pem
    finally:
        cluster.stop()


def security(ca_pem: Path, password: str = ADMIN[1]) -> ClientSecurity:
    props = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{ADMIN[0]}" password="{password}";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_pem),
    }
    return ClientSecurity.from_properties(props)


def test_replication_and_clients_over_secured_cluster(secured_cluster: tuple[Cluster, Path]) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    cluster, ca_pem = secured_cluster
    b0, b1 = cluster.brokers

    async def create_and_isr() -> list[int]:
        admin = await Admin.connect(b0.address, security=security(ca_pem))
        try:
            await admin.create_topic("secured-rf2", 1, 2)
            _, infos, _ = await admin.metadata(["secured-rf2"])
            return infos[0].partitions[0].isr
        finally:
            await admin.close()

    asyncio.run(create_and_isr())
    conf = {
        "bootstrap.servers": f"{b0.address},{b1.address}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": ADMIN[0],
        "sasl.password": ADMIN[1],
        "ssl.ca.location": str(ca_pem),
    }
    p = Producer({**conf, "acks": "all"})
    for i in range(200):
        p.produce("secured-rf2", b"%d" % i)
    assert p.flush(60) == 0

    async def isr() -> list[int]:
        admin = await Admin.connect(b1.address, security=security(ca_pem))
        try:
            _, infos, _ = await admin.metadata(["secured-rf2"])
            return sorted(infos[0].partitions[0].isr)
        finally:
            await admin.close()

    # the follower fetched over SASL_SSL/SCRAM and joined the ISR
    wait_until(lambda: asyncio.run(isr()) == [0, 1], 60, "both replicas in the ISR")
    c = Consumer({**conf, "group.id": "secured-g", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("secured-rf2", 0, 0)])
    got = []
    while len(got) < 200:
        m = c.poll(30)
        assert m is not None and m.error() is None, m and m.error()
        got.append(int(m.value()))
    c.close()
    assert got == list(range(200))
    for n in cluster.nodes:
        assert "Failed authentication" not in n.log_text(), n.log_text()[-3000:]


def test_wrong_password_refused_on_secured_cluster(secured_cluster: tuple[Cluster, Path]) -> None:
    cluster, ca_pem = secured_cluster

    async def attempt() -> None:
        admin = await Admin.connect(cluster.brokers[0].address, security=security(ca_pem, "wrong"))
        await admin.close()

    with pytest.raises(AuthenticationError, match="invalid credentials with SASL mechanism SCRAM-SHA-512"):
        asyncio.run(attempt())
    assert all(n.alive for n in cluster.nodes)


def test_controller_listener_wants_a_client_certificate(secured_cluster: tuple[Cluster, Path]) -> None:
    """listener.name.controller.ssl.client.auth=required on SASL_SSL (KIP-684): without a client
    certificate the TLS handshake is refused before SASL starts; the quorum is unharmed."""
    import socket
    import ssl

    cluster, ca_pem = secured_cluster
    c = cluster.controllers[0]
    ctx = ssl.create_default_context(cafile=str(ca_pem))
    with pytest.raises((ssl.SSLError, ConnectionError)):
        with (
            socket.create_connection((c.host, c.port), timeout=10) as raw,
            ctx.wrap_socket(raw, server_hostname=c.host) as s,
        ):
            s.sendall(b"\0\0\0\x0b\0\x12\0\0\0\0\0\x01\0\x01c")  # ApiVersions v0
            if not s.recv(4):
                raise ConnectionError("closed")
    assert all(n.alive for n in cluster.nodes)
