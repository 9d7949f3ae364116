"""Kafka's own Java tools and clients against a secured kopfka: SASL_SSL with SCRAM-SHA-512 (the
Java SCRAM client and TLS stack against kopfka's), kafka-configs managing SCRAM credentials,
kafka-acls managing ACLs under the StandardAuthorizer, and the console clients refused and then
allowed by those ACLs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka_ref import run_tool
from kopfka_process import KopfkaProcess, free_port, sasl_controller_listener
from security.certs import PASSWORD, CertificateAuthority

ADMIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-pw" user_admin="admin-pw";'
)


@dataclass
class Secured:
    proc: KopfkaProcess
    bootstrap: str
    dir: Path
    truststore: Path

    def client_props(self, name: str, mechanism: str, user: str, password: str) -> Path:
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        path = self.dir / f"{name}.properties"
        path.write_text(
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={mechanism}\n"
            f"sasl.jaas.config=org.apache.kafka.common.security.{module} required "
            f'username="{user}" password="{password}";\n'
            "ssl.truststore.type=PKCS12\n"
            f"ssl.truststore.location={self.truststore}\n"
            f"ssl.truststore.password={PASSWORD}\n"
        )
        return path


@pytest.fixture(scope="module")
def secured(kafka_libs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    d = tmp_path_factory.mktemp("secured")
    ca = CertificateAuthority()
    keystore = ca.issue("broker", server=True).write_p12(d / "broker.p12")
    truststore = ca.write_p12_truststore(d / "truststore.p12")
    plain, secure = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},SECURE://127.0.0.1:{secure},CONTROLLER://127.0.0.1:9093"
    proc = KopfkaProcess(
        d / "data",
        port=plain,
        overrides={
            "listeners": listeners,
            "advertised.listeners": listeners.rsplit(",", 1)[0],
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL,CONTROLLER:SASL_PLAINTEXT",
            **sasl_controller_listener("admin", "admin-pw"),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.secure.plain.sasl.jaas.config": ADMIN_JAAS,
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(keystore),
            "ssl.keystore.password": PASSWORD,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "group.initial.rebalance.delay.ms": "0",
        },
    ).start()
    try:
        yield Secured(proc, f"127.0.0.1:{secure}", d, truststore)
    finally:
        proc.kill()


def tool(s: Secured, props: Path, name: str, *args: str, **kw: object) -> object:
    return run_tool(name, "--bootstrap-server", s.bootstrap, "--command-config", str(props), *args, **kw)  # type: ignore[arg-type]


def test_java_tools_and_clients_on_sasl_ssl_with_acls(secured: Secured) -> None:
    admin = secured.client_props("admin", "PLAIN", "admin", "admin-pw")
    user = ("--entity-type", "users", "--entity-name", "alice")
    out = tool(secured, admin, "kafka-configs", *user, "--alter", "--add-config", "SCRAM-SHA-512=[password=alice-pw]")
    assert "Completed updating config for user alice." in out.stdout  # type: ignore[attr-defined]
    out = tool(secured, admin, "kafka-configs", *user, "--describe")
    assert "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=4096" in out.stdout  # type: ignore[attr-defined]
    tool(secured, admin, "kafka-topics", "--create", "--topic", "java-sec", "--partitions", "1")

    alice = secured.client_props("alice", "SCRAM-SHA-512", "alice", "alice-pw")
    producer = ("kafka-console-producer", "--topic", "java-sec", "--producer.config", str(alice))
    refused = run_tool(*producer, "--bootstrap-server", secured.bootstrap, input="a\n", check=False, timeout=60)
    assert "TopicAuthorizationException" in refused.stdout + refused.stderr or "Not authorized" in (
        refused.stdout + refused.stderr
    ), refused.stderr[-2000:]

    acl = ("--allow-principal", "User:alice", "--topic", "java-sec", "--group", "java-sec-g")
    tool(secured, admin, "kafka-acls", "--add", "--producer", *acl[:4])
    tool(secured, admin, "kafka-acls", "--add", "--consumer", *acl)
    listed = tool(secured, admin, "kafka-acls", "--list", "--topic", "java-sec").stdout  # type: ignore[attr-defined]
    for op in ("WRITE", "CREATE", "DESCRIBE", "READ"):
        assert f"(principal=User:alice, host=*, operation={op}, permissionType=ALLOW)" in listed, listed
    run_tool(*producer, "--bootstrap-server", secured.bootstrap, input="m0\nm1\nm2\n", timeout=60)
    consumed = run_tool(
        "kafka-console-consumer",
        "--bootstrap-server",
        secured.bootstrap,
        "--consumer.config",
        str(alice),
        "--topic",
        "java-sec",
        "--group",
        "java-sec-g",
        "--from-beginning",
        "--max-messages",
        "3",
        timeout=90,
    )
    got = [ln for ln in consumed.stdout.split("\n") if ln.startswith("m")]  # past a deprecation notice
    assert got == ["m0", "m1", "m2"], consumed.stdout

    tool(
        secured,
        admin,
        "kafka-acls",
        "--remove",
        "--force",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--topic",
        "java-sec",
    )
    assert (
        "operation=READ"
        not in tool(  # type: ignore[attr-defined]
            secured, admin, "kafka-acls", "--list", "--topic", "java-sec"
        ).stdout
    )

    wrong = secured.client_props("wrong", "SCRAM-SHA-512", "alice", "not-hers")
    bad = run_tool(
        "kafka-topics",
        "--bootstrap-server",
        secured.bootstrap,
        "--command-config",
        str(wrong),
        "--list",
        check=False,
        timeout=60,
    )
    assert bad.returncode != 0
    assert (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism "
        "SCRAM-SHA-512" in bad.stdout + bad.stderr
    )
    assert secured.proc.alive
