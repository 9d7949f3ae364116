"""A secured KafkaCluster: the server.properties keys the operator renders (and a real node
started from them), the CAs and certificates it keeps in Secrets, and when it issues them again
(renewal window, another CA, changed names), so that a renewal rolls the pods and a scale-up
does not."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kopf
import pytest
from cryptography import x509
from kopfka.client.admin import Admin
from kopfka.client.connection import KafkaConnection
from kopfka.security.client import ClientSecurity
from kopfka_operator.kube import KubeApi
from kopfka_operator.manifests import Cluster, build_children, server_properties
from kopfka_operator.manifests.statefulset import CERTS_VERSION_ANNOTATION, pod_hash, stateful_set
from kopfka_operator.naming import cert_principal, node_common_name, operator_common_name
from kopfka_operator.reconcile import reconcile
from kopfka_operator.security import certificates, credentials, pki
from kopfka_operator.spec import SpecError, parse_spec
from operator_testlib import Emulator, run_script
from security_testlib import CLUSTER, NS, SECURED_SPEC, parse_properties, start_secured_node

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)


def secured_cluster(**changes: Any) -> Cluster:
    spec = parse_spec({**SECURED_SPEC, **changes})
    return Cluster(CLUSTER, NS, "uid-1", "cid", "0@demo-combined-0.demo-combined.kafka.svc:9093:x", spec)


def test_renewal_decisions() -> None:
    ca = pki.new_ca("ca", 365, NOW)
    other = pki.new_ca("ca", 365, NOW)  # same subject, another key
    subject = pki.name("demo-node")
    hosts = ["a.kafka.svc", "10.0.0.1"]
    leaf = pki.issue(ca, subject, 100, NOW, hosts)
    assert pki.sans_of(leaf.cert) == {"a.kafka.svc", "10.0.0.1"}
    assert pki.principal_of(leaf.cert.subject) == cert_principal("demo-node") == "User:CN=demo-node,O=kopfka.io"
    assert pki.renewal_reason(leaf.cert, NOW, 30, ca.cert, subject, hosts) is None
    assert pki.renewal_reason(leaf.cert, NOW + 69 * DAY, 30, ca.cert, subject, hosts) is None
    assert "renewal window" in (pki.renewal_reason(leaf.cert, NOW + 71 * DAY, 30) or "")
    assert "expired" in (pki.renewal_reason(leaf.cert, NOW + 101 * DAY, 30) or "")
    assert pki.renewal_reason(leaf.cert, NOW, 30, other.cert) == "signed by another CA"
    assert "subject" in (pki.renewal_reason(leaf.cert, NOW, 30, ca.cert, pki.name("x")) or "")
    assert "alternative names" in (pki.renewal_reason(leaf.cert, NOW, 30, ca.cert, subject, ["a.kafka.svc"]) or "")
    # never valid beyond its CA, and then not renewed for its window (a new one could not live
    # longer); the keystore reads back; a foreign key is refused
    capped = pki.issue(ca, subject, 1000, NOW).cert
    assert capped.not_valid_after_utc == ca.cert.not_valid_after_utc
    assert pki.renewal_reason(capped, NOW + 340 * DAY, 30, ca.cert) is None
    assert "expired" in (pki.renewal_reason(capped, NOW + 366 * DAY, 30, ca.cert) or "")
    assert pki.load_keystore(leaf.keystore_pem()).cert == leaf.cert
    with pytest.raises(ValueError, match="does not belong"):
        pki.load(leaf.cert_pem(), other.key_pem())


def test_rendered_security_keys(tmp_path: Path) -> None:
    cluster = secured_cluster()
    props = parse_properties(server_properties(cluster, cluster.spec.brokers))
    assert props["listener.security.protocol.map"] == "CLIENT:SASL_SSL,MTLS:SSL,REPLICATION:SSL,CONTROLLER:SSL"
    assert props["listener.name.client.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["listener.name.mtls.ssl.client.auth"] == "required"
    assert props["listener.name.mtls.ssl.truststore.location"] == "/etc/kopfka-tls/clients-ca.crt"
    assert props["listener.name.mtls.ssl.principal.mapping.rules"] == "RULE:^CN=([^,]+)$/$1/,DEFAULT"
    assert props["listener.name.replication.ssl.client.auth"] == "required"
    assert props["listener.name.controller.ssl.client.auth"] == "required"
    assert props["ssl.truststore.location"] == "/etc/kopfka-tls/ca.crt"
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert props["super.users"] == "User:CN=demo-node,O=kopfka.io;User:CN=demo-operator,O=kopfka.io;User:admin"
    assert "ssl.keystore.location" not in props  # per pod, below
    sts = stateful_set(cluster, cluster.spec.brokers)
    pod = sts["spec"]["template"]["spec"]
    assert {"name": "tls", "secret": {"secretName": "demo-combined-certs", "defaultMode": 0o440}} in pod["volumes"]
    assert {"name": "tls", "mountPath": "/etc/kopfka-tls", "readOnly": True} in pod["containers"][0]["volumeMounts"]
    args = run_script(tmp_path, pod["containers"][0]["command"][2], "demo-combined-2")
    assert args[args.index("ssl.keystore.location=/etc/kopfka-tls/demo-combined-2.pem") - 1] == "--override"
    bootstrap = next(c for c in build_children(cluster) if c["metadata"]["name"] == "demo-bootstrap")
    assert [p["port"] for p in bootstrap["spec"]["ports"]] == [9092, 9094, 9091]

    # SASL without TLS; an unsecured cluster renders none of it
    plain = secured_cluster(listeners=[{"name": "CLIENT", "port": 9092, "authentication": {"type": "scram-sha-256"}}])
    assert "CLIENT:SASL_PLAINTEXT," in server_properties(plain, plain.spec.brokers)
    open_spec = {k: v for k, v in SECURED_SPEC.items() if k not in ("listeners", "authorization")}
    unsecured = dataclasses.replace(cluster, spec=parse_spec(open_spec))
    text = server_properties(unsecured, unsecured.spec.brokers)
    assert "ssl." not in text and "authorizer" not in text and "REPLICATION:PLAINTEXT" in text
    assert "tls" not in {
        v["name"] for v in stateful_set(unsecured, unsecured.spec.brokers)["spec"]["template"]["spec"]["volumes"]
    }


@pytest.mark.parametrize(
    ("changes", "reason", "text"),
    [
        ({"listeners": [{"name": "C", "port": 9092, "authentication": {"type": "tls"}}]}, "InvalidSpec", "needs tls"),
        ({"listeners": [{"name": "C", "port": 9092, "authentication": {"type": "plain"}}]}, "InvalidSpec", "jaas"),
        ({"config": {"ssl.keystore.location": "/x"}}, "OperatorOwnedConfigKey", "secured"),
        ({"config": {"listener.name.replication.ssl.client.auth": "none"}}, "OperatorOwnedConfigKey", "secured"),
        ({"config": {"super.users": "User:x"}}, "OperatorOwnedConfigKey", "spec.authorization"),
        ({"clusterCa": {"validityDays": 30, "renewalDays": 30}}, "InvalidSpec", "renewalDays"),
    ],
)
def test_security_spec_errors(changes: dict[str, Any], reason: str, text: str) -> None:
    with pytest.raises(SpecError, match=text) as err:
        parse_spec({**SECURED_SPEC, **changes})
    assert err.value.reason == reason


@pytest.fixture
async def api(k8s: Emulator) -> AsyncIterator[KubeApi]:
    client = KubeApi(kopf.ConnectionInfo(server=k8s.server_url))
    try:
        yield client
    finally:
        await client.close()


async def secret_data(api: KubeApi, name: str) -> dict[str, bytes]:
    return certificates.decode(await api.get("Secret", NS, name))


async def test_certificates_issued_kept_and_renewed(k8s: Emulator, api: KubeApi) -> None:
    cluster = secured_cluster()
    first = await certificates.ensure_certificates(api, cluster, {"combined": 2}, NOW)
    names = {s["metadata"]["name"] for s in await api.list("Secret", NS, "")}
    assert names == {
        "demo-cluster-ca",
        "demo-cluster-ca-cert",
        "demo-clients-ca",
        "demo-clients-ca-cert",
        "demo-combined-certs",
        "demo-operator-certs",
    }
    ca = pki.load(*(await secret_data(api, "demo-cluster-ca")).values())
    assert (await secret_data(api, "demo-cluster-ca-cert")) == {"ca.crt": ca.cert_pem()}  # no key
    certs = await secret_data(api, "demo-combined-certs")
    assert sorted(certs) == ["ca.crt", "clients-ca.crt", "demo-combined-0.pem", "demo-combined-1.pem"]
    node1 = pki.load_keystore(certs["demo-combined-1.pem"]).cert
    node1.verify_directly_issued_by(ca.cert)
    assert pki.principal_of(node1.subject) == cert_principal(node_common_name(CLUSTER))
    assert {
        "demo-combined-1.demo-combined.kafka.svc",
        "demo-combined-1.demo-combined.kafka.svc.cluster.local",
        "demo-bootstrap.kafka.svc",
    } <= pki.sans_of(node1)
    operator_cert = x509.load_pem_x509_certificate((await secret_data(api, "demo-operator-certs"))["tls.crt"])
    assert pki.principal_of(operator_cert.subject) == cert_principal(operator_common_name(CLUSTER))

    # nothing to do: no write at all
    writes = len(k8s.writes)
    again = await certificates.ensure_certificates(api, cluster, {"combined": 2}, NOW + DAY)
    assert again.versions == first.versions and len(k8s.writes) == writes

    # a third pod (scale-up) gets its certificate; the others are kept and nothing rolls
    grown = await certificates.ensure_certificates(api, cluster, {"combined": 3}, NOW + DAY)
    assert grown.versions == first.versions and not grown.renewed
    certs3 = await secret_data(api, "demo-combined-certs")
    assert certs3["demo-combined-1.pem"] == certs["demo-combined-1.pem"] and "demo-combined-2.pem" in certs3


async def _pods_on(api: KubeApi, version: str, replicas: int) -> None:
    """The pool's StatefulSet and pods as the roller leaves them: every pod on `version`."""
    labels = {"kopfka.io/cluster": CLUSTER, "kopfka.io/role": "combined"}
    if await api.get("StatefulSet", NS, "demo-combined") is None:
        template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "k", "image": "k"}]}}
        sts_spec = {"replicas": replicas, "selector": {"matchLabels": labels}, "template": template}
        sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "demo-combined"}, "spec": sts_spec}
        await api.create(NS, sts)
    for i in range(replicas):
        name = f"demo-combined-{i}"
        await api.delete("Pod", NS, name)
        meta = {"name": name, "labels": labels, "annotations": {CERTS_VERSION_ANNOTATION: version}}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {"containers": [{"name": "k", "image": "k"}]},
        }
        await api.create(NS, pod)


