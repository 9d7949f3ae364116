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
