"""Security on a real Kubernetes (issue 17): the TLS + SCRAM example cluster
(examples/kafkacluster-tls-scram.yaml) becomes Ready, its nodes talking to each other and to the
operator over mutual TLS (the operator creates a Topic through it); the example Users'
credentials work from a client pod that mounts their Secrets (SCRAM-SHA-512 over TLS on 9092, a
client certificate on 9094); ACLs refuse what they do not allow; renewing the brokers'
certificates (one roll) and the cluster CA (two rolls) under an idempotent acks=all producer loses
0 acknowledged records; deleting a User revokes it.

Run on the test bed: 7 passed in 4 min 41 s (cluster Ready 15 s, certificate renewal 51.5 s,
CA renewal 59.4 s, 0 acknowledged records lost). As root, from the repository (the package
installed as ./scripts/test-e2e does):
    KOPFKA_E2E_BUILD=1 python3 -m pytest -q -p no:randomly e2e/test_security.py
(KOPFKA_E2E_KEEP=1 keeps the test bed and the namespace for a look; KOPFKA_E2E_PLATFORM=kind
runs it on kind).

One namespace holds the cluster `secure` of the example; the tests run in file order and share it.
"""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kafka_pods import cluster_ready, exec_python, exec_sh, pods_of, resource_ready
from kube_env import REPO, Kube, condition, wait_for

CLUSTER = "secure"
USERS = ("admin", "orders-producer", "orders-consumer")
FIGURES: dict[str, Any] = {}


@pytest.fixture(scope="module")
def ns(operator: Kube) -> Iterator[str]:
    name = f"e2e-security-{uuid.uuid4().hex[:4]}"
    operator.kubectl("create", "namespace", name)
    yield name
    print(f"\nsecurity figures: {json.dumps(FIGURES)}")
    if not os.environ.get("KOPFKA_E2E_KEEP"):
        operator.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def cluster(operator: Kube, ns: str) -> dict[str, Any]:
    started = time.monotonic()
    operator.kubectl("-n", ns, "apply", "-f", str(REPO / "examples" / "kafkacluster-tls-scram.yaml"))
    ready = cluster_ready(operator, CLUSTER, ns, timeout=600)
    FIGURES["cluster_ready_s"] = round(time.monotonic() - started, 1)
    return ready


@pytest.fixture(scope="module")
def users(operator: Kube, ns: str, cluster: dict[str, Any]) -> dict[str, dict[str, Any]]:
    for name in USERS:
        operator.kubectl("-n", ns, "apply", "-f", str(REPO / "examples" / f"user-{name}.yaml"))
    return {name: resource_ready(operator, "user", name, ns) for name in USERS}


@pytest.fixture(scope="module")
def client(operator: Kube, ns: str, users: dict[str, Any]) -> str:
    """A client pod mounting each User's Secret at /creds/<user> (as an application would)."""
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "client", "labels": {"app": "kafka-client"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "client",
                    "image": operator.client_image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sleep", "infinity"],
                    "volumeMounts": [{"name": u, "mountPath": f"/creds/{u}", "readOnly": True} for u in USERS],
                }
            ],
            "volumes": [{"name": u, "secret": {"secretName": u}} for u in USERS],
        },
    }
    operator.apply(json.dumps(manifest), ns)

    def running() -> bool:
        pod = operator.get("pod", "client", ns) or {}
        conditions = pod.get("status", {}).get("conditions", [])
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    wait_for("client pod ready", running, 180)
    return "client"


def bootstrap(ns: str, port: int) -> str:
    return f"{CLUSTER}-bootstrap.{ns}.svc:{port}"


