"""External listeners (nodeport, loadbalancer, ingress): the spec, the Services and Ingresses per
broker, the address each broker advertises (its start script run for real), certificate names,
status.listeners, and the reconcile against the kmock emulator creating, updating and deleting
them as brokers and listeners come and go."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from typing import Any

import kopf
import kubernetes_validate
import pytest
from kafka import KafkaConsumer, KafkaProducer
from kopfka import uuids
from kopfka_operator.ids import initial_controllers
from kopfka_operator.kube import KubeApi
from kopfka_operator.manifests import Cluster, build_children, server_properties
from kopfka_operator.manifests.common import Assigned
from kopfka_operator.manifests.external import advertised_entries, external_children
from kopfka_operator.manifests.statefulset import serve_script
from kopfka_operator.reconcile import mark_quorum_formed, reconcile
from kopfka_operator.roll.plan import MANUAL_ROLL_ANNOTATION
from kopfka_operator.security.certificates import node_hosts
from kopfka_operator.spec import SpecError, parse_spec
from kopfka_operator.status import Observed, listeners_status
from kopfka_process import free_port
from operator_testlib import Emulator, run_script
from security_testlib import FAST, parse_properties

K8S_VERSION = "1.37"
NS = "ns"
CLIENT = {"name": "CLIENT", "port": 9092}
NODEPORT = {"name": "EXTERNAL", "port": 9094, "type": "nodeport"}
LOADBALANCER = {"name": "LB", "port": 9095, "type": "loadbalancer", "tls": True}
INGRESS = {
    "name": "ROUTED",
    "port": 9096,
    "type": "ingress",
    "tls": True,
    "configuration": {"bootstrap": {"host": "kafka.example.com"}, "brokerHostTemplate": "broker-{id}.example.com"},
}


def raw_spec(*listeners: dict[str, Any], replicas: int = 3) -> dict[str, Any]:
    return {
        "image": "kopfka:dev",
        "controllers": {"replicas": 1, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
        "brokers": {"replicas": replicas, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
        "listeners": list(listeners),
    }


def make_cluster(*listeners: dict[str, Any], **changes: Any) -> Cluster:
    spec = parse_spec(raw_spec(*listeners))
    cluster = Cluster("demo", NS, "uid-1", "AAAAAAAAAAAAAAAAAAAAAA", initial_controllers("demo", NS, spec.voters), spec)
    return dataclasses.replace(cluster, **changes)


@pytest.mark.parametrize(
    ("listener", "text"),
    [
        ({**INGRESS, "tls": False}, "type ingress needs tls: true"),
        ({**INGRESS, "configuration": {"bootstrap": {"host": "k.example.com"}}}, "needs bootstrap.host and"),
        ({**INGRESS, "configuration": {**INGRESS["configuration"], "brokerHostTemplate": "b.example.com"}}, "{id}"),
        ({**CLIENT, "configuration": {"bootstrap": {"nodePort": 30000}}}, "nodeport, loadbalancer and ingress"),
        ({**CLIENT, "type": "route"}, "type must be one of internal, nodeport"),
        (
            {**NODEPORT, "configuration": {"brokers": [{"broker": 0, "advertisedHost": "a;reboot"}]}},
            "must be a host name or an IP address",
        ),
        ({**NODEPORT, "configuration": {"brokers": [{"broker": 1}, {"broker": 1}]}}, "names a broker twice"),
    ],
)
def test_invalid_external_listeners_are_refused(listener: dict[str, Any], text: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(raw_spec(CLIENT, listener))
    assert text in err.value.message


def test_a_cluster_without_external_listeners_renders_as_before() -> None:
    """No external listener: nothing of this feature shows (no Services, no advertised lines,
    no HOST_IP, the same start script), whatever the operator read back from Kubernetes."""
    plain = make_cluster(CLIENT)
    assert external_children(plain, 3) == []
    observed = dataclasses.replace(plain, assigned={"demo-broker-0-client": Assigned(31000, "1.2.3.4")}, broker_count=5)
    assert build_children(observed) == build_children(plain)
    broker = plain.spec.brokers
    script = serve_script(plain, broker)
    assert "external" not in script and "HOST_IP" not in str(build_children(plain))
    assert 'advertised.listeners=CLIENT://${host}:9092,REPLICATION://${host}:9091"' in script
    info = next(c for c in build_children(plain) if c["metadata"]["name"] == "demo-broker-config")
    assert info["data"] == {"cluster.id": plain.cluster_id}
    assert node_hosts(observed, broker, 0) == node_hosts(plain, broker, 0)


def test_external_services_and_ingresses_per_broker() -> None:
    cluster = make_cluster(CLIENT, NODEPORT, LOADBALANCER, INGRESS)
    children = external_children(cluster, 3)
    for child in children:
        kubernetes_validate.validate(child, K8S_VERSION, strict=True)
        assert child["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    services = {c["metadata"]["name"]: c["spec"] for c in children if c["kind"] == "Service"}
    assert sorted(services) == sorted(
        [f"demo-{lst}-bootstrap" for lst in ("external", "lb", "routed")]
        + [f"demo-broker-{i}-{lst}" for i in range(3) for lst in ("external", "lb", "routed")]
    )
    assert services["demo-external-bootstrap"]["type"] == "NodePort"
    assert services["demo-lb-bootstrap"]["type"] == "LoadBalancer"
    assert services["demo-routed-bootstrap"]["type"] == "ClusterIP"
    assert "statefulset.kubernetes.io/pod-name" not in services["demo-external-bootstrap"]["selector"]
    assert services["demo-broker-2-external"]["selector"]["statefulset.kubernetes.io/pod-name"] == "demo-broker-2"
    assert services["demo-broker-2-external"]["ports"] == [
        {"name": "external", "port": 9094, "targetPort": 9094, "protocol": "TCP"}
    ]
    ingresses = {c["metadata"]["name"]: c for c in children if c["kind"] == "Ingress"}
    assert sorted(ingresses) == [
        "demo-broker-0-routed",
        "demo-broker-1-routed",
        "demo-broker-2-routed",
        "demo-routed-bootstrap",
    ]
    broker1 = ingresses["demo-broker-1-routed"]
    assert broker1["metadata"]["annotations"]["nginx.ingress.kubernetes.io/ssl-passthrough"] == "true"
    assert broker1["spec"]["rules"][0]["host"] == "broker-1.example.com"
    assert broker1["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] == "demo-broker-1-routed"
    assert ingresses["demo-routed-bootstrap"]["spec"]["rules"][0]["host"] == "kafka.example.com"
    # a fixed node port asked for one broker
    fixed = make_cluster({**NODEPORT, "configuration": {"brokers": [{"broker": 1, "nodePort": 31001}]}})
    ports = {c["metadata"]["name"]: c["spec"]["ports"][0] for c in external_children(fixed, 2)}
    assert ports["demo-broker-1-external"]["nodePort"] == 31001 and "nodePort" not in ports["demo-broker-0-external"]


def test_each_broker_advertises_its_external_address(tmp_path: pathlib.Path) -> None:
    """The operator's line per broker, then the real start script turning it into
    advertised.listeners: node address + node port, load balancer address, ingress host:443,
    overrides, and the pod's DNS name while Kubernetes has not assigned an address yet."""
    override = {"brokers": [{"broker": 2, "advertisedHost": "kafka-2.example.net", "advertisedPort": 19094}]}
    cluster = make_cluster(
        CLIENT,
        {**NODEPORT, "configuration": override},
        LOADBALANCER,
        INGRESS,
        assigned={
            "demo-broker-1-external": Assigned(node_port=31001),
            "demo-broker-1-lb": Assigned(load_balancer="203.0.113.7"),
            "demo-broker-0-lb": Assigned(load_balancer="fd00::7"),
        },
    )
    broker = cluster.spec.brokers
    pod0 = "demo-broker-0.demo-broker.ns.svc"
    assert advertised_entries(cluster, broker, 0) == (
        f"EXTERNAL {pod0} 9094\nLB fd00::7 9095\nROUTED broker-0.example.com 443\n"
    )
    assert (
        advertised_entries(cluster, broker, 1)
        == "EXTERNAL - 31001\nLB 203.0.113.7 9095\nROUTED broker-1.example.com 443\n"
    )
    line2 = advertised_entries(cluster, broker, 2)
    assert line2.startswith("EXTERNAL kafka-2.example.net 19094\nLB demo-broker-2.demo-broker.ns.svc 9095\n")

    def advertised(pod: str, line: str | None, **env: str) -> str:
        path = tmp_path / pod
        if line is not None:
            path.write_text(line)
        args = run_script(tmp_path, serve_script(cluster, broker), pod, KOPFKA_ADVERTISED_FILE=str(path), **env)
        return next(a for a in args if a.startswith("advertised.listeners="))

    host1 = "demo-broker-1.demo-broker.ns.svc"
    assert advertised("demo-broker-1", advertised_entries(cluster, broker, 1), HOST_IP="192.0.2.10") == (
        f"advertised.listeners=CLIENT://{host1}:9092,REPLICATION://{host1}:9091,"
        "EXTERNAL://192.0.2.10:31001,LB://203.0.113.7:9095,ROUTED://broker-1.example.com:443"
    )
    assert "EXTERNAL://[fd00::10]:31001" in advertised(
        "demo-broker-1", advertised_entries(cluster, broker, 1), HOST_IP="fd00::10"
    )
    assert "LB://[fd00::7]:9095" in advertised("demo-broker-0", advertised_entries(cluster, broker, 0))
    # no line yet (a pod that started before the operator wrote it): the pod's DNS name
    assert advertised("demo-broker-4", None).endswith(
        "EXTERNAL://demo-broker-4.demo-broker.ns.svc:9094,LB://demo-broker-4.demo-broker.ns.svc:9095,"
        "ROUTED://demo-broker-4.demo-broker.ns.svc:9096"
    )
    # one line per broker that exists or is about to, none without external listeners
    info = [c for c in build_children(dataclasses.replace(cluster, broker_count=2)) if c["kind"] == "ConfigMap"]
    lines = {k for c in info for k in c["data"] if k.startswith("advertised.")}
    assert lines == {"advertised.0", "advertised.1"}
    # the node's address comes from the downward API, on brokers only
    env = build_children(cluster)[-1]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}} in env
    props = server_properties(cluster, broker)
    assert "listeners=CLIENT://:9092,EXTERNAL://:9094,LB://:9095,ROUTED://:9096,REPLICATION://:9091" in props
    assert "EXTERNAL:PLAINTEXT,LB:SSL,ROUTED:SSL" in props