async def test_ca_renewal_trusts_both_then_signs_with_the_new_one(api: KubeApi) -> None:
    """A CA in its renewal window is replaced in two rolls: first every node trusts the new CA
    next to the old one, which still signs (no certificate changes); once every pod runs that
    version, the node and operator certificates come from the new CA (second roll). The old CA
    leaves the truststores when it has expired, without a roll."""
    cluster = secured_cluster()
    first = await certificates.ensure_certificates(api, cluster, {"combined": 3}, NOW)
    old_ca = pki.load(*(await secret_data(api, "demo-cluster-ca")).values())
    certs = await secret_data(api, "demo-combined-certs")
    operator_pem = (await secret_data(api, "demo-operator-certs"))["tls.crt"]
    await _pods_on(api, first.versions["combined"], 3)

    due = NOW + 340 * DAY
    trusting = await certificates.ensure_certificates(api, cluster, {"combined": 3}, due)
    assert trusting.versions != first.versions and not trusting.renewed and not trusting.warnings  # roll 1
    ca_secret = await api.get("Secret", NS, "demo-cluster-ca")
    assert ca_secret["metadata"]["annotations"][certificates.RENEWAL_ANNOTATION] == "trusting"
    new_ca = pki.load(certificates.decode(ca_secret)["ca.crt"], certificates.decode(ca_secret)["ca.key"])
    certs2 = await secret_data(api, "demo-combined-certs")
    bundle = {
        c.subject.rfc4514_string() + pki.fingerprint(c) for c in x509.load_pem_x509_certificates(certs2["ca.crt"])
    }
    assert len(bundle) == 2 and len(x509.load_pem_x509_certificates(certs2["clients-ca.crt"])) == 2
    assert len(x509.load_pem_x509_certificates((await secret_data(api, "demo-cluster-ca-cert"))["ca.crt"])) == 2
    assert all(certs2[f"demo-combined-{i}.pem"] == certs[f"demo-combined-{i}.pem"] for i in range(3))
    # a pod not yet restarted: still trusting, nothing issued
    await _pods_on(api, trusting.versions["combined"], 3)
    await api.patch("Pod", NS, "demo-combined-2", {"metadata": {"annotations": {CERTS_VERSION_ANNOTATION: "old"}}})
    waiting = await certificates.ensure_certificates(api, cluster, {"combined": 3}, due)
    assert waiting.versions == trusting.versions and not waiting.switched

    await _pods_on(api, trusting.versions["combined"], 3)
    switched = await certificates.ensure_certificates(api, cluster, {"combined": 3}, due)
    assert switched.switched == ["cluster", "clients"] and switched.renewed["combined"]
    assert switched.versions != trusting.versions  # roll 2
    certs3 = await secret_data(api, "demo-combined-certs")
    for i in range(3):
        pki.load_keystore(certs3[f"demo-combined-{i}.pem"]).cert.verify_directly_issued_by(new_ca.cert)
    operator_cert = x509.load_pem_x509_certificate((await secret_data(api, "demo-operator-certs"))["tls.crt"])
    operator_cert.verify_directly_issued_by(new_ca.cert)
    assert (await secret_data(api, "demo-operator-certs"))["tls.crt"] != operator_pem
    assert "ca-previous.key" not in await secret_data(api, "demo-cluster-ca")

    # the old CA expired: out of every truststore, and no roll for that
    expired = old_ca.cert.not_valid_after_utc + DAY
    after = await certificates.ensure_certificates(api, cluster, {"combined": 3}, expired)
    assert after.versions == switched.versions and not after.renewed
    assert len(x509.load_pem_x509_certificates((await secret_data(api, "demo-combined-certs"))["ca.crt"])) == 1
    assert set(await secret_data(api, "demo-cluster-ca")) == {"ca.crt", "ca.key"}


