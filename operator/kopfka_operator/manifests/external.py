"""External listeners (type nodeport, loadbalancer, ingress): their Services and Ingresses, and
the address each broker advertises on them.

Clients outside the cluster bootstrap through one address per listener, then connect to each
broker at the address the broker advertises, so every broker gets its own Service (selecting its
pod by the StatefulSet's pod-name label) next to the listener's bootstrap Service:

- nodeport: Services of type NodePort; a broker advertises the address of the node its pod runs
  on (the downward API's `status.hostIP`, read when the pod starts, so a pod moved to another
  node needs nothing from the operator) and its Service's node port, which the API server
  allocates once and the operator reads back;
- loadbalancer: Services of type LoadBalancer; a broker advertises its Service's load balancer
  address once the cloud has assigned one (until then its pod DNS name), and is restarted when
  it appears;
- ingress: ClusterIP Services behind Ingresses with TLS passthrough (routed by SNI, so tls is
  required), one host per broker from `brokerHostTemplate`, advertised on port 443.

`configuration.brokers[].advertisedHost/advertisedPort` override any of these. The addresses
go into the broker pool's cluster-info ConfigMap (`advertised.<ordinal>`: one line
`LISTENER HOST PORT` per external listener, `-` as the host for the node's address), which the
container's start script turns into `advertised.listeners`.
"""

from __future__ import annotations

from typing import Any

from ..naming import (
    LABEL_LISTENER,
    POD_NAME_LABEL,
    external_bootstrap_name,
    external_broker_name,
    listener_label,
    node_id_base,
    pod_host,
    pool_name,
    selector_labels,
)
from ..spec import INGRESS_PORT, Listener, Pool
from .common import Assigned, Cluster, Manifest, metadata

NODE_ADDRESS = "-"  # in an advertised.<ordinal> line: the pod's node address (HOST_IP)
SERVICE_TYPES = {"nodeport": "NodePort", "loadbalancer": "LoadBalancer", "ingress": "ClusterIP"}
PASSTHROUGH_ANNOTATIONS = {
    # ingress-nginx (needs --enable-ssl-passthrough); other controllers have their own
    "nginx.ingress.kubernetes.io/ssl-passthrough": "true",
    "nginx.ingress.kubernetes.io/backend-protocol": "HTTPS",
}


def broker_host(listener: Listener, node_id: int) -> str | None:
    """An ingress listener's host for one broker (its override, else the template)."""
    override = listener.external.override(node_id)
    if override is not None and override.host:
        return override.host
    template = listener.external.broker_host_template
    return template.replace("{id}", str(node_id)) if template else None


def _service(
    cluster: Cluster, listener: Listener, name: str, selector: dict[str, str], node_port: int | None
) -> Manifest:
    meta = metadata(cluster, name, cluster.spec.brokers)
    meta["labels"][LABEL_LISTENER] = listener_label(listener.name)
    port: dict[str, Any] = {
        "name": listener_label(listener.name),
        "port": listener.port,
        "targetPort": listener.port,
        "protocol": "TCP",
    }
    if node_port is not None and listener.type == "nodeport":
        port["nodePort"] = node_port
    spec: dict[str, Any] = {"type": SERVICE_TYPES[listener.type], "selector": selector, "ports": [port]}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def _ingress(cluster: Cluster, listener: Listener, name: str, host: str) -> Manifest:
    meta = metadata(cluster, name, cluster.spec.brokers)
    meta["labels"][LABEL_LISTENER] = listener_label(listener.name)
    meta["annotations"] = dict(PASSTHROUGH_ANNOTATIONS)
    backend = {"service": {"name": name, "port": {"number": listener.port}}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": meta,
        "spec": {
            "ingressClassName": listener.external.ingress_class,
            "tls": [{"hosts": [host]}],
            "rules": [
                {
                    "host": host,
                    "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]},
                }
            ],
        },
    }


