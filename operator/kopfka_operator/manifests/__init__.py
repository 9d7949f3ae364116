"""Pure functions from a validated KafkaCluster to the Kubernetes objects that run it.

No I/O here: the handlers diff these dicts against the cluster, and the tests validate every
one of them with kubernetes-validate.
"""

from __future__ import annotations

from .common import Cluster, Manifest, owner_reference
from .config import config_map, server_config_map, server_properties
from .policy import disruption_budget, service_account
from .services import bootstrap_servers, bootstrap_service, headless_service
from .statefulset import stateful_set


def build_children(cluster: Cluster) -> list[Manifest]:
    """Every child object, in a safe creation order (config before the pods that mount it)."""
    children: list[Manifest] = [service_account(cluster)]
    for pool in cluster.spec.pools:
        children.append(config_map(cluster, pool))
        children.append(server_config_map(cluster, pool))
        children.append(headless_service(cluster, pool))
    children.append(bootstrap_service(cluster))
    for pool in cluster.spec.pools:
        children.append(disruption_budget(cluster, pool))
        children.append(stateful_set(cluster, pool))
    return children


__all__ = [
    "Cluster",
    "Manifest",
    "bootstrap_servers",
    "build_children",
    "config_map",
    "owner_reference",
    "server_config_map",
    "server_properties",
    "stateful_set",
]