async def test_certificates_renewed_in_their_window_and_on_request(api: KubeApi) -> None:
    """With a CA that outlives them (here a 10-year CA the user brought), 365-day certificates
    are issued again 30 days before they expire, all of a pool at once (one roll); and at once
    when the pool's Secret is annotated kopfka.io/force-renew=true."""
    own = pki.new_ca("my-own-ca", 3650, NOW)
    await api.create(NS, _secret("demo-cluster-ca", {"ca.crt": own.cert_pem(), "ca.key": own.key_pem()}))
    cluster = secured_cluster()
    first = await certificates.ensure_certificates(api, cluster, {"combined": 2}, NOW)
    certs = await secret_data(api, "demo-combined-certs")
    operator_cert = (await secret_data(api, "demo-operator-certs"))["tls.crt"]
    assert not (await certificates.ensure_certificates(api, cluster, {"combined": 2}, NOW + 334 * DAY)).renewed

    renewed = await certificates.ensure_certificates(api, cluster, {"combined": 2}, NOW + 336 * DAY)
    assert renewed.versions != first.versions and "renewal window" in renewed.renewed["combined"]
    certs2 = await secret_data(api, "demo-combined-certs")
    assert all(certs2[f"demo-combined-{i}.pem"] != certs[f"demo-combined-{i}.pem"] for i in range(2))
    assert (await secret_data(api, "demo-operator-certs"))["tls.crt"] != operator_cert
    assert not [w for w in renewed.warnings if "cluster CA" in w[1]]  # it has years left

    await api.patch(
        "Secret", NS, "demo-combined-certs", {"metadata": {"annotations": {"kopfka.io/force-renew": "true"}}}
    )
    forced = await certificates.ensure_certificates(api, cluster, {"combined": 2}, NOW + 337 * DAY)
    assert "force-renew" in forced.renewed["combined"] and forced.versions != renewed.versions
    secret = await api.get("Secret", NS, "demo-combined-certs")
    assert "kopfka.io/force-renew" not in secret["metadata"]["annotations"]
    assert secret["metadata"]["annotations"][certificates.GENERATION_ANNOTATION] == "2"


