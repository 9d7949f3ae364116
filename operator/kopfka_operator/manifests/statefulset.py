"""The StatefulSet of one role: JBOD claims, the format-storage init container, the kopfka node.

Design points the broker contract dictates:
- node.id = role base + pod ordinal, computed by a tiny POSIX-sh wrapper from the pod name
  (downward API), so a single pod template serves every ordinal;
- `updateStrategy: OnDelete`: the operator, not the StatefulSet controller, decides restarts;
- `podManagementPolicy: Parallel`: a controller is Ready only once a quorum exists, so starting
  them one at a time (OrderedReady) would deadlock;
- the init container runs `kopfka storage format --ignore-formatted` on every start: it is a
  no-op on disks already formatted for this cluster and node, and fails (with the broker's
  message as the termination message) on a disk from another cluster.
"""

from __future__ import annotations

import copy
import json
import shlex
from typing import Any

from ..naming import (
    ADVERTISED_PREFIX,
    CLUSTER_INFO_DIR,
    CONFIG_DIR,
    CONFIG_FILE,
    HTTP_PORT,
    LABEL_VOLUME,
    QUORUM_FORMED_KEY,
    TLS_DIR,
    certs_secret_name,
    config_map_name,
    data_dir,
    node_id_base,
    pool_name,
    role_labels,
    selector_labels,
    server_config_map_name,
    service_account_name,
    volume_name,
)
from ..roll.plan import POD_HASH_ANNOTATION
from ..spec import Pool
from .common import Cluster, Manifest, metadata
from .config import (
    RELEASE_VERSION_KEY,
    advertised_listeners_template,
    config_hash,
    config_revision,
    listener_ports,
)
from .external import NODE_ADDRESS
from .security import KEYSTORE_TEMPLATE

CERTS_VERSION_ANNOTATION = "kopfka.io/certs-version"
SECRET_MODE = 0o440  # key material: owner and group (fsGroup) only

CONTAINER = "kopfka"
INIT_CONTAINER = "format-storage"
RUN_AS = 1000
POD_INFO_ENV = [
    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
]


def _preamble(cluster: Cluster, pool: Pool) -> str:
    """Shell lines setting $ordinal, $node_id and $host from the pod name."""
    headless = pool_name(cluster.name, pool.role)
    return (
        "set -eu\n"
        'ordinal="${POD_NAME##*-}"\n'
        f"node_id=$(({node_id_base(pool.role)} + ordinal))\n"
        f'host="${{POD_NAME}}.{headless}.${{POD_NAMESPACE}}.svc"\n'
    )


def format_script(cluster: Cluster, pool: Pool) -> str:
    """The format-storage command. Initial voters format with the pre-generated voter set, but
    only until the quorum has formed: after that an empty metadata disk means the disk was lost,
    and formatting it under the old directory id would let the node vote with an empty log
    (KIP-853). It formats with a new directory id instead and rejoins by auto-join. Voters
    added later and brokers join an existing quorum, so they pass no voter set."""
    script = _preamble(cluster, pool)
    if pool.is_voter:
        initial = len(cluster.initial_controllers.split(",")) if cluster.initial_controllers else 0
        formed = f"{CLUSTER_INFO_DIR}/{QUORUM_FORMED_KEY}"
        script += (
            f'if [ "$ordinal" -lt {initial} ] && [ ! -e "${{KOPFKA_QUORUM_FORMED_FILE:-{formed}}}" ]; then\n'
            f"  set -- --initial-controllers {shlex.quote(cluster.initial_controllers)}\n"
            "else\n"
            "  set -- --no-initial-controllers\n"
            "fi\n"
            f'release="${{KOPFKA_RELEASE_VERSION_FILE:-{CLUSTER_INFO_DIR}/{RELEASE_VERSION_KEY}}}"\n'
            'if [ -s "$release" ]; then set -- "$@" --release-version "$(cat "$release")"; fi\n'
        )
    else:
        script += "set --\n"
    return script + (
        f"exec kopfka storage format --cluster-id {shlex.quote(cluster.cluster_id)} "
        f'--config {CONFIG_FILE} --override "node.id=$node_id" --ignore-formatted "$@"\n'
    )


