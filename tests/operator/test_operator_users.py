"""User resources reconciled by a real kopf operator (kmock API) into a real kopfka node started
from the operator's rendered secured config (TLS + SCRAM + mutual TLS + StandardAuthorizer).
The operator connects as itself: its certificate from the `demo-operator-certs` Secret it
issued, on the REPLICATION listener. A SCRAM user it creates authenticates with confluent-kafka
and is refused what its ACLs do not allow; a tls user's certificate maps to its principal; an
ACL edit, drift, and deletion touch exactly the ACLs the User owns."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest
from kopfka.client.acls import create_acls, delete_acls, describe_acls
from kopfka.client.admin import Admin
from kopfka.client.user_scram import alter_user_scram_credentials, describe_user_scram_credentials
from kopfka.security.acls import AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType
from kopfka.security.acls import StandardAcl as Acl
from kopfka_operator.kube import KubeApi
from kopfka_operator.manifests import Cluster
from kopfka_operator.resource_handlers import ResourceConfig
from kopfka_operator.security import certificates, pki
from kopfka_operator.security.credentials import OperatorCredentials
from kopfka_operator.spec import parse_spec
from operator_testlib import eventually
from resources_testlib import condition_is, events_with_reason
from resources_testlib import running_operator as resources_running_operator
from security_testlib import CLUSTER, NS, SECURED_SPEC, SecuredNode, start_secured_node

pytestmark = pytest.mark.timeout(180)
NOW = datetime.datetime.now(datetime.UTC)


@pytest.fixture(scope="module")
def cas() -> tuple[pki.KeyPair, pki.KeyPair]:
    return pki.new_ca("demo-cluster-ca", 365, NOW), pki.new_ca("demo-clients-ca", 365, NOW)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, cas: tuple[pki.KeyPair, pki.KeyPair]) -> Iterator[SecuredNode]:
    started = start_secured_node(tmp_path_factory.mktemp("secured"), *cas)
    try:
        yield started
    finally:
        started.stop()


def _secret(name: str, data: dict[str, bytes]) -> dict[str, Any]:
    encoded = {k: base64.b64encode(v).decode() for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS}, "data": encoded}


@pytest.fixture
async def api(k8s: Any, cas: tuple[pki.KeyPair, pki.KeyPair]) -> AsyncIterator[KubeApi]:
    """The secured KafkaCluster `demo` and its Secrets as the operator keeps them: the CAs the
    node trusts, and everything the operator issues from them (its own certificate included)."""
    client = KubeApi(kopf.ConnectionInfo(server=k8s.server_url))
    body = {"apiVersion": "kopfka.io/v1alpha1", "kind": "KafkaCluster", "metadata": {"name": CLUSTER, "namespace": NS}}
    await client.create(NS, {**body, "spec": SECURED_SPEC})
    for which, ca in zip(("cluster", "clients"), cas, strict=True):
        await client.create(NS, _secret(f"demo-{which}-ca", {"ca.crt": ca.cert_pem(), "ca.key": ca.key_pem()}))
    cluster = Cluster(CLUSTER, NS, "uid", "cid", "", parse_spec(SECURED_SPEC))
    await certificates.ensure_certificates(client, cluster, {"combined": 1})
    try:
        yield client
    finally:
        await client.close()


def running_operator(server_url: str, node: SecuredNode) -> Any:
    """Topic/Quota/User handlers reaching the node's REPLICATION listener as the operator."""
    config = ResourceConfig(resync_seconds=1, bootstrap=lambda body: node.address("REPLICATION"))
    return resources_running_operator(server_url, config, credentials=True)


@contextlib.asynccontextmanager
async def operator_admin(api: KubeApi, node: SecuredNode) -> AsyncIterator[Admin]:
    """An admin connection as the operator (super user), for the test's own checks."""
    security = await OperatorCredentials().get(api, NS, CLUSTER)
    admin = await Admin.connect(node.address("REPLICATION"), security)
    try:
        yield admin
    finally:
        await admin.close()