def _secret(name: str, data: dict[str, bytes]) -> dict[str, Any]:
    encoded = {k: base64.b64encode(v).decode() for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS}, "data": encoded}


async def test_user_provided_ca(api: KubeApi) -> None:
    cluster = secured_cluster(clusterCa={"generateCertificateAuthority": False})
    with pytest.raises(certificates.CertificateError) as err:
        await certificates.ensure_certificates(api, cluster, {"combined": 1}, NOW)
    assert err.value.reason == "CaMissing"
    own = pki.new_ca("my-own-ca", 3650, NOW)
    await api.create(NS, _secret("demo-cluster-ca", {"ca.crt": own.cert_pem(), "ca.key": own.key_pem()}))
    await certificates.ensure_certificates(api, cluster, {"combined": 1}, NOW)
    keystore = (await secret_data(api, "demo-combined-certs"))["demo-combined-0.pem"]
    pki.load_keystore(keystore).cert.verify_directly_issued_by(own.cert)


def cluster_body(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kopfka.io/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {"name": CLUSTER, "namespace": NS},
        "spec": spec,
    }


async def test_reconcile_stamps_the_certs_version_and_a_renewal_changes_the_pod_hash(api: KubeApi) -> None:
    body = await api.create(NS, cluster_body(SECURED_SPEC))
    await reconcile(api, body, None)
    sts = await api.get("StatefulSet", NS, "demo-combined")
    assert sts is not None
    template = sts["spec"]["template"]
    version = template["metadata"]["annotations"][CERTS_VERSION_ANNOTATION]
    secret = await api.get("Secret", NS, "demo-combined-certs")
    generation = int(secret["metadata"]["annotations"][certificates.GENERATION_ANNOTATION])
    trust = int(secret["metadata"]["annotations"][certificates.TRUST_ANNOTATION])
    assert version == certificates.certs_version(generation, trust)
    # a certificate about to expire (issued 350 days ago) is issued again at the next reconcile
    ca = pki.load(*(await secret_data(api, "demo-cluster-ca")).values())
    old = pki.issue(ca, pki.name("demo-node"), 365, datetime.datetime.now(datetime.UTC) - 350 * DAY)
    await api.patch(
        "Secret",
        NS,
        "demo-combined-certs",
        {"data": {"demo-combined-0.pem": base64.b64encode(old.keystore_pem()).decode()}},
    )
    await reconcile(api, await api.get("KafkaCluster", NS, CLUSTER), None)
    renewed = (await api.get("StatefulSet", NS, "demo-combined"))["spec"]["template"]
    assert renewed["metadata"]["annotations"][CERTS_VERSION_ANNOTATION] != version
    assert pod_hash(renewed) != pod_hash(template)  # the roller restarts every pod