def client_script(ns: str, body: str) -> str:
    """Python run in the client pod: confluent-kafka configs for SCRAM (9092) and mTLS (9094)
    users from their mounted Secrets, then `body`."""
    return f"""
import json, time
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

def scram(user, password=None):
    d = f"/creds/{{user}}"
    return {{
        "bootstrap.servers": "{bootstrap(ns, 9092)}",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": f"{{d}}/ca.crt",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password if password is not None else open(f"{{d}}/password").read(),
    }}

def mtls(user):
    d = f"/creds/{{user}}"
    return {{
        "bootstrap.servers": "{bootstrap(ns, 9094)}",
        "security.protocol": "SSL",
        "ssl.ca.location": f"{{d}}/ca.crt",
        "ssl.certificate.location": f"{{d}}/user.crt",
        "ssl.key.location": f"{{d}}/user.key",
    }}

def produce(conf, topic, n, timeout=60):
    p = Producer({{**conf, "enable.idempotence": True, "acks": "all", "message.timeout.ms": 30000}})
    errors, acked = [], []
    def done(err, msg):
        (errors if err is not None else acked).append(str(err) if err is not None else msg.offset())
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=b"v%d" % i, on_delivery=done)
        p.poll(0)
    p.flush(timeout)
    return {{"acked": len(acked), "errors": sorted(set(errors))}}

def consume(conf, topic, group, want, timeout=60):
    c = Consumer({{**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}})
    c.subscribe([topic])
    got, errors, deadline = set(), [], time.time() + timeout
    while len(got) < want and time.time() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            errors.append(m.error().name())
            refused = (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED)
            if m.error().fatal() or m.error().code() in refused:
                break
            continue
        got.add(m.key().decode())
    c.close()
    return {{"keys": sorted(got, key=int), "errors": sorted(set(errors))}}

{body}
"""


def run(kube: Kube, ns: str, pod: str, body: str, timeout: float = 300) -> dict[str, Any]:
    out = exec_python(kube, ns, pod, client_script(ns, body), timeout=timeout)
    return dict(json.loads(out.strip().splitlines()[-1]))


def secret(kube: Kube, ns: str, name: str) -> dict[str, bytes]:
    obj = kube.get("secret", name, ns) or {}
    return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}


def test_secured_cluster_is_ready_and_the_operator_reaches_it(operator: Kube, ns: str, cluster: dict[str, Any]) -> None:
    status = cluster["status"]
    assert status["bootstrapServers"] == f"{bootstrap(ns, 9092)},{bootstrap(ns, 9094)}"
    for name in ("secure-cluster-ca", "secure-clients-ca", "secure-cluster-ca-cert", "secure-operator-certs"):
        assert operator.get("secret", name, ns), name
    assert set(secret(operator, ns, "secure-cluster-ca-cert")) == {"ca.crt"}  # no key for clients
    certs = secret(operator, ns, "secure-combined-certs")
    assert {f"secure-combined-{i}.pem" for i in range(3)} <= set(certs)
    for pod in pods_of(operator, ns, CLUSTER):
        assert pod["metadata"]["annotations"].get("kopfka.io/certs-version")
    # The operator's own admin connection (mutual TLS on REPLICATION, a super user) creates a Topic.
    topic = {
        "apiVersion": "kopfka.io/v1alpha1",
        "kind": "Topic",
        "metadata": {"name": "orders", "labels": {"kopfka.io/cluster": CLUSTER}},
        "spec": {"partitions": 3, "replicationFactor": 3, "config": {"min.insync.replicas": 2}},
    }
    operator.apply(yaml.safe_dump(topic), ns)
    assert resource_ready(operator, "topic", "orders", ns)["status"]["partitions"] == 3


def test_users_get_their_secrets(operator: Kube, ns: str, users: dict[str, dict[str, Any]]) -> None:
    assert users["orders-producer"]["status"]["principal"] == "User:orders-producer"
    assert len(users["orders-producer"]["status"]["acls"]) == 4  # 3 topic operations + IdempotentWrite
    producer = secret(operator, ns, "orders-producer")
    assert set(producer) == {"password", "sasl.jaas.config", "ca.crt"}
    assert producer["ca.crt"] == secret(operator, ns, "secure-cluster-ca-cert")["ca.crt"]
    consumer = secret(operator, ns, "orders-consumer")
    assert set(consumer) == {"user.crt", "user.key", "ca.crt"}
    table = operator.kubectl("-n", ns, "get", "users")
    assert "orders-consumer" in table and "tls" in table, table


def test_scram_user_produces_over_tls_and_is_refused_elsewhere(
    operator: Kube, ns: str, cluster: dict[str, Any], client: str
) -> None:
    result = run(
        operator,
        ns,
        client,
        """
ok = produce(scram("orders-producer"), "orders", 200)
denied = produce(scram("orders-producer"), "payments", 1, timeout=40)
wrong = produce(scram("orders-producer", password="not-the-password"), "orders", 1, timeout=40)
print(json.dumps({"ok": ok, "denied": denied, "wrong": wrong}))
""",
    )
    assert result["ok"] == {"acked": 200, "errors": []}, result
    assert any("TOPIC_AUTHORIZATION_FAILED" in e for e in result["denied"]["errors"]), result
    assert result["wrong"]["acked"] == 0, result


