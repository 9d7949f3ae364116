"""PodDisruptionBudget per role and the pods' ServiceAccount."""

from __future__ import annotations

from ..naming import pool_name, selector_labels, service_account_name
from ..spec import Pool
from .common import Cluster, Manifest, metadata


def disruption_budget(cluster: Cluster, pool: Pool) -> Manifest:
    """One voluntary disruption per role at a time: a 3-voter quorum keeps its majority and
    replicated partitions keep min.insync.replicas with RF 3."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(cluster, pool_name(cluster.name, pool.role), pool),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": selector_labels(cluster.name, pool.role)},
        },
    }


def service_account(cluster: Cluster) -> Manifest:
    """The nodes never call the Kubernetes API, so no token is mounted."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(cluster, service_account_name(cluster.name)),
        "automountServiceAccountToken": False,
    }