async def test_concurrent_first_reconciles_agree_on_one_cluster_id(api: KubeApi) -> None:
    """The create handler and the roll timer may both reconcile a new cluster: one id wins
    (a resourceVersion precondition), never a status id that the children do not carry."""
    spec = {k: v for k, v in SECURED_SPEC.items() if k not in ("listeners", "authorization")}
    body = await api.create(NS, cluster_body(spec))
    await asyncio.gather(reconcile(api, body, None), reconcile(api, body, None), return_exceptions=True)
    status = (await api.get("KafkaCluster", NS, CLUSTER))["status"]
    info = await api.get("ConfigMap", NS, "demo-combined-config")
    assert info["data"]["cluster.id"] == status["clusterId"]
    sts = await api.get("StatefulSet", NS, "demo-combined")
    assert f"--cluster-id {status['clusterId']}" in sts["spec"]["template"]["spec"]["initContainers"][0]["command"][2]


def test_rendered_config_runs_a_secured_node(tmp_path: Path) -> None:
    """A real node from the rendered keys: the operator's certificate is a super user on
    REPLICATION (signed by either CA of a two-CA truststore, as during a CA renewal); anything
    without a cluster-CA certificate is turned away there; CLIENT wants SCRAM over TLS."""
    now = datetime.datetime.now(datetime.UTC)
    cluster_ca, clients_ca = pki.new_ca("demo-cluster-ca", 30, now), pki.new_ca("demo-clients-ca", 30, now)
    renewed = pki.new_ca("demo-cluster-ca", 30, now)  # trusted next to it, as during a CA renewal
    node = start_secured_node(tmp_path, cluster_ca, clients_ca, also_trusted=renewed)
    try:
        # the operator's certificate from the renewed CA, and both CAs in its own truststore
        op = pki.issue(renewed, pki.name(operator_common_name(CLUSTER)), 30, now)
        bundle = renewed.cert_pem() + cluster_ca.cert_pem()
        data = {"ca.crt": bundle, "tls.crt": op.cert_pem(), "tls.key": op.key_pem()}
        operator_security = credentials.client_security(data)
        stranger = pki.issue(clients_ca, pki.name("alice", None), 30, now)  # a user, not a node
        stranger_security = credentials.client_security(
            {**data, "tls.crt": stranger.cert_pem(), "tls.key": stranger.key_pem()}
        )

        async def check() -> None:
            admin = await Admin.connect(node.address("REPLICATION"), operator_security)
            try:
                await admin.create_topic("made-by-operator", 1, 1)
                _, topics, _ = await admin.metadata(None)
                assert "made-by-operator" in [t.name for t in topics]
            finally:
                await admin.close()
            for address, security in (
                (node.address("REPLICATION"), stranger_security),  # wrong CA
                (node.address("REPLICATION"), None),  # plaintext on a TLS port
                (node.address("CLIENT"), ClientSecurity("SSL", operator_security.ssl_context)),  # no SASL
            ):
                with pytest.raises((OSError, ConnectionError, EOFError, asyncio.IncompleteReadError, TimeoutError)):
                    conn = await KafkaConnection.open(address, timeout=5, security=security)
                    try:
                        await Admin(conn).metadata(None)
                    finally:
                        await conn.close()

        asyncio.run(check())
        assert node.proc.poll() is None
    finally:
        node.stop()