def test_tls_user_consumes_in_its_group_only(operator: Kube, ns: str, cluster: dict[str, Any], client: str) -> None:
    result = run(
        operator,
        ns,
        client,
        """
ok = consume(mtls("orders-consumer"), "orders", "orders-consumers", 200)
denied = consume(mtls("orders-consumer"), "orders", "someone-elses-group", 1, timeout=30)
print(json.dumps({"ok": len(ok["keys"]), "ok_errors": ok["errors"], "denied": denied["errors"]}))
""",
    )
    assert result["ok"] == 200, result
    assert "GROUP_AUTHORIZATION_FAILED" in result["denied"], result


PRODUCER = """
import json, os, sys, time
from confluent_kafka import Producer
d = "/creds/orders-producer"
p = Producer({"bootstrap.servers": sys.argv[1], "security.protocol": "SASL_SSL", "ssl.ca.location": sys.argv[2],
              "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "orders-producer",
              "sasl.password": open(d + "/password").read(), "enable.idempotence": True, "acks": "all",
              "message.timeout.ms": 300000})
acked, failed, i = [], [], 0
def done(err, msg):
    (failed if err is not None else acked).append(str(err) if err is not None else msg.key().decode())
while not os.path.exists("/tmp/stop-producer"):
    p.produce(sys.argv[3], key=str(i).encode(), value=b"x" * 100, on_delivery=done)
    i += 1
    p.poll(0.02)
p.flush(300)
json.dump({"sent": i, "acked": acked, "failed": failed}, open("/tmp/producer.json", "w"))
"""
BUNDLE = "/tmp/ca-bundle.pem"


def start_producer(kube: Kube, ns: str, client: str, ca_path: str, topic: str) -> None:
    exec_sh(kube, ns, client, "rm -f /tmp/stop-producer /tmp/producer.json\n", timeout=30)
    kube.kubectl("-n", ns, "exec", "-i", client, "--", "sh", "-c", "cat > /tmp/producer.py", input=PRODUCER)
    command = f"python3 /tmp/producer.py {bootstrap(ns, 9092)} {ca_path} {topic}"
    exec_sh(kube, ns, client, f"setsid nohup {command} >/tmp/producer.log 2>&1 &\n")


def stop_producer(kube: Kube, ns: str, client: str) -> dict[str, Any]:
    exec_sh(kube, ns, client, "touch /tmp/stop-producer\n")

    def report() -> dict[str, Any] | None:
        out = exec_sh(kube, ns, client, "cat /tmp/producer.json 2>/dev/null || true\n")
        return json.loads(out) if out.strip() else None

    return wait_for("producer report", report, 360, interval=3)


def pods_rolled_onto_template(kube: Kube, ns: str) -> str | None:
    """The certs version every pod runs, once all run the StatefulSet's and the cluster is Ready."""
    sts = kube.get("statefulset", "secure-combined", ns) or {}
    version = sts["spec"]["template"]["metadata"]["annotations"]["kopfka.io/certs-version"]
    pods = pods_of(kube, ns, CLUSTER)
    done = len(pods) == 3 and all(p["metadata"]["annotations"].get("kopfka.io/certs-version") == version for p in pods)
    ready = condition(kube.get("kafkacluster", CLUSTER, ns), "Ready").get("status") == "True"
    return version if done and ready else None


def node_certs_signed_by_current_ca(kube: Kube, ns: str) -> bool:
    from cryptography import x509

    ca_secret = kube.get("secret", "secure-cluster-ca", ns) or {}
    if "kopfka.io/ca-renewal" in (ca_secret["metadata"].get("annotations") or {}):
        return False  # still being trusted
    ca = x509.load_pem_x509_certificate(base64.b64decode(ca_secret["data"]["ca.crt"]))
    certs = secret(kube, ns, "secure-combined-certs")
    for i in range(3):
        pem = certs[f"secure-combined-{i}.pem"]
        leaf = x509.load_pem_x509_certificate(pem[pem.index(b"-----BEGIN CERTIFICATE-----") :])
        if leaf.issuer != ca.subject:
            return False
        leaf.verify_directly_issued_by(ca)
    return True