def _external_script(cluster: Cluster, pool: Pool) -> str:
    """Sets $external, the external listeners' advertised.listeners entries, from the pod's line
    of the cluster-info ConfigMap (manifests/external.py); the pod's DNS name until there is one."""
    listeners = cluster.spec.external_listeners if pool.is_broker else ()
    if not listeners:
        return ""
    fallback = ",".join(f"{lst.name}://${{host}}:{lst.port}" for lst in listeners)
    return (
        f'external="{fallback}"\n'
        f'lines="${{KOPFKA_ADVERTISED_FILE:-{CLUSTER_INFO_DIR}/{ADVERTISED_PREFIX}$ordinal}}"\n'
        'if [ -s "$lines" ]; then\n'
        '  external=""\n'
        "  while read -r lname lhost lport; do\n"
        f'    if [ "$lhost" = "{NODE_ADDRESS}" ]; then lhost="$HOST_IP"; fi\n'
        '    case "$lhost" in *:*) lhost="[$lhost]" ;; esac\n'
        '    external="${external:+$external,}$lname://$lhost:$lport"\n'
        '  done < "$lines"\n'
        "fi\n"
    )


def serve_script(cluster: Cluster, pool: Pool) -> str:
    rack = ""
    if pool.is_broker and cluster.spec.rack_topology_key:
        # the node's topology label, copied onto the pod at scheduling (downward API env)
        rack = 'if [ -n "${KOPFKA_RACK:-}" ]; then set -- --override "broker.rack=$KOPFKA_RACK"; else set --; fi\n'
    return (
        _preamble(cluster, pool)
        + rack
        + _external_script(cluster, pool)
        + (
            f"exec kopfka serve --config {CONFIG_FILE} "
            f'--override "node.id=$node_id" '
            f'--override "advertised.listeners={advertised_listeners_template(cluster, pool)}"'
            + (f' --override "ssl.keystore.location={KEYSTORE_TEMPLATE}"' if cluster.spec.secured else "")
            + (' "$@"' if rack else "")
            + "\n"
        )
    )


def _mounts(cluster: Cluster, pool: Pool) -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = [
        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "cluster-info", "mountPath": CLUSTER_INFO_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    if cluster.spec.secured:
        mounts.append({"name": "tls", "mountPath": TLS_DIR, "readOnly": True})
    mounts += [{"name": volume_name(v.id), "mountPath": data_dir(v.id)} for v in pool.volumes]
    return mounts


def _security_context() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }


def _containers(cluster: Cluster, pool: Pool) -> tuple[list[Manifest], list[Manifest]]:
    spec = cluster.spec

    env = copy.deepcopy(POD_INFO_ENV)
    if pool.is_broker and any(lst.type == "nodeport" for lst in spec.listeners):
        # the node's address, advertised on nodeport listeners (manifests/external.py)
        env.append({"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}})
    if pool.is_broker and spec.rack_topology_key:
        env.append(
            {
                "name": "KOPFKA_RACK",
                "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{spec.rack_topology_key}']"}},
            }
        )

    def common() -> dict[str, Any]:
        """Fresh dicts per container: the two must not alias each other's lists."""
        return {
            "image": spec.image,
            "imagePullPolicy": spec.image_pull_policy,
            "env": copy.deepcopy(env),
            "volumeMounts": _mounts(cluster, pool),
            "securityContext": _security_context(),
        }

    init = {
        "name": INIT_CONTAINER,
        **common(),
        "command": ["/bin/sh", "-c", format_script(cluster, pool)],
        # The broker's error ("dir X is formatted for cluster Y") lands in the pod status,
        # where the operator picks it up for the KafkaCluster's Warning condition.
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    ports = [
        {"name": name.lower().replace("_", "-"), "containerPort": port, "protocol": "TCP"}
        for name, port in listener_ports(cluster, pool).items()
    ]
    ports.append({"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"})
    main = {
        "name": CONTAINER,
        **common(),
        "command": ["/bin/sh", "-c", serve_script(cluster, pool)],
        "ports": ports,
        # Ready only in the RUNNING state (or, controller-only, once in the quorum).
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "http"},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        # /healthz answers while the event loop lives, log recovery included; the slack
        # (10 x 30 s) only catches a wedged process, never a slow start.
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "http"},
            "initialDelaySeconds": 60,
            "periodSeconds": 30,
            "timeoutSeconds": 10,
            "failureThreshold": 10,
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if pool.resources:
        init["resources"] = copy.deepcopy(dict(pool.resources))
        main["resources"] = copy.deepcopy(dict(pool.resources))
    return [init], [main]


def _claim(cluster: Cluster, pool: Pool, volume_id: int, size: str, storage_class: str | None) -> Manifest:
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    }
    if storage_class:
        claim_spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": volume_name(volume_id),
            "labels": {**role_labels(cluster.name, pool.role), LABEL_VOLUME: str(volume_id)},
        },
        "spec": claim_spec,
    }