def user_obj(name: str, auth: str | None, acls: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = {"authorization": {"type": "simple", "acls": acls}}
    if auth:
        spec["authentication"] = {"type": auth}
    meta = {"name": name, "namespace": NS, "labels": {"kopfka.io/cluster": CLUSTER}}
    return {"apiVersion": "kopfka.io/v1alpha1", "kind": "User", "metadata": meta, "spec": spec}


async def ready(api: KubeApi, name: str) -> dict[str, Any]:
    return dict(await eventually(lambda: condition_is(api, "User", name, "Ready", "True"), timeout=30))


async def secret_of(api: KubeApi, name: str) -> dict[str, bytes]:
    return certificates.decode(await api.get("Secret", NS, name))


def produce(node: SecuredNode, conf: dict[str, str], topic: str) -> str | None:
    """One record with confluent-kafka over the CLIENT listener; the delivery error, if any."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": node.address("CLIENT"), "message.timeout.ms": 10000, **conf})
    errors: list[Any] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(20)
    return str(errors[0]) if errors and errors[0] is not None else (None if errors else "not delivered")


def alice_acls(ops: list[str]) -> list[dict[str, Any]]:
    return [{"resource": {"type": "topic", "name": "orders", "patternType": "prefix"}, "operations": ops}]


async def principal_acls(api: KubeApi, node: SecuredNode, principal: str) -> set[Acl]:
    async with operator_admin(api, node) as admin:
        return set(await describe_acls(admin, AclBindingFilter(principal=principal)))


async def test_scram_user_authenticates_and_is_held_to_its_acls(
    k8s: Any, api: KubeApi, node: SecuredNode, tmp_path: Path
) -> None:
    async with operator_admin(api, node) as admin:
        for topic in ("orders-1", "payments"):
            await admin.create_topic(topic, 1, 1)
        # an ACL of alice's made by someone else: never the operator's to delete
        foreign = Acl(
            ResourceType.GROUP,
            "app",
            PatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        await create_acls(admin, [foreign])

    async with running_operator(k8s.server_url, node):
        await api.create(NS, user_obj("alice", "scram-sha-512", alice_acls(["Write", "Describe"])))
        status = (await ready(api, "alice"))["status"]
        assert status["principal"] == "User:alice" and status["secret"] == "alice"
        assert len(status["acls"]) == 2
        data = await secret_of(api, "alice")
        assert data["ca.crt"] == (await secret_of(api, "demo-cluster-ca-cert"))["ca.crt"]
        assert f'username="alice" password="{data["password"].decode()}"' in data["sasl.jaas.config"].decode()
        ca = tmp_path / "ca.crt"
        ca.write_bytes(data["ca.crt"])
        conf = {
            "security.protocol": "sasl_ssl",
            "ssl.ca.location": str(ca),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": data["password"].decode(),
        }
        assert await asyncio.to_thread(produce, node, conf, "orders-1") is None
        denied = await asyncio.to_thread(produce, node, conf, "payments")
        assert denied is not None and "TOPIC_AUTHORIZATION_FAILED" in denied

        # the spec drops Describe: exactly that ACL goes; the foreign one stays
        await api.patch("User", NS, "alice", {"spec": {"authorization": {"acls": alice_acls(["Write"])}}})
        await eventually(lambda: condition_is(api, "User", "alice", "Ready", "True"), timeout=30)

        async def only_write() -> bool:  # the broker answers once the deletion's metadata reached it
            ops = {a.operation for a in await principal_acls(api, node, "User:alice") if a.resource_type == 2}
            return ops == {AclOperation.WRITE}

        await eventually(only_write, timeout=30, interval=0.5)
        assert foreign in await principal_acls(api, node, "User:alice")

        # drift: the Write ACL deleted behind the operator's back is put back by the resync
        async with operator_admin(api, node) as admin:
            await delete_acls(
                admin, [AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.PREFIXED, "User:alice")]
            )

        async def write_back() -> bool:
            return any(a.operation == AclOperation.WRITE for a in await principal_acls(api, node, "User:alice"))

        await eventually(write_back, timeout=30, interval=0.5)
        assert await events_with_reason(api, "alice", "Drift")
        # and so is a deleted credential (with the password of the Secret: alice logs in again)
        async with operator_admin(api, node) as admin:
            await alter_user_scram_credentials(admin, delete=[("alice", "SCRAM-SHA-512")])

        async def credential_back() -> bool:
            async with operator_admin(api, node) as admin:
                return bool((await describe_user_scram_credentials(admin, ["alice"]))["alice"])

        await eventually(credential_back, timeout=30, interval=0.5)
        assert await asyncio.to_thread(produce, node, conf, "orders-1") is None

        # deleting the User: its credential and its ACLs go, the foreign ACL stays
        await api.delete("User", NS, "alice")
        await eventually(lambda: _gone(api, "alice"), timeout=30)
    async with operator_admin(api, node) as admin:
        assert (await describe_user_scram_credentials(admin, ["alice"]))["alice"] == []
    assert await principal_acls(api, node, "User:alice") == {foreign}
    assert await asyncio.to_thread(produce, node, conf, "orders-1") is not None  # can no longer log in


async def _gone(api: KubeApi, name: str) -> bool:
    return await api.get("User", NS, name) is None


async def test_tls_user_certificate_is_its_principal(k8s: Any, api: KubeApi, node: SecuredNode, tmp_path: Path) -> None:
    """bob's certificate (clients CA, CN=bob) on the mutual-TLS listener is User:bob: the
    metadata he gets shows the one topic his ACL lets him describe."""
    from confluent_kafka.admin import AdminClient

    async with operator_admin(api, node) as admin:
        for topic in ("bob-topic", "hidden-topic"):
            await admin.create_topic(topic, 1, 1)
    acls = [{"resource": {"type": "topic", "name": "bob-topic"}, "operations": ["Describe"]}]
    async with running_operator(k8s.server_url, node):
        await api.create(NS, user_obj("bob", "tls", acls))
        status = (await ready(api, "bob"))["status"]
        assert status["certificateNotAfter"]
    data = await secret_of(api, "bob")
    cert = pki.load(data["user.crt"], data["user.key"]).cert
    assert cert.subject.rfc4514_string() == "CN=bob"
    for name in ("ca.crt", "user.crt", "user.key"):
        (tmp_path / name).write_bytes(data[name])
    client = AdminClient(
        {
            "bootstrap.servers": node.address("MTLS"),
            "security.protocol": "ssl",
            "ssl.ca.location": str(tmp_path / "ca.crt"),
            "ssl.certificate.location": str(tmp_path / "user.crt"),
            "ssl.key.location": str(tmp_path / "user.key"),
        }
    )
    topics = await asyncio.to_thread(lambda: set(client.list_topics(timeout=20).topics))
    assert topics == {"bob-topic"}