@pytest.mark.parametrize("renewed", ["node-certificates", "cluster-ca"])
def test_certificate_renewal_rolls_the_cluster_with_nothing_lost(
    operator: Kube, ns: str, cluster: dict[str, Any], client: str, renewed: str
) -> None:
    """kopfka.io/force-renew on the pool's certificates Secret (one roll: new certificates) or
    on the cluster CA's Secret (two rolls: every node trusts both CAs, then gets a certificate
    from the new one) while an idempotent acks=all producer runs: 0 acknowledged records lost.
    The CA case's clients use the two-CA bundle of secure-cluster-ca-cert (as a client that
    follows the mounted Secret would)."""
    topic = f"orders-roll-{renewed}"
    manifest = {
        "apiVersion": "kopfka.io/v1alpha1",
        "kind": "Topic",
        "metadata": {"name": topic, "labels": {"kopfka.io/cluster": CLUSTER}},
        "spec": {"partitions": 3, "replicationFactor": 3, "config": {"min.insync.replicas": 2}},
    }
    operator.apply(yaml.safe_dump(manifest), ns)
    resource_ready(operator, "topic", topic, ns)
    before = pods_rolled_onto_template(operator, ns)
    assert before, "the cluster is not settled before the renewal"
    old_pem = secret(operator, ns, "secure-combined-certs")["secure-combined-0.pem"]
    started = time.monotonic()
    if renewed == "cluster-ca":
        operator.kubectl("-n", ns, "annotate", "secret", "secure-cluster-ca", "kopfka.io/force-renew=true")

        def trusting() -> bytes | None:
            ca = secret(operator, ns, "secure-cluster-ca-cert")["ca.crt"]
            return ca if ca.count(b"BEGIN CERTIFICATE") == 2 else None

        bundle = wait_for("the renewed cluster CA trusted next to the old one", trusting, 120)
        operator.kubectl("-n", ns, "exec", "-i", client, "--", "sh", "-c", f"cat > {BUNDLE}", input=bundle.decode())
        start_producer(operator, ns, client, BUNDLE, topic)
        wait_for(
            "both rolls done, certificates from the new CA",
            lambda: node_certs_signed_by_current_ca(operator, ns) or None,
            1800,
            interval=5,
        )
    else:
        start_producer(operator, ns, client, "/creds/orders-producer/ca.crt", topic)
        time.sleep(10)
        operator.kubectl("-n", ns, "annotate", "secret", "secure-combined-certs", "kopfka.io/force-renew=true")
        wait_for(
            "certificates issued again",
            lambda: secret(operator, ns, "secure-combined-certs")["secure-combined-0.pem"] != old_pem or None,
            120,
        )
    after = wait_for(
        "every pod rolled onto its new certificate", lambda: pods_rolled_onto_template(operator, ns), 1800, interval=5
    )
    assert after != before
    assert secret(operator, ns, "secure-combined-certs")["secure-combined-0.pem"] != old_pem
    FIGURES[f"renewal_{renewed}_s"] = round(time.monotonic() - started, 1)
    time.sleep(5)
    produced = stop_producer(operator, ns, client)
    FIGURES[f"renewal_{renewed}_producer"] = {"sent": produced["sent"], "acked": len(produced["acked"])}
    assert not produced["failed"], produced["failed"][:5]
    ca_path = BUNDLE if renewed == "cluster-ca" else "/creds/orders-consumer/ca.crt"
    seen = run(
        operator,
        ns,
        client,
        f"""
conf = {{**mtls("orders-consumer"), "ssl.ca.location": "{ca_path}"}}
got = consume(conf, "{topic}", "orders-consumers", {len(produced["acked"])}, timeout=180)
print(json.dumps({{"keys": got["keys"], "errors": got["errors"]}}))
""",
        timeout=400,
    )
    lost = set(produced["acked"]) - set(seen["keys"])
    FIGURES[f"renewal_{renewed}_lost"] = len(lost)
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost, key=int)[:10]}"


def test_deleting_a_user_revokes_it(operator: Kube, ns: str, cluster: dict[str, Any], client: str) -> None:
    password = secret(operator, ns, "orders-producer")["password"].decode()
    operator.kubectl("-n", ns, "delete", "user", "orders-producer")
    wait_for("the User's Secret gone", lambda: operator.get("secret", "orders-producer", ns) is None or None, 120)
    result = run(
        operator,
        ns,
        client,
        f"""
gone = produce(scram("orders-producer", password={password!r}), "orders", 1, timeout=40)
print(json.dumps(gone))
""",
    )
    assert result["acked"] == 0, result