def test_broker_certificates_name_the_external_addresses() -> None:
    cluster = make_cluster(
        CLIENT,
        LOADBALANCER,
        INGRESS,
        assigned={
            "demo-broker-1-lb": Assigned(load_balancer="203.0.113.7"),
            "demo-lb-bootstrap": Assigned(None, "lb.example.com"),
        },
    )
    hosts = node_hosts(cluster, cluster.spec.brokers, 1)
    assert {"203.0.113.7", "lb.example.com", "broker-1.example.com", "kafka.example.com"} <= set(hosts)
    assert "broker-0.example.com" not in hosts
    assert node_hosts(cluster, cluster.spec.controllers, 0) == node_hosts(
        make_cluster(CLIENT), cluster.spec.controllers, 0
    )  # type: ignore[arg-type]


def test_status_names_each_listeners_bootstrap_servers() -> None:
    spec = make_cluster(CLIENT, NODEPORT, LOADBALANCER, INGRESS).spec

    def service(name: str, node_port: int | None = None, lb: str | None = None) -> dict[str, Any]:
        svc: dict[str, Any] = {"metadata": {"name": name}, "spec": {"ports": [{"nodePort": node_port}]}}
        if lb:
            svc["status"] = {"loadBalancer": {"ingress": [{"hostname": lb}]}}
        return svc

    pods = [
        {"metadata": {"name": f"demo-broker-{i}"}, "status": {"hostIP": ip}}
        for i, ip in enumerate(["192.0.2.1", "192.0.2.2", "192.0.2.1"])
    ]
    pending = listeners_status("demo", NS, spec, Observed({}, pods, [service("demo-external-bootstrap")]))
    assert pending == [
        {"name": "CLIENT", "type": "internal", "bootstrapServers": "demo-bootstrap.ns.svc:9092"},
        {"name": "EXTERNAL", "type": "nodeport"},
        {"name": "LB", "type": "loadbalancer"},
        {"name": "ROUTED", "type": "ingress", "bootstrapServers": "kafka.example.com:443"},
    ]
    assigned = [service("demo-external-bootstrap", 30094), service("demo-lb-bootstrap", lb="lb.example.com")]
    ready = listeners_status("demo", NS, spec, Observed({}, pods, assigned))
    assert ready[1]["bootstrapServers"] == "192.0.2.1:30094,192.0.2.2:30094"
    assert ready[2]["bootstrapServers"] == "lb.example.com:9095"


