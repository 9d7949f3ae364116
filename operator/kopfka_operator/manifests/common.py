"""The rendering input (one KafkaCluster plus its generated ids) and shared metadata helpers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import API_VERSION
from ..naming import cluster_labels, role_labels
from ..spec import ClusterSpec, Pool

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Cluster:
    """Everything the manifests depend on: identity, generated ids and the validated spec."""

    name: str
    namespace: str
    uid: str
    cluster_id: str
    initial_controllers: str
    spec: ClusterSpec
    quorum_formed: bool = False
    # Role -> version of its certificates Secret (security/certificates.py): on the pod
    # template, so certificates issued again roll the pods.
    certs_versions: Mapping[str, str] = field(default_factory=dict)
    # Service name -> what the API server assigned to an external listener's Service (node
    # port, load balancer address): read back after applying them (manifests/external.py).
    assigned: Mapping[str, Assigned] = field(default_factory=dict)
    # Broker pods that exist or are about to (the larger of desired and running): each needs
    # its external Services and addresses; None: the pool's replicas.
    broker_count: int | None = None

    @property
    def advertised_count(self) -> int:
        """How many brokers get an `advertised.<ordinal>` line (none without external listeners)."""
        if not self.spec.external_listeners:
            return 0
        return self.spec.brokers.replicas if self.broker_count is None else self.broker_count


@dataclass(frozen=True)
class Assigned:
    """What Kubernetes filled in on a Service the operator created."""

    node_port: int | None = None
    load_balancer: str | None = None  # status.loadBalancer.ingress[0] ip or hostname

    @classmethod
    def of(cls, service: Mapping[str, Any]) -> Assigned:
        ports = (service.get("spec") or {}).get("ports") or []
        node_port = ports[0].get("nodePort") if ports else None
        ingress = (((service.get("status") or {}).get("loadBalancer") or {}).get("ingress")) or []
        address = (ingress[0].get("ip") or ingress[0].get("hostname")) if ingress else None
        return cls(node_port if isinstance(node_port, int) else None, address or None)


def owner_reference(cluster: Cluster) -> dict[str, Any]:
    """Makes every child garbage-collected with its KafkaCluster (PVCs excepted: see handlers)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "KafkaCluster",
        "name": cluster.name,
        "uid": cluster.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def metadata(cluster: Cluster, name: str, pool: Pool | None = None) -> dict[str, Any]:
    labels = role_labels(cluster.name, pool.role) if pool else cluster_labels(cluster.name)
    return {
        "name": name,
        "namespace": cluster.namespace,
        "labels": labels,
        "ownerReferences": [owner_reference(cluster)],
    }
