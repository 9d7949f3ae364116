"""Names, labels, ports and node-id ranges shared by the manifests, the status and the CRDs.

Node ids come from the StatefulSet ordinal plus a per-role base. Brokers start at 0 because
their ids show up in every partition assignment users read; controllers start at 1000 and the
broker count is capped below that, so the two ranges can never overlap.
"""

from __future__ import annotations

from typing import Literal

Role = Literal["controller", "broker", "combined"]

BROKER_ID_BASE = 0
CONTROLLER_ID_BASE = 1000
MAX_BROKERS = CONTROLLER_ID_BASE - BROKER_ID_BASE
MAX_CONTROLLERS = 9

CONTROLLER_PORT = 9093
REPLICATION_PORT = 9091
HTTP_PORT = 8080

CONFIG_DIR = "/etc/kopfka"
CONFIG_FILE = f"{CONFIG_DIR}/server.properties"
# The cluster's ids and marks (cluster.id, initial.controllers, quorum.formed), mounted live.
CLUSTER_INFO_DIR = "/etc/kopfka-cluster"
DATA_ROOT = "/var/lib/kopfka"
# The pool's certificates Secret: <pod>.pem keystores, ca.crt and clients-ca.crt truststores.
TLS_DIR = "/etc/kopfka-tls"
# Subjects' organization of the certificates the operator issues from the cluster CA.
CERT_ORGANIZATION = "kopfka.io"

MANAGED_BY = "kopfka-operator"
LABEL_CLUSTER = "kopfka.io/cluster"
LABEL_ROLE = "kopfka.io/role"
LABEL_VOLUME = "kopfka.io/volume"
LABEL_CONFIG_REVISION = "kopfka.io/config-revision"
# On the Services and Ingresses of an external listener (the listener's name, lower-cased).
LABEL_LISTENER = "kopfka.io/listener"
# The label the StatefulSet controller puts on each pod: selects one broker for its own Service.
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
# Node topology labels the API server copies onto pods (PodTopologyLabelsAdmission), so a pod
# can read its own rack through the downward API without access to Node objects.
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
# Voters' cluster-info key (a file in CLUSTER_INFO_DIR) present once the quorum has formed.
QUORUM_FORMED_KEY = "quorum.formed"


def node_id_base(role: Role) -> int:
    return CONTROLLER_ID_BASE if role == "controller" else BROKER_ID_BASE


def pool_name(cluster: str, role: Role) -> str:
    """StatefulSet, headless Service, ConfigMap prefix and PDB name of one role."""
    return f"{cluster}-{role}"


def config_map_name(cluster: str, role: Role) -> str:
    """The role's cluster-info ConfigMap (ids and marks; one per role, updated in place)."""
    return f"{pool_name(cluster, role)}-config"


def server_config_map_name(cluster: str, role: Role, revision: str) -> str:
    """server.properties of one static-config revision: a pod keeps the revision its spec
    names, so a container restarting on its own never picks up a config its pod was not
    rolled for."""
    return f"{pool_name(cluster, role)}-config-{revision}"


def bootstrap_service_name(cluster: str) -> str:
    return f"{cluster}-bootstrap"


def listener_label(listener: str) -> str:
    """A listener name as it appears in Service, port and label values (CLIENT_TLS -> client-tls)."""
    return listener.lower().replace("_", "-")


def external_bootstrap_name(cluster: str, listener: str) -> str:
    """The bootstrap Service (and Ingress) of an external listener."""
    return f"{cluster}-{listener_label(listener)}-bootstrap"


def external_broker_name(cluster: str, role: Role, ordinal: int, listener: str) -> str:
    """One broker's Service (and Ingress) on an external listener: `<pod>-<listener>`."""
    return f"{pool_name(cluster, role)}-{ordinal}-{listener_label(listener)}"


ADVERTISED_PREFIX = "advertised."


def advertised_key(ordinal: int) -> str:
    """The cluster-info ConfigMap key holding one broker's external addresses (read at start)."""
    return f"{ADVERTISED_PREFIX}{ordinal}"


def service_account_name(cluster: str) -> str:
    return f"{cluster}-kopfka"


def volume_name(volume_id: int) -> str:
    return f"data-{volume_id}"


def data_dir(volume_id: int) -> str:
    return f"{DATA_ROOT}/{volume_name(volume_id)}"


def pod_host(cluster: str, role: Role, ordinal: int, namespace: str) -> str:
    """Stable DNS name of a pod behind its role's headless Service."""
    pool = pool_name(cluster, role)
    return f"{pool}-{ordinal}.{pool}.{namespace}.svc"


def cluster_labels(cluster: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "kopfka",
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        LABEL_CLUSTER: cluster,
    }


def selector_labels(cluster: str, role: Role) -> dict[str, str]:
    """The immutable pod selector of a role's StatefulSet, Services and PDB."""
    return {LABEL_CLUSTER: cluster, LABEL_ROLE: role}


def role_labels(cluster: str, role: Role) -> dict[str, str]:
    return {**cluster_labels(cluster), "app.kubernetes.io/component": role, LABEL_ROLE: role}


def label_selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def ca_secret_name(cluster: str, which: str) -> str:
    """The CA's key and certificate (`which`: cluster or clients); private to the operator."""
    return f"{cluster}-{which}-ca"


def ca_cert_secret_name(cluster: str, which: str) -> str:
    """The CA's certificate alone, for clients to trust (mountable by applications)."""
    return f"{cluster}-{which}-ca-cert"


def certs_secret_name(cluster: str, role: Role) -> str:
    """The certificates of one pool's pods (one keystore per pod, by pod name)."""
    return f"{pool_name(cluster, role)}-certs"


def operator_secret_name(cluster: str) -> str:
    """The operator's own client certificate for the cluster (a super user)."""
    return f"{cluster}-operator-certs"


def node_common_name(cluster: str) -> str:
    return f"{cluster}-node"


def operator_common_name(cluster: str) -> str:
    return f"{cluster}-operator"


def cert_principal(common_name: str) -> str:
    """The Kafka principal of a certificate the operator issued (subject O, CN; RFC 2253 form)."""
    return f"User:CN={common_name},O={CERT_ORGANIZATION}"