# ---------------------------------------------------------------------------------------------
# A real node behind a port forward standing in for a node port


class Forwarder:
    """What kube-proxy does for a node port: TCP from `port` to the pod's listener port."""

    def __init__(self, port: int, target: int) -> None:
        self.target = target
        self.server = socket.create_server(("127.0.0.1", port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def node_behind_node_port(tmp_path: pathlib.Path) -> Iterator[int]:
    """A real kopfka node from the operator's server.properties of a nodeport cluster and the
    advertised.listeners its start script builds from the operator's line (node address
    127.0.0.1, node port = a forwarder to the node's EXTERNAL port). The in-cluster names and
    container ports exist only in Kubernetes: those entries are mapped to loopback ports, the
    external one is kept exactly as built. Yields the node port."""
    raw = raw_spec(CLIENT, NODEPORT, replicas=1)
    raw.update(mode="combined", controllers=None)
    raw["config"] = {
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
    }
    spec = parse_spec({k: v for k, v in raw.items() if v is not None})
    pool = spec.brokers
    ports = {name: free_port() for name in ("CLIENT", "EXTERNAL", "REPLICATION", "CONTROLLER")}
    node_port, http = free_port(), free_port()
    voters = f"0@127.0.0.1:{ports['CONTROLLER']}:{uuids.to_str(uuids.random_uuid())}"
    cluster_id = uuids.to_str(uuids.random_uuid())
    cluster = Cluster(
        "demo", NS, "uid", cluster_id, voters, spec, assigned={"demo-combined-0-external": Assigned(node_port)}
    )
    line = tmp_path / "advertised.0"
    line.write_text(advertised_entries(cluster, pool, 0))
    script = serve_script(cluster, pool)
    args = run_script(tmp_path, script, "demo-combined-0", KOPFKA_ADVERTISED_FILE=str(line), HOST_IP="127.0.0.1")
    built = next(a for a in args if a.startswith("advertised.listeners=")).partition("=")[2]
    entries = []
    for entry in built.split(","):
        name, _, address = entry.partition("://")
        if address.startswith("demo-combined-0.demo-combined.ns.svc:"):
            address = f"127.0.0.1:{ports[name]}"
        entries.append(f"{name}://{address}")
    assert entries[-1] == f"EXTERNAL://127.0.0.1:{node_port}"
    props = parse_properties(server_properties(cluster, pool))
    props.update(
        {
            "node.id": "0",
            "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
            "advertised.listeners": ",".join(entries),
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{ports['CONTROLLER']}",
            "log.dirs": str(tmp_path / "data"),
            "metadata.log.dir": str(tmp_path / "data"),
            "kopfka.http.listener": f"127.0.0.1:{http}",
            **FAST,
        }
    )
    config = tmp_path / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    cli = [sys.executable, "-m", "kopfka.cli.main"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    fmt = [*cli, "storage", "format", "--cluster-id", cluster_id, "--config", str(config), "-I", voters]
    done = subprocess.run(fmt, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    log = tmp_path / "server.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([*cli, "serve", "--config", str(config)], stdout=out, stderr=subprocess.STDOUT, env=env)
    forwarder = Forwarder(node_port, ports["EXTERNAL"])
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{http}/readyz", timeout=1) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        yield node_port
    finally:
        forwarder.close()
        proc.kill()
        proc.wait(10)


def test_a_client_reaches_a_real_node_only_through_its_node_port(node_behind_node_port: int) -> None:
    """Bootstrapping at the node port, the client is sent back to the node port (the broker's
    external advertised address), never to the listener's own port: every record goes
    through the forwarder and arrives."""
    bootstrap = f"127.0.0.1:{node_behind_node_port}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=20000)
    futures = [producer.send("outside", key=str(i).encode(), value=b"v") for i in range(20)]
    assert all(f.get(timeout=30).offset >= 0 for f in futures)
    brokers = producer._metadata.brokers()  # what Metadata advertised on EXTERNAL
    assert {(b.host, b.port) for b in brokers} == {("127.0.0.1", node_behind_node_port)}
    producer.close()
    consumer = KafkaConsumer(
        "outside", bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=15000
    )
    keys = set()
    for message in consumer:
        keys.add(message.key)
        if len(keys) == 20:
            break
    consumer.close()
    assert keys == {str(i).encode() for i in range(20)}


# ---------------------------------------------------------------------------------------------
# The reconcile against the kmock emulator (conftest.py)


@pytest.fixture
async def api(k8s: Emulator) -> AsyncIterator[KubeApi]:
    client = KubeApi(kopf.ConnectionInfo(server=k8s.server_url))
    yield client
    await client.close()


def body(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kopfka.io/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {"name": "demo", "namespace": NS},
        "spec": spec,
    }


async def names(api: KubeApi, kind: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in await api.list(kind, NS, "kopfka.io/listener"))


async def fresh(api: KubeApi) -> dict[str, Any]:
    obj = await api.get("KafkaCluster", NS, "demo")
    assert obj is not None
    return obj


async def test_reconcile_adds_scales_and_removes_external_services(api: KubeApi) -> None:
    spec = raw_spec(CLIENT)
    await reconcile(api, await api.create(NS, body(spec)), None)
    assert await names(api, "Service") == []

    # adding a nodeport listener: bootstrap + one Service per broker, addresses in the
    # brokers' cluster-info ConfigMap (the pod's DNS name until a node port is allocated)
    spec["listeners"] = [CLIENT, NODEPORT]
    await api.patch("KafkaCluster", NS, "demo", {"spec": spec})
    await reconcile(api, await fresh(api), None)
    per_broker = [f"demo-broker-{i}-external" for i in range(3)]
    assert await names(api, "Service") == sorted(["demo-external-bootstrap", *per_broker])
    info = await api.get("ConfigMap", NS, "demo-broker-config")
    assert info is not None
    assert info["data"]["advertised.1"] == "EXTERNAL demo-broker-1.demo-broker.ns.svc 9094\n"
    sts = await api.get("StatefulSet", NS, "demo-broker")
    assert sts is not None
    assert "${external}" in sts["spec"]["template"]["spec"]["containers"][0]["command"][2]

    # the API server allocates node ports (kmock does not: written here as it would); the next
    # reconcile advertises them and marks the running broker whose address changed for a restart
    port = {"name": "external", "port": 9094, "targetPort": 9094, "protocol": "TCP"}
    for i, svc in enumerate(["demo-external-bootstrap", *per_broker]):
        await api.patch("Service", NS, svc, {"spec": {"ports": [{**port, "nodePort": 30100 + i}]}})
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "demo-broker-1", "labels": {"kopfka.io/cluster": "demo"}},
    }
    pod["spec"] = {"containers": [{"name": "kopfka", "image": "kopfka:dev"}]}
    await api.create(NS, pod)
    await reconcile(api, await fresh(api), None)
    info = await api.get("ConfigMap", NS, "demo-broker-config")
    assert info is not None
    assert [info["data"][f"advertised.{i}"] for i in range(3)] == [f"EXTERNAL - {30101 + i}\n" for i in range(3)]
    marked = await api.get("Pod", NS, "demo-broker-1")
    assert marked is not None and marked["metadata"]["annotations"][MANUAL_ROLL_ANNOTATION] == "true"
    await api.patch("Pod", NS, "demo-broker-1", {"status": {"hostIP": "192.0.2.9"}}, subresource="status")
    await reconcile(api, await fresh(api), None)
    status = (await fresh(api))["status"]
    assert {"name": "EXTERNAL", "type": "nodeport", "bootstrapServers": "192.0.2.9:30100"} in status["listeners"]

    # scale-down: the broker's Service stays while its pod may still run, then goes
    spec["brokers"]["replicas"] = 2
    await api.patch("KafkaCluster", NS, "demo", {"spec": spec})
    await api.patch(
        "KafkaCluster", NS, "demo", {"status": {"scale": {"broker": {"dataShrinkTo": 2}}}}, subresource="status"
    )
    await reconcile(api, await fresh(api), None)
    sts = await api.get("StatefulSet", NS, "demo-broker")
    assert sts is not None and sts["spec"]["replicas"] == 2
    assert "demo-broker-2-external" in await names(api, "Service")
    await reconcile(api, await fresh(api), None)
    assert await names(api, "Service") == [
        "demo-broker-0-external",
        "demo-broker-1-external",
        "demo-external-bootstrap",
    ]

    # an ingress listener instead: its Services and Ingresses, the nodeport ones deleted;
    # then no external listener at all: all deleted, the brokers' ConfigMap as before
    spec["listeners"] = [CLIENT, INGRESS]
    await api.patch("KafkaCluster", NS, "demo", {"spec": spec})
    await reconcile(api, await fresh(api), None)
    routed = ["demo-broker-0-routed", "demo-broker-1-routed", "demo-routed-bootstrap"]
    assert await names(api, "Service") == routed
    assert await names(api, "Ingress") == routed
    spec["listeners"] = [CLIENT]
    await api.patch("KafkaCluster", NS, "demo", {"spec": spec})
    await reconcile(api, await fresh(api), None)
    assert await names(api, "Service") == [] and await names(api, "Ingress") == []
    # (the advertised lines of the ConfigMap go too: server-side apply drops keys no longer
    # rendered, which kmock's merge-patch apply does not; the rendering is checked above)


async def test_marking_the_quorum_formed_keeps_the_brokers_addresses(api: KubeApi) -> None:
    """Combined mode: the voters' ConfigMap is the brokers' too; the quorum-formed mark, written
    outside a full reconcile, must not put the pod DNS names back over the node ports."""
    spec = raw_spec(CLIENT, NODEPORT, replicas=1)
    spec["mode"] = "combined"
    del spec["controllers"]
    await reconcile(api, await api.create(NS, body(spec)), None)
    port = {"name": "external", "port": 9094, "targetPort": 9094, "protocol": "TCP", "nodePort": 30200}
    await api.patch("Service", NS, "demo-combined-0-external", {"spec": {"ports": [port]}})
    await reconcile(api, await fresh(api), None)
    info = await api.get("ConfigMap", NS, "demo-combined-config")
    assert info is not None and info["data"]["advertised.0"] == "EXTERNAL - 30200\n"
    current = await fresh(api)
    current["status"]["quorumFormed"] = True
    await mark_quorum_formed(api, current, parse_spec(spec))
    info = await api.get("ConfigMap", NS, "demo-combined-config")
    assert info is not None and info["data"]["quorum.formed"] == "true"
    assert info["data"]["advertised.0"] == "EXTERNAL - 30200\n"
