"""Headless Services (stable pod DNS per role) and the clients' bootstrap Service."""

from __future__ import annotations

from ..naming import HTTP_PORT, REPLICATION_PORT, bootstrap_service_name, pool_name, selector_labels
from ..spec import ClusterSpec, Pool
from .common import Cluster, Manifest, metadata
from .config import listener_ports
from .security import REPLICATION_LISTENER


def _port(name: str, port: int) -> dict[str, object]:
    return {
        "name": name.lower().replace("_", "-"),
        "port": port,
        "targetPort": port,
        "protocol": "TCP",
    }


def headless_service(cluster: Cluster, pool: Pool) -> Manifest:
    """Publishes not-ready pods too: controllers must resolve each other to form the quorum
    that makes them Ready in the first place."""
    ports = [_port(name, port) for name, port in listener_ports(cluster, pool).items()]
    ports.append(_port("http", HTTP_PORT))
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(cluster, pool_name(cluster.name, pool.role), pool),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector_labels(cluster.name, pool.role),
            "ports": ports,
        },
    }


def bootstrap_service(cluster: Cluster) -> Manifest:
    """The client listeners; for a secured cluster also REPLICATION, where the operator
    connects with its certificate (mutual TLS: nothing without a cluster-CA certificate gets in)."""
    brokers = cluster.spec.brokers
    ports = [_port(lst.name, lst.port) for lst in cluster.spec.listeners]
    if cluster.spec.secured:
        ports.append(_port(REPLICATION_LISTENER, REPLICATION_PORT))
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(cluster, bootstrap_service_name(cluster.name)),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(cluster.name, brokers.role),
            "ports": ports,
        },
    }


def bootstrap_servers(name: str, namespace: str, spec: ClusterSpec) -> str:
    """What clients put in bootstrap.servers (inside the Kubernetes cluster)."""
    host = f"{bootstrap_service_name(name)}.{namespace}.svc"
    return ",".join(f"{host}:{lst.port}" for lst in spec.listeners)


def operator_bootstrap(name: str, namespace: str, spec: ClusterSpec) -> str:
    """Where the operator's admin connections go: the client listeners of an unsecured cluster,
    the REPLICATION listener (mutual TLS, the operator's certificate) of a secured one."""
    if spec.secured:
        return f"{bootstrap_service_name(name)}.{namespace}.svc:{REPLICATION_PORT}"
    return bootstrap_servers(name, namespace, spec)