def pod_template(cluster: Cluster, pool: Pool) -> Manifest:
    spec = cluster.spec
    tmpl = spec.pod_template
    annotations = dict(tmpl.annotations)
    annotations["kopfka.io/config-hash"] = config_revision(cluster, pool)
    if spec.secured:
        annotations[CERTS_VERSION_ANNOTATION] = cluster.certs_versions.get(pool.role, "")
    if spec.metrics_enabled:
        annotations.update(
            {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(HTTP_PORT),
                "prometheus.io/path": "/metrics",
            }
        )
    init, main = _containers(cluster, pool)
    pod: dict[str, Any] = {
        "serviceAccountName": service_account_name(cluster.name),
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": tmpl.termination_grace_period_seconds,
        "securityContext": {
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "fsGroup": RUN_AS,
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "initContainers": init,
        "containers": main,
        "volumes": [
            {
                "name": "config",
                "configMap": {"name": server_config_map_name(cluster.name, pool.role, config_revision(cluster, pool))},
            },
            {"name": "cluster-info", "configMap": {"name": config_map_name(cluster.name, pool.role)}},
            {"name": "tmp", "emptyDir": {}},
        ],
    }
    if spec.secured:
        secret = {"secretName": certs_secret_name(cluster.name, pool.role), "defaultMode": SECRET_MODE}
        pod["volumes"].append({"name": "tls", "secret": secret})
    if spec.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": name} for name in spec.image_pull_secrets]
    if tmpl.affinity:
        pod["affinity"] = dict(tmpl.affinity)
    if tmpl.tolerations:
        pod["tolerations"] = [dict(t) for t in tmpl.tolerations]
    if tmpl.node_selector:
        pod["nodeSelector"] = dict(tmpl.node_selector)
    if tmpl.priority_class_name:
        pod["priorityClassName"] = tmpl.priority_class_name
    spread = [dict(c) for c in tmpl.topology_spread_constraints]
    if pool.is_broker and spec.rack_topology_key:
        spread.append(
            {
                "maxSkew": 1,
                "topologyKey": spec.rack_topology_key,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": selector_labels(cluster.name, pool.role)},
            }
        )
    if spread:
        pod["topologySpreadConstraints"] = spread
    return {
        "metadata": {
            "labels": {**tmpl.labels, **role_labels(cluster.name, pool.role)},
            "annotations": annotations,
        },
        "spec": pod,
    }


# Which volume holds the metadata log (metadata.log.dir): moving it is a storage change.
METADATA_VOLUME_ANNOTATION = "kopfka.io/metadata-volume"
# Volume ids whose claims go with them (deleteClaim): read back when such a volume is removed
# from the spec, since the spec then no longer says so.
DELETE_CLAIMS_ANNOTATION = "kopfka.io/delete-claim-volumes"


def pod_hash(template: Manifest) -> str:
    """The desired state of a pod: a hash of its whole template (image, env, resources, volumes,
    the static-config revision, ...) except this very annotation. Stamped on the template, so
    every pod carries the hash of the template it was created from."""
    body = copy.deepcopy(template)
    (body.get("metadata") or {}).get("annotations", {}).pop(POD_HASH_ANNOTATION, None)
    return config_hash(json.dumps(body, sort_keys=True))


def stateful_set(cluster: Cluster, pool: Pool) -> Manifest:
    name = pool_name(cluster.name, pool.role)
    template = pod_template(cluster, pool)
    template["metadata"]["annotations"][POD_HASH_ANNOTATION] = pod_hash(template)
    meta = metadata(cluster, name, pool)
    meta["annotations"] = {
        METADATA_VOLUME_ANNOTATION: str(pool.metadata_volume.id),
        DELETE_CLAIMS_ANNOTATION: ",".join(str(v.id) for v in pool.volumes if v.delete_claim),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta,
        "spec": {
            "replicas": pool.replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            # The operator's roller, not the StatefulSet controller, decides restarts.
            "updateStrategy": {"type": "OnDelete"},
            # Claims outlive pods and the set; deleteClaim volumes are removed by the operator.
            "persistentVolumeClaimRetentionPolicy": {
                "whenDeleted": "Retain",
                "whenScaled": "Retain",
            },
            "selector": {"matchLabels": selector_labels(cluster.name, pool.role)},
            "template": template,
            "volumeClaimTemplates": [_claim(cluster, pool, v.id, v.size, v.storage_class) for v in pool.volumes],
        },
    }
