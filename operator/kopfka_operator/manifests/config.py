"""server.properties per role, and the per-pod values the container computes at start.

One ConfigMap per static-config revision serves every pod of a StatefulSet: the keys that differ
per pod (`node.id`, `advertised.listeners`) are passed as `--override` by the container's shell
wrapper, which derives them from the pod name (downward API), as docs/runtime-contract.md
allows. The revision is a hash of the static part only: dynamic keys (dynamic_config.py) are
rendered too but never change the revision, because the operator applies them live.
"""

from __future__ import annotations

import hashlib

from ..dynamic_config import is_dynamic
from ..naming import (
    CONTROLLER_PORT,
    HTTP_PORT,
    LABEL_CONFIG_REVISION,
    QUORUM_FORMED_KEY,
    REPLICATION_PORT,
    advertised_key,
    config_map_name,
    data_dir,
    pod_host,
    server_config_map_name,
)
from ..spec import Pool
from .common import Cluster, Manifest, metadata
from .external import advertised_entries
from .security import CONTROLLER_LISTENER, REPLICATION_LISTENER, internal_protocol, security_properties

CLUSTER_ID_KEY = "cluster.id"
INITIAL_CONTROLLERS_KEY = "initial.controllers"
RELEASE_VERSION_KEY = "release.version"


def quorum_bootstrap_servers(cluster: Cluster) -> str:
    """The initial voters' endpoints: a bootstrap list only (nodes learn the whole voter set from
    the quorum), kept the same as controllers are added or removed, so scaling the quorum
    changes no node's static config and rolls nothing."""
    if cluster.initial_controllers:
        return ",".join(entry.split("@", 1)[1].rsplit(":", 1)[0] for entry in cluster.initial_controllers.split(","))
    voters = cluster.spec.voters
    return ",".join(
        f"{pod_host(cluster.name, voters.role, i, cluster.namespace)}:{CONTROLLER_PORT}" for i in range(voters.replicas)
    )


def listener_ports(cluster: Cluster, pool: Pool) -> dict[str, int]:
    """Listener name -> port for one role, operator-owned listeners included."""
    ports: dict[str, int] = {}
    if pool.is_broker:
        ports.update({lst.name: lst.port for lst in cluster.spec.listeners})
        ports[REPLICATION_LISTENER] = REPLICATION_PORT
    if pool.is_voter:
        ports[CONTROLLER_LISTENER] = CONTROLLER_PORT
    return ports


def advertised_listeners_template(cluster: Cluster, pool: Pool) -> str:
    """`advertised.listeners` with `${host}` left for the pod's shell wrapper to expand; the
    external listeners' entries are `$external`, which the wrapper reads from the pod's line
    of the cluster-info ConfigMap (manifests/external.py)."""
    external = {lst.name for lst in cluster.spec.external_listeners} if pool.is_broker else set()
    entries = [
        f"{name}://${{host}}:{port}" for name, port in listener_ports(cluster, pool).items() if name not in external
    ]
    if external:
        entries.append("${external}")
    return ",".join(entries)


def server_properties(cluster: Cluster, pool: Pool, *, static_only: bool = False) -> str:
    ports = listener_ports(cluster, pool)
    protocols = {lst.name: lst.protocol for lst in cluster.spec.listeners}
    protocols[REPLICATION_LISTENER] = protocols[CONTROLLER_LISTENER] = internal_protocol(cluster)
    owned: dict[str, str] = {
        "process.roles": "broker,controller" if pool.role == "combined" else pool.role,
        "listeners": ",".join(f"{name}://:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": ",".join(
            f"{name}:{protocols.get(name, 'PLAINTEXT')}"
            for name in [
                *ports,
                *([CONTROLLER_LISTENER] if CONTROLLER_LISTENER not in ports else []),
            ]
        ),
        "controller.listener.names": CONTROLLER_LISTENER,
        "controller.quorum.bootstrap.servers": quorum_bootstrap_servers(cluster),
        "log.dirs": ",".join(data_dir(v.id) for v in pool.volumes),
        "metadata.log.dir": data_dir(pool.metadata_volume.id),
        "kopfka.http.listener": f"0.0.0.0:{HTTP_PORT}",
    }
    if pool.is_broker:
        owned["inter.broker.listener.name"] = REPLICATION_LISTENER
    owned.update(security_properties(cluster, pool))
    lines = [
        f"# Rendered by kopfka-operator for KafkaCluster {cluster.namespace}/{cluster.name} "
        f"({pool.role}); edits are overwritten.",
        "# node.id and advertised.listeners are per pod: passed with --override at start.",
    ]
    lines += [f"{key}={value}" for key, value in owned.items()]
    keys = sorted(k for k in cluster.spec.config if not (static_only and is_dynamic(k)))
    if keys:
        lines.append("# spec.config")
        lines += [f"{key}={cluster.spec.config[key]}" for key in keys]
    return "\n".join(lines) + "\n"


def config_hash(text: str) -> str:
    """Stamped on the pod template so a later rolling restart can tell stale pods apart."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def config_revision(cluster: Cluster, pool: Pool) -> str:
    """The static-config revision: what a change of needs a restart of the pods."""
    return config_hash(server_properties(cluster, pool, static_only=True))[:10]


def server_config_map(cluster: Cluster, pool: Pool) -> Manifest:
    revision = config_revision(cluster, pool)
    meta = metadata(cluster, server_config_map_name(cluster.name, pool.role, revision), pool)
    meta["labels"][LABEL_CONFIG_REVISION] = revision
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "data": {"server.properties": server_properties(cluster, pool)},
    }


def config_map(cluster: Cluster, pool: Pool) -> Manifest:
    """The cluster's ids (kept here too, so they survive a lost KafkaCluster status) and the
    quorum-formed mark the format script reads; mounted live, read at format time only."""
    data = {CLUSTER_ID_KEY: cluster.cluster_id}
    if pool.is_broker:
        for ordinal in range(cluster.advertised_count):
            data[advertised_key(ordinal)] = advertised_entries(cluster, pool, ordinal)
    if pool.is_voter:
        data[INITIAL_CONTROLLERS_KEY] = cluster.initial_controllers
        if cluster.quorum_formed:
            data[QUORUM_FORMED_KEY] = "true"
        if cluster.spec.metadata_version:
            # only a fresh quorum's first format reads it (bootstrap.checkpoint); later changes
            # of spec.metadataVersion are applied by the roller with UpdateFeatures
            data[RELEASE_VERSION_KEY] = cluster.spec.metadata_version
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(cluster, config_map_name(cluster.name, pool.role), pool),
        "data": data,
    }