def external_children(cluster: Cluster, count: int) -> list[Manifest]:
    """Every external listener's bootstrap Service and the Services of brokers 0..count-1 (the
    pods that exist or are about to), with their Ingresses for type ingress."""
    pool = cluster.spec.brokers
    out: list[Manifest] = []
    for listener in cluster.spec.external_listeners:
        name = external_bootstrap_name(cluster.name, listener.name)
        selector = selector_labels(cluster.name, pool.role)
        out.append(_service(cluster, listener, name, selector, listener.external.bootstrap_node_port))
        if listener.type == "ingress" and listener.external.bootstrap_host:
            out.append(_ingress(cluster, listener, name, listener.external.bootstrap_host))
        for ordinal in range(count):
            node_id = node_id_base(pool.role) + ordinal
            name = external_broker_name(cluster.name, pool.role, ordinal, listener.name)
            override = listener.external.override(node_id)
            pod = {**selector, POD_NAME_LABEL: f"{pool_name(cluster.name, pool.role)}-{ordinal}"}
            out.append(_service(cluster, listener, name, pod, override.node_port if override else None))
            host = broker_host(listener, node_id)
            if listener.type == "ingress" and host:
                out.append(_ingress(cluster, listener, name, host))
    return out


def broker_address(cluster: Cluster, listener: Listener, ordinal: int) -> tuple[str | None, int | None]:
    """(host, port) a broker advertises on an external listener; host None: the node's address
    (nodeport); None for either when Kubernetes has not assigned it yet."""
    pool = cluster.spec.brokers
    node_id = node_id_base(pool.role) + ordinal
    override = listener.external.override(node_id)
    assigned = cluster.assigned.get(external_broker_name(cluster.name, pool.role, ordinal, listener.name), Assigned())
    host: str | None
    port: int | None
    if listener.type == "nodeport":
        host, port = None, assigned.node_port
    elif listener.type == "loadbalancer":
        host, port = assigned.load_balancer, listener.port
    else:
        host, port = broker_host(listener, node_id), INGRESS_PORT
    if override is not None:
        host = override.advertised_host or host
        port = override.advertised_port or port
    return host, port


def advertised_entries(cluster: Cluster, pool: Pool, ordinal: int) -> str:
    """The `advertised.<ordinal>` file: `LISTENER HOST PORT` per external listener. An address
    not assigned yet is the pod's DNS name and the listener's port (reachable in the cluster
    only) until it is; the operator restarts the broker when its line changes."""
    lines = []
    for listener in cluster.spec.external_listeners:
        host, port = broker_address(cluster, listener, ordinal)
        if port is None or (host is None and listener.type != "nodeport"):
            host, port = pod_host(cluster.name, pool.role, ordinal, cluster.namespace), listener.port
        lines.append(f"{listener.name} {host or NODE_ADDRESS} {port}\n")
    return "".join(lines)


def external_hosts(cluster: Cluster, ordinal: int) -> list[str]:
    """Names a broker's certificate needs for its external listeners: its own advertised hosts
    and the listeners' bootstrap addresses (a client bootstrapping there may land on any
    broker). A node's address (nodeport without advertisedHost) is not known in advance: such
    clients verify against advertisedHost, or not at all."""
    hosts: list[str] = []
    for listener in cluster.spec.external_listeners:
        host, _ = broker_address(cluster, listener, ordinal)
        bootstrap = cluster.assigned.get(external_bootstrap_name(cluster.name, listener.name), Assigned())
        for name in (host, listener.external.bootstrap_host, bootstrap.load_balancer):
            if name and name not in hosts:
                hosts.append(name)
    return hosts


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def external_bootstrap(cluster: Cluster, listener: Listener, node_addresses: dict[int, str], count: int) -> str | None:
    """What a client outside the cluster puts in bootstrap.servers for one external listener,
    None while Kubernetes has not assigned it. `node_addresses`: ordinal -> the host IP of the
    node each broker pod runs on (for nodeport)."""
    bootstrap = cluster.assigned.get(external_bootstrap_name(cluster.name, listener.name), Assigned())
    if listener.type == "ingress":
        return _join(listener.external.bootstrap_host or "", INGRESS_PORT)
    if listener.type == "loadbalancer":
        return _join(bootstrap.load_balancer, listener.port) if bootstrap.load_balancer else None
    if bootstrap.node_port is None:
        return None
    hosts: list[str] = []
    for ordinal in range(count):
        host, _ = broker_address(cluster, listener, ordinal)
        host = host or node_addresses.get(ordinal)
        if host and host not in hosts:
            hosts.append(host)
    return ",".join(_join(h, bootstrap.node_port) for h in hosts) or None