def test_the_operator_reaches_a_secured_cluster_on_replication() -> None:
    """Admin connections (roller, scaler, Topics, Quotas, Users) go to the bootstrap Service's
    REPLICATION port of a secured cluster, with the operator's credentials; an unsecured one is
    reached on its client listeners as before."""
    from kopfka_operator.handlers import default_view
    from kopfka_operator.security.credentials import admin_bootstrap, is_secured

    status = {"bootstrapServers": "demo-bootstrap.kafka.svc:9092,demo-bootstrap.kafka.svc:9094"}
    secured = {**cluster_body(SECURED_SPEC), "status": status}
    assert is_secured(secured) and admin_bootstrap(secured) == "demo-bootstrap.kafka.svc:9091"
    security = ClientSecurity("SSL")
    view = default_view(secured, security)
    assert view is not None and (view.bootstrap, view.security) == ("demo-bootstrap.kafka.svc:9091", security)  # type: ignore[attr-defined]
    open_spec = {k: v for k, v in SECURED_SPEC.items() if k not in ("listeners", "authorization")}
    unsecured = {**cluster_body(open_spec), "status": {"bootstrapServers": "demo-bootstrap.kafka.svc:9092"}}
    assert not is_secured(unsecured) and admin_bootstrap(unsecured) == "demo-bootstrap.kafka.svc:9092"
    assert admin_bootstrap(cluster_body(SECURED_SPEC)) is None  # not rendered yet
    broken = cluster_body({**SECURED_SPEC, "mode": "bogus"})
    assert is_secured(broken)  # an invalid spec: as its listeners say
