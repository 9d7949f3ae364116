"""CustomResourceDefinitions for KafkaCluster, Topic and Quota, built as data.

The YAML in `crds/` (and the Helm chart's `crds/`, which symlinks to it) is rendered from this
module by `python -m kopfka_operator.crds`; a test fails when the two drift. Building the
schemas in Python lets the storage/resources/condition fragments be shared instead of copied.

Everything the operator relies on is validated here (ranges, enums, patterns, unknown fields);
rules a plain OpenAPI schema cannot say are CEL `x-kubernetes-validations`, repeated in `spec.py`
so that a cluster without CEL (or a test server) still never renders an invalid spec.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from . import GROUP, VERSION
from .autoscale.policy import AUTOSCALING_SCHEMA
from .naming import BROKER_ID_BASE, CONTROLLER_ID_BASE, MAX_BROKERS, MAX_CONTROLLERS, REGION_LABEL, ZONE_LABEL
from .spec import AUTHENTICATION_TYPES, DEFAULT_INGRESS_CLASS, HOST_NAME, LISTENER_TYPES

Schema = dict[str, Any]

QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"
# Resource requests may be milli-units (cpu: 500m); a disk size never is.
RESOURCE_QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"


def _obj(
    props: dict[str, Schema],
    desc: str,
    required: list[str] | None = None,
    validations: list[Schema] | None = None,
    **extra: Any,
) -> Schema:
    schema: Schema = {"type": "object", "description": desc, "properties": props}
    if required:
        schema["required"] = required
    if validations:
        schema["x-kubernetes-validations"] = validations
    schema.update(extra)
    return schema


def _cel(rule: str, message: str) -> Schema:
    """A CEL rule the API server evaluates (spec.py repeats the KafkaCluster ones)."""
    return {"rule": rule, "message": message}


def _int(desc: str, minimum: int | None = None, maximum: int | None = None, **extra: Any) -> Schema:
    schema: Schema = {"type": "integer", "description": desc}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    schema.update(extra)
    return schema


def _str(desc: str, **extra: Any) -> Schema:
    return {"type": "string", "description": desc, **extra}


def _bool(desc: str, default: bool) -> Schema:
    return {"type": "boolean", "description": desc, "default": default}


def _string_map(desc: str) -> Schema:
    return {"type": "object", "description": desc, "additionalProperties": {"type": "string"}}


def _free_form(desc: str, kind: str = "object") -> Schema:
    """A Kubernetes core type passed through verbatim; the API server validates it on the pod."""
    if kind == "array":
        return {
            "type": "array",
            "description": desc,
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        }
    return {"type": "object", "description": desc, "x-kubernetes-preserve-unknown-fields": True}


def _kafka_config(desc: str) -> Schema:
    return {
        "type": "object",
        "description": desc,
        "additionalProperties": {"x-kubernetes-int-or-string": True},
    }


def _resources() -> Schema:
    quantities = {
        "type": "object",
        "additionalProperties": {
            "x-kubernetes-int-or-string": True,
            "pattern": RESOURCE_QUANTITY_PATTERN,
        },
    }
    return _obj(
        {
            "requests": {
                **quantities,
                "description": "Minimum resources (e.g. cpu: 500m, memory: 2Gi).",
            },
            "limits": {**quantities, "description": "Maximum resources."},
        },
        "Container resources of the kopfka process (a subset of core/v1 ResourceRequirements).",
    )


def _storage(role: str) -> Schema:
    volume = _obj(
        {
            "id": _int(
                "Volume id: the PVC template is `data-<id>`, mounted at "
                "`/var/lib/kopfka/data-<id>`; "
                "part of the PVC name, so never reuse an id for a different disk.",
                0,
                999,
            ),
            "size": _str("Requested capacity (a Kubernetes quantity, e.g. 100Gi).", pattern=QUANTITY_PATTERN),
            "storageClass": _str("StorageClass of the claim; the cluster default when omitted."),
            "deleteClaim": _bool(
                "Delete this volume's PVCs when the KafkaCluster is deleted (kept by default).",
                False,
            ),
            "kraftMetadata": _bool(
                "Put `metadata.log.dir` (the KRaft metadata log) on this volume. At most one "
                "volume may set it; without one, the lowest id holds the metadata log.",
                False,
            ),
        },
        "One disk of the JBOD set: a PersistentVolumeClaim per pod.",
        required=["id", "size"],
    )
    return _obj(
        {
            "type": _str(
                "Storage layout; only `jbod` (one or more PVCs per pod) exists.",
                enum=["jbod"],
                default="jbod",
            ),
            "volumes": {
                "type": "array",
                "description": f"The {role} pods' disks; each becomes an entry of `log.dirs`.",
                "minItems": 1,
                "maxItems": 32,
                "items": volume,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["id"],
                "x-kubernetes-validations": [
                    _cel(
                        "self.filter(v, has(v.kraftMetadata) && v.kraftMetadata).size() <= 1",
                        "at most one volume may set kraftMetadata",
                    )
                ],
            },
        },
        f"Persistent storage of the {role} pods. Volumes are fixed once the pods exist "
        "(StatefulSet volumeClaimTemplates cannot change).",
        required=["volumes"],
    )


def _role(role: str, replicas: Schema, extra: dict[str, Schema] | None = None) -> Schema:
    props: dict[str, Schema] = {
        "replicas": replicas,
        "storage": _storage(role),
        "resources": _resources(),
    }
    props.update(extra or {})
    return _obj(props, f"The {role} pool: one StatefulSet.", required=["storage"])


def _external_configuration() -> Schema:
    host = {"pattern": f"^{HOST_NAME.pattern}$", "maxLength": 253}
    broker = _obj(
        {
            "broker": _int("The broker's node id.", 0, MAX_BROKERS - 1),
            "advertisedHost": _str("The host (or IP) the broker advertises on this listener.", **host),
            "advertisedPort": _int("The port the broker advertises on this listener.", 1, 65535),
            "nodePort": _int("nodeport: the node port of the broker's Service (else allocated).", 1, 65535),
            "host": _str("ingress: the broker's host (else from brokerHostTemplate).", **host),
        },
        "One broker's address on this listener.",
        required=["broker"],
    )
    return _obj(
        {
            "bootstrap": _obj(
                {
                    "host": _str("ingress: the bootstrap host clients connect to on port 443.", **host),
                    "nodePort": _int("nodeport: the bootstrap Service's node port (else allocated).", 1, 65535),
                },
                "The listener's bootstrap address.",
            ),
            "brokerHostTemplate": _str(
                "ingress: each broker's host, `{id}` replaced by its node id (e.g. `broker-{id}.kafka.example.com`).",
                pattern=r"^.*\{id\}.*$",
                maxLength=253,
            ),
            "class": _str(f"ingress: the ingressClassName (default {DEFAULT_INGRESS_CLASS}).", maxLength=253),
            "brokers": {
                "type": "array",
                "description": "Per-broker overrides (advertisedHost/advertisedPort win over what Kubernetes assigns).",
                "maxItems": MAX_BROKERS,
                "items": broker,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["broker"],
            },
        },
        "Addresses of a nodeport, loadbalancer or ingress listener.",
    )


def _listeners() -> Schema:
    listener = _obj(
        {
            "name": _str(
                "Listener name, upper case (also the Service port name, lower-cased). "
                "CONTROLLER and REPLICATION are the operator's own "
                "(controller quorum on 9093, inter-broker traffic on 9091).",
                pattern=r"^[A-Z](_?[A-Z0-9])*$",
                maxLength=15,
            ),
            "port": _int("Container and Service port.", 1024, 65535),
            "protocol": _str(
                "Kept for compatibility; the security protocol follows from `tls` and `authentication` "
                "(PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL).",
                enum=["PLAINTEXT"],
                default="PLAINTEXT",
            ),
            "tls": _bool(
                "Encrypt the listener with TLS; the brokers' certificates are signed by the cluster CA "
                "(Secret `<cluster>-cluster-ca-cert`, key `ca.crt`, is what clients trust).",
                False,
            ),
            "authentication": _obj(
                {
                    "type": _str(
                        "`scram-sha-512` / `scram-sha-256`: SASL SCRAM with the credentials of User "
                        "resources; `plain`: SASL PLAIN with the users of "
                        "`spec.config.listener.name.<listener>.plain.sasl.jaas.config`; `tls`: a client "
                        "certificate signed by the clients CA (User resources with authentication tls), "
                        "the principal is `User:<CN>`.",
                        enum=list(AUTHENTICATION_TYPES),
                    )
                },
                "How clients authenticate; none when omitted (principal User:ANONYMOUS).",
                required=["type"],
            ),
        },
        "A client listener, exposed on each broker pod and on the bootstrap Service.",
        required=["name", "port"],
        validations=[
            _cel(
                "!has(self.authentication) || self.authentication.type != 'tls' || self.tls",
                "authentication type tls needs tls: true",
            ),
            _cel(
                "!has(self.type) || self.type != 'ingress' || self.tls",
                "type ingress needs tls: true (TLS passthrough, routed by SNI)",
            ),
            _cel(
                "!has(self.configuration) || (has(self.type) && self.type != 'internal')",
                "configuration is for nodeport, loadbalancer and ingress listeners only",
            ),
            _cel(
                "!has(self.type) || self.type != 'ingress' || (has(self.configuration) && "
                "has(self.configuration.bootstrap) && has(self.configuration.bootstrap.host) && "
                "has(self.configuration.brokerHostTemplate))",
                "type ingress needs configuration.bootstrap.host and configuration.brokerHostTemplate",
            ),
        ],
    )
    listener["properties"]["type"] = _str(
        "How clients reach the listener. `internal`: in the Kubernetes cluster, each broker "
        "advertised with its pod's DNS name. From outside, with a bootstrap Service "
        "`<cluster>-<listener>-bootstrap` and one Service per broker `<pod>-<listener>`: "
        "`nodeport` (NodePort Services; a broker advertises its node's address and its node port), "
        "`loadbalancer` (LoadBalancer Services; a broker advertises its load balancer address), "
        "`ingress` (Ingresses with TLS passthrough on port 443, needs tls: true). "
        "status.listeners[].bootstrapServers says what clients use.",
        enum=list(LISTENER_TYPES),
        default="internal",
    )
    listener["properties"]["configuration"] = _external_configuration()
    return {
        "type": "array",
        "description": "Client listeners: in the cluster (type internal) or from outside it.",
        "minItems": 1,
        "maxItems": 8,
        "default": [{"name": "CLIENT", "port": 9092, "protocol": "PLAINTEXT"}],
        "items": listener,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "x-kubernetes-validations": [
            _cel(
                "self.all(l, !(l.name in ['CONTROLLER', 'REPLICATION']))",
                "listener names CONTROLLER and REPLICATION are reserved",
            ),
            _cel(
                "self.all(l, !(l.port in [8080, 9091, 9093]))",
                "ports 8080, 9091 and 9093 are reserved (http, replication, quorum)",
            ),
            _cel(
                "self.all(a, self.filter(b, b.port == a.port).size() == 1)",
                "listener ports must be distinct",
            ),
        ],
    }


def _certificate_authority(which: str, signs: str) -> Schema:
    return _obj(
        {
            "generateCertificateAuthority": _bool(
                f"The operator creates the {which} CA (Secret `<cluster>-{which}-ca`, keys ca.crt and "
                "ca.key). false: you create that Secret with your own CA (ECDSA or RSA key, PEM); the "
                "operator only issues certificates from it.",
                True,
            ),
            "validityDays": _int(
                f"Validity of the generated CA and of the certificates it signs ({signs}).", 1, 36500, default=365
            ),
            "renewalDays": _int(
                "A certificate this close to its expiry is issued again (node certificates roll the pods "
                "through the rolling restart).",
                1,
                36500,
                default=30,
            ),
        },
        f"The {which} certificate authority: it signs {signs}.",
        validations=[_cel("self.renewalDays < self.validityDays", "renewalDays must be less than validityDays")],
    )


def _authorization() -> Schema:
    return _obj(
        {
            "type": _str(
                "`simple`: Kafka's StandardAuthorizer over the ACLs in the metadata log (User resources manage them).",
                enum=["simple"],
                default="simple",
            ),
            "superUsers": {
                "type": "array",
                "description": "Principals allowed everything, as user names (`admin` is User:admin) or "
                "certificate subjects (`CN=x,O=y`). The nodes and the operator are super users anyway.",
                "items": {"type": "string", "minLength": 1, "pattern": "^[^;]+$"},
            },
        },
        "Authorization of every request (ACLs); allow.everyone.if.no.acl.found stays false unless set in spec.config.",
        required=["type"],
    )


def _pod_template() -> Schema:
    return _obj(
        {
            "annotations": _string_map("Extra pod annotations."),
            "labels": _string_map("Extra pod labels (the operator's own labels win)."),
            "affinity": _free_form("core/v1 Affinity of the pods."),
            "tolerations": _free_form("core/v1 Tolerations of the pods.", "array"),
            "nodeSelector": _string_map("core/v1 nodeSelector of the pods."),
            "topologySpreadConstraints": _free_form("core/v1 TopologySpreadConstraints.", "array"),
            "priorityClassName": _str("PriorityClass of the pods."),
            "terminationGracePeriodSeconds": _int(
                "Time a pod gets after SIGTERM for kopfka's controlled shutdown (moving "
                "leadership away, flushing logs) before it is killed.",
                30,
                86400,
                default=300,
            ),
        },
        "Overrides applied to every pod the operator creates for this cluster.",
    )


def _conditions() -> Schema:
    condition = _obj(
        {
            "type": _str("Ready, Reconciling, Warning or RollBlocked."),
            "status": _str("Condition status.", enum=["True", "False", "Unknown"]),
            "reason": _str("One CamelCase word a program can match."),
            "message": _str("What happened, for humans."),
            "lastTransitionTime": _str("When status last changed.", format="date-time"),
            "observedGeneration": _int("metadata.generation this condition was computed for.", 0),
        },
        "A status condition.",
        required=["type", "status"],
    )
    return {
        "type": "array",
        "description": "Ready, Reconciling and Warning conditions.",
        "items": condition,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    }


def _role_status(role: str, with_selector: bool = False) -> Schema:
    props: dict[str, Schema] = {
        "replicas": _int(f"Desired {role} pods.", 0),
        "readyReplicas": _int(f"Ready {role} pods (from the StatefulSet status).", 0),
        "nodeIds": {
            "type": "array",
            "description": f"node.id of each {role} pod.",
            "items": {"type": "integer"},
        },
    }
    if with_selector:
        props["selector"] = _str("Label selector of the pods (for the scale subresource / HPA).")
    return _obj(props, f"The {role} pool as observed.")


def _kafkacluster_spec() -> Schema:
    broker_replicas = _int(
        f"Number of broker pods. Broker node.id = {BROKER_ID_BASE} + pod ordinal "
        f"(in combined mode too). Driven by the scale subresource.",
        0,
        MAX_BROKERS,
        default=3,
    )
    controller_replicas = _int(
        f"Number of KRaft controller pods (odd: 1, 3 or 5 for a majority quorum). Controller "
        f"node.id = {CONTROLLER_ID_BASE} + pod ordinal, so it never collides with a broker id.",
        1,
        MAX_CONTROLLERS,
        default=3,
    )
    rack = _obj(
        {
            "topologyKey": _str(
                "Node label that is each broker's broker.rack (rack-aware replica placement) and "
                "over which broker pods are spread: topology.kubernetes.io/zone or "
                "topology.kubernetes.io/region, the labels the API server copies from the node "
                "onto the pod at scheduling (read through the downward API at start).",
                enum=[ZONE_LABEL, REGION_LABEL],
            )
        },
        "Rack awareness: broker.rack from the node's topology label, pods spread over it.",
        required=["topologyKey"],
    )
    return _obj(
        {
            "image": _str(
                "Container image with the `kopfka` entry point; defaults to the operator's own image.",
                minLength=1,
            ),
            "imagePullPolicy": _str(
                "Image pull policy.",
                enum=["Always", "IfNotPresent", "Never"],
                default="IfNotPresent",
            ),
            "imagePullSecrets": {
                "type": "array",
                "description": "Secrets for pulling the image.",
                "items": _obj(
                    {"name": _str("Secret name.", minLength=1)},
                    "A Secret reference.",
                    required=["name"],
                ),
            },
            "mode": _str(
                "`dedicated`: separate controller and broker StatefulSets; `combined`: the broker "
                "pods also run the controller role (small clusters; `controllers` must be "
                "omitted).",
                enum=["dedicated", "combined"],
                default="dedicated",
            ),
            "controllers": _role("controller", controller_replicas),
            "brokers": _role("broker", broker_replicas, {"rack": rack, "autoscaling": AUTOSCALING_SCHEMA}),
            "listeners": _listeners(),
            "authorization": _authorization(),
            "clusterCa": _certificate_authority(
                "cluster", "the brokers' and controllers' certificates and the operator's own"
            ),
            "clientsCa": _certificate_authority("clients", "the client certificates of User resources"),
            "config": _kafka_config(
                "server.properties overrides (strings or integers). Keys the operator writes — "
                "node.id, process.roles, listeners, advertised.listeners, "
                "listener.security.protocol.map, controller.listener.names, "
                "inter.broker.listener.name, controller.quorum.*, log.dirs, log.dir, "
                "metadata.log.dir, broker.rack, kopfka.http.listener, authorizer.class.name, "
                "super.users, and for a secured cluster the ssl.keystore/truststore keys, ssl.client.auth, "
                "sasl.enabled.mechanisms and ssl.principal.mapping.rules (also listener-prefixed) — are "
                "rejected."
            ),
            "metrics": _obj(
                {"enabled": _bool("Annotate pods for Prometheus scraping of GET /metrics on port 8080.", True)},
                "Prometheus metrics.",
            ),
            "podTemplate": _pod_template(),
            "metadataVersion": _str(
                'The metadata.version to run, as a Kafka release ("4.1", "4.3"): a new cluster is '
                "formatted at it. "
                "After a rolling upgrade the operator raises metadata.version to it (UpdateFeatures) "
                "once every node runs the new image; unset: the highest level all nodes support. A "
                "value below the finalized level is refused (Kafka cannot downgrade it safely)."
            ),
            "rebalance": _obj(
                {
                    "onScaleUp": _bool("Spread replicas onto new brokers when brokers are added.", True),
                    "throttleBytesPerSecond": _int(
                        "Replication throttle for the moves (bytes/s per broker; for a move between "
                        "the log dirs of one broker, replica.alter.log.dirs.io.max.bytes.per.second); "
                        "0: unthrottled. The throttles come off when the moves are done.",
                        0,
                        default=0,
                    ),
                    "maxConcurrentMoves": _int(
                        "How many partition moves (reassignments, or moves between log dirs) run at "
                        "once; the next start as these finish.",
                        1,
                        1000,
                        default=5,
                    ),
                },
                "Data movement when brokers are added or removed, or a JBOD volume is removed.",
            ),
            "rollingUpdate": _obj(
                {
                    "blockedTimeoutSeconds": _int(
                        "How long a safety gate may stay closed (e.g. a partition would fall below "
                        "min.insync.replicas) before the RollBlocked condition reports it. The roll "
                        "keeps waiting either way: it never restarts a node unsafely.",
                        0,
                        default=120,
                    )
                },
                "How pods are restarted when their spec changes (one at a time, behind safety gates).",
            ),
        },
        "Desired state of a kopfka cluster.",
        required=["brokers"],
        validations=[
            _cel(
                "self.mode == 'dedicated' ? has(self.controllers) : !has(self.controllers)",
                "dedicated mode needs spec.controllers; combined mode must omit it",
            ),
            _cel(
                f"self.mode == 'dedicated' || "
                f"(self.brokers.replicas >= 1 && self.brokers.replicas <= {MAX_CONTROLLERS})",
                f"combined mode runs 1 to {MAX_CONTROLLERS} nodes (all are voters)",
            ),
        ],
    )


def _kafkacluster_status() -> Schema:
    return _obj(
        {
            "observedGeneration": _int("metadata.generation last reconciled.", 0),
            "clusterId": _str("Kafka cluster id, generated once (22-char base64url UUID)."),
            "initialControllers": _str(
                "The `--initial-controllers` voter set (ID@HOST:PORT:DIRECTORY_ID,...) generated "
                "with the cluster id and used when formatting the first controllers' disks."
            ),
            "bootstrapServers": _str("host:port list of the bootstrap Service for clients."),
            "listeners": {
                "type": "array",
                "description": "Per listener, what a client puts in bootstrap.servers.",
                "items": _obj(
                    {
                        "name": _str("The listener's name."),
                        "type": _str("The listener's type."),
                        "bootstrapServers": _str(
                            "host:port list: the bootstrap Service in the cluster (internal), the external "
                            "address otherwise; absent until Kubernetes has assigned it (load balancer, node port)."
                        ),
                    },
                    "One listener's address.",
                ),
            },
            "quorumFormed": {
                "type": "boolean",
                "description": "A controller has been Ready (the quorum exists). From then on a "
                "controller whose metadata disk is empty formats under a new directory id and "
                "rejoins as a new voter, instead of posing as the voter it was (KIP-853).",
            },
            "roll": _roll_status(),
            "scale": _obj(
                {role: _scale_status(role) for role in ("controller", "broker", "combined")},
                "Scaling in progress per pool (a shrink waits until the nodes going away are empty "
                "and out of the quorum; voters grow one at a time).",
            ),
            "autoscaling": _obj(
                {
                    "currentBrokers": _int("spec.brokers.replicas when decided.", 0),
                    "desiredBrokers": _int("The broker count decided.", 0),
                    "recommendation": _int("What the metrics asked for, before limits and gates.", nullable=True),
                    "reason": _str("Why, in words (the metric, its level and its target).", nullable=True),
                    "held": _str("The gate that held a change: cooldown or busy.", nullable=True),
                    "levels": {
                        "type": "object",
                        "nullable": True,
                        "description": "Each metric's mean over the brokers in the latest sample.",
                        "additionalProperties": {"type": "number"},
                    },
                    "lastScaleTime": {
                        "type": "number",
                        "nullable": True,
                        "description": "When the autoscaler last changed the count (Unix seconds).",
                    },
                    "error": _str("Why spec.brokers.autoscaling cannot be used.", nullable=True),
                },
                "The autoscaler's latest decision (spec.brokers.autoscaling).",
            ),
            "config": _obj(
                {
                    "appliedLive": _string_map(
                        "Dynamic spec.config keys applied to the running brokers (cluster-wide "
                        "IncrementalAlterConfigs), no restart needed."
                    ),
                    "lastAppliedLive": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Keys changed live by the last such update.",
                    },
                    "appliedAt": _str("When."),
                    "liveError": _str("Why the last live update failed (retried).", nullable=True),
                },
                "Configuration the operator applied without restarting pods.",
            ),
            "metadataVersion": _obj(
                {
                    "finalized": _int("The finalized metadata.version level.", 0),
                    "supported": _int("The highest level the brokers support.", 0),
                    "refused": _str("Why the requested level is not applied.", nullable=True),
                    "error": _str("The last UpdateFeatures failure.", nullable=True),
                },
                "metadata.version, as the cluster reports it.",
            ),
            "logDirs": _obj(
                {
                    "offline": {
                        "type": "array",
                        "description": "Each broker with a failed (offline) log dir.",
                        "items": _obj(
                            {
                                "broker": _int("Node id.", 0),
                                "dirs": {
                                    "type": "array",
                                    "items": {"type": "string"},
                                    "description": "Its offline log dirs (DescribeLogDirs KAFKA_STORAGE_ERROR).",
                                },
                                "volumes": {
                                    "type": "array",
                                    "items": {"type": "string"},
                                    "description": "The spec volumes (data-<id>) those dirs are on.",
                                },
                                "partitionCount": _int("How many of its replicas are offline.", 0),
                                "partitions": {
                                    "type": "array",
                                    "items": {"type": "string"},
                                    "description": "topic-partition of those replicas (the first 100).",
                                },
                            },
                            "A broker's failed disk and the replicas it took offline.",
                        ),
                    }
                },
                "Failed disks: log dirs the brokers report offline, with their partitions.",
            ),
            "conditions": _conditions(),
            "controllers": _role_status("controller"),
            "brokers": _role_status("broker", with_selector=True),
        },
        "Observed state, written by the operator.",
    )


def _scale_status(role: str) -> Schema:
    ints = {"type": "array", "items": {"type": "integer"}}
    return _obj(
        {
            "voters": _str("What the voter-set change waits for."),
            "votersGrowTo": _int("The next pod count a new voter may be created for.", 0),
            "votersShrinkTo": _int("The pod count the voter set allows.", 0),
            "removeVoters": {
                "type": "array",
                "description": "Voters to remove (RemoveRaftVoter) once their pods are gone.",
                "items": _obj(
                    {"nodeId": _int("Node id.", 0), "directoryId": _str("Its metadata directory id.")},
                    "A voter's replica key.",
                ),
            },
            "data": _str("What the data movement waits for, with its progress."),
            "dataShrinkTo": _int("The pod count the emptied brokers allow.", 0),
            "refused": _str("Why the requested scale is refused (e.g. a topic's replication factor)."),
            "unregister": {**ints, "description": "Brokers removed and still to unregister."},
            "spreadTo": {**ints, "description": "New brokers replicas are being spread onto."},
            "brokers": _int("Broker pods last seen (to recognise new ones).", 0),
            "volumes": _str("What the removal of a JBOD volume waits for, with its progress."),
            "removeVolumes": {**ints, "description": "Volume ids removed from the spec, still on the pods."},
            "volumesEvacuated": {**ints, "description": "Removed volumes that hold no replica any more."},
            "deleteClaims": {**ints, "description": "Removed volumes whose claims go with them (deleteClaim)."},
            "cordoned": {
                "type": "object",
                "description": (
                    "Broker id -> the log dirs the operator cordoned on it (cordoned.log.dirs, `*` = all) "
                    "while emptying them; kept until the pod or volume is gone, lifted if the removal is undone."
                ),
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
            },
        },
        f"The {role} pool.",
    )


def _roll_status() -> Schema:
    nullable_str = lambda desc: _str(desc, nullable=True)  # noqa: E731 - a schema shorthand
    names = {"type": "array", "items": {"type": "string"}}
    return _obj(
        {
            "phase": _str("Idle, Rolling, Blocked or Done.", enum=["Idle", "Rolling", "Blocked", "Done"]),
            "pod": nullable_str("The pod restarted last and not yet whole again."),
            "podUid": nullable_str("Its uid when it was deleted (a new uid: recreated)."),
            "reason": nullable_str("Why it was restarted."),
            "restartedAt": nullable_str("When it was deleted."),
            "waitingFor": nullable_str("What the roll waits for now."),
            "since": nullable_str("Since when."),
            "startedAt": nullable_str("When the roll started."),
            "finishedAt": nullable_str("When it finished."),
            "done": {**names, "description": "Pods restarted by this roll, in order."},
            "remaining": {**names, "description": "Pods still to restart, in the order planned."},
            "manualSince": {
                "type": "number",
                "nullable": True,
                "description": "A manual roll of every pod was requested at this time (epoch seconds).",
            },
            "preferredElections": _int("Partitions given back to their preferred leader at the end.", 0),
            "blocked": {
                "type": "object",
                "nullable": True,
                "description": "A safety gate that is closed.",
                "properties": {
                    "waitingFor": _str("The gate's condition."),
                    "since": {"type": "number", "description": "Closed since (epoch seconds)."},
                    "partitions": {**names, "description": "The partitions it names."},
                    "reported": {"type": "boolean", "description": "RollBlocked was reported."},
                },
            },
            "lastShutdown": {
                "type": "object",
                "nullable": True,
                "description": "The last broker stopped by the roll, as the operator saw it stop.",
                "properties": {
                    "pod": _str("The pod."),
                    "nodeId": _int("Its node id.", 0),
                    "ledPartitionsAtStop": _int(
                        "Partitions it still led when it left the cluster (controlled shutdown moves them: 0).", 0
                    ),
                    "at": _str("When."),
                },
            },
        },
        "The rolling restart: progress, what it waits for, and since when.",
    )


def _printer(name: str, type_: str, path: str, desc: str, priority: int = 0) -> Schema:
    column: Schema = {"name": name, "type": type_, "jsonPath": path, "description": desc}
    if priority:
        column["priority"] = priority
    return column


def _age() -> Schema:
    return _printer("Age", "date", ".metadata.creationTimestamp", "Time since creation.")


def _ready_column() -> Schema:
    return _printer("Ready", "string", '.status.conditions[?(@.type=="Ready")].status', "Ready condition.")


def _crd(
    kind: str,
    plural: str,
    short: list[str],
    spec: Schema,
    status: Schema,
    columns: list[Schema],
    desc: str,
    scale: Schema | None = None,
) -> Schema:
    subresources: Schema = {"status": {}}
    if scale:
        subresources["scale"] = scale
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "kopfka"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short,
                "categories": ["kopfka"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": subresources,
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": _obj(
                            {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                            desc,
                            required=["spec"],
                        )
                    },
                }
            ],
        },
    }


def _simple_status(extra: dict[str, Schema] | None = None) -> Schema:
    props: dict[str, Schema] = {
        "observedGeneration": _int("metadata.generation last reconciled.", 0),
        "conditions": _conditions(),
    }
    props.update(extra or {})
    return _obj(props, "Observed state, written by the operator.")


def kafkacluster_crd() -> Schema:
    return _crd(
        "KafkaCluster",
        "kafkaclusters",
        ["kc", "kafka"],
        _kafkacluster_spec(),
        _kafkacluster_status(),
        [
            _printer("Mode", "string", ".spec.mode", "dedicated or combined."),
            _printer("Brokers", "integer", ".spec.brokers.replicas", "Desired broker pods."),
            _printer("Ready-Brokers", "integer", ".status.brokers.readyReplicas", "Ready broker pods."),
            _ready_column(),
            _printer("Roll", "string", ".status.roll.phase", "Rolling restart: Rolling, Blocked, Done."),
            _printer("Waiting-For", "string", ".status.roll.waitingFor", "What the roll waits for.", 1),
            _printer("Bootstrap", "string", ".status.bootstrapServers", "Client bootstrap servers.", 1),
            _printer("Cluster-Id", "string", ".status.clusterId", "Kafka cluster id.", 1),
            _age(),
        ],
        "A Kafka-compatible cluster run by kopfka: KRaft controllers and brokers on JBOD.",
        scale={
            "specReplicasPath": ".spec.brokers.replicas",
            "statusReplicasPath": ".status.brokers.readyReplicas",
            "labelSelectorPath": ".status.brokers.selector",
        },
    )


CLUSTER_LABEL_DOC = (
    "The KafkaCluster (same namespace) is named by the label `kopfka.io/cluster: <name>`, as "
    "Strimzi's `strimzi.io/cluster`."
)


def _cluster_column() -> Schema:
    return _printer("Cluster", "string", ".metadata.labels.kopfka\\.io/cluster", "Owning KafkaCluster (label).")


def topic_crd() -> Schema:
    spec = _obj(
        {
            "topicName": _str(
                "Kafka topic name; metadata.name when omitted (Kafka allows characters a "
                "Kubernetes name cannot hold, e.g. `_` and upper case). Fixed once set: a Kafka "
                "topic cannot be renamed.",
                pattern=r"^[a-zA-Z0-9._-]{1,249}$",
            ),
            "partitions": _int(
                "Partition count; can only grow (a decrease is refused: Ready=False). The broker's "
                "num.partitions when omitted.",
                1,
                1_000_000,
            ),
            "replicationFactor": _int(
                "Replicas per partition; the broker's default.replication.factor when omitted. A "
                "change moves replicas with a throttled partition reassignment (progress in "
                "status.reassignment).",
                1,
                32767,
            ),
            "config": _kafka_config(
                "Topic configs (e.g. retention.ms, cleanup.policy). Exactly these are the topic's "
                "overrides: a key removed here, or set by another client, goes back to the default."
            ),
        },
        f"Desired state of a Kafka topic. {CLUSTER_LABEL_DOC} Annotation "
        "`kopfka.io/delete-policy: retain` keeps the Kafka topic when the resource is deleted.",
        validations=[
            _cel(
                "has(self.topicName) == has(oldSelf.topicName) && "
                "(!has(self.topicName) || self.topicName == oldSelf.topicName)",
                "spec.topicName cannot change (a Kafka topic cannot be renamed)",
            )
        ],
    )
    reassignment = _obj(
        {
            "targetReplicationFactor": _int("The replication factor being moved to.", 1),
            "partitions": _int("Partitions being moved.", 0),
            "done": _int("Of those, partitions whose move has completed.", 0),
            "throttleBytesPerSecond": _int("Replication throttle of the moving replicas, per broker.", 0),
            "startedAt": _str("When the reassignment started.", format="date-time"),
        },
        "A replication-factor change in progress (absent when none runs).",
    )
    status = _simple_status(
        {
            "topicName": _str("The Kafka topic this resource manages."),
            "topicId": _str("Kafka topic id (UUID)."),
            "partitions": _int("Partition count in Kafka.", 0),
            "replicationFactor": _int("Replicas per partition in Kafka.", 0),
            "config": _string_map("The topic config overrides applied (as Kafka holds them)."),
            "adopted": {
                "type": "boolean",
                "description": "The topic existed in Kafka before this resource; the operator "
                "took it over (its config brought to the spec).",
            },
            "reassignment": reassignment,
        }
    )
    return _crd(
        "Topic",
        "topics",
        ["kt"],
        spec,
        status,
        [
            _cluster_column(),
            _printer("Topic", "string", ".status.topicName", "Kafka topic name."),
            _printer("Partitions", "integer", ".status.partitions", "Partition count in Kafka."),
            _printer("Replication", "integer", ".status.replicationFactor", "Replication factor in Kafka."),
            _ready_column(),
            _printer("Topic-Id", "string", ".status.topicId", "Kafka topic id.", 1),
            _age(),
        ],
        "A Kafka topic of a kopfka cluster.",
    )


def _entity_ref(what: str) -> Schema:
    return _obj(
        {
            "name": _str(f"The {what} this quota applies to.", minLength=1),
            "default": {
                "type": "boolean",
                "description": f"The default quota for every {what}.",
                "enum": [True],
            },
        },
        f"A named {what}, or `default: true` for the default of all {what}s.",
        minProperties=1,
        maxProperties=1,
    )


QUOTA_KEYS = {
    # CRD key -> (Kafka quota key, description)
    "producerByteRate": ("producer_byte_rate", "Produce bytes per second per broker."),
    "consumerByteRate": ("consumer_byte_rate", "Fetch bytes per second per broker."),
    "requestPercentage": ("request_percentage", "Percent of one request-handler/network thread."),
    "controllerMutationRate": ("controller_mutation_rate", "Partition mutations per second."),
    "connectionCreationRate": ("connection_creation_rate", "New connections per second (ip entities only)."),
}


def quota_crd() -> Schema:
    rates: dict[str, Schema] = {
        key: {"type": "number", "minimum": 0, "description": desc} for key, (_, desc) in QUOTA_KEYS.items()
    }
    spec = _obj(
        {
            "entity": _obj(
                {
                    "user": _entity_ref("user principal"),
                    "clientId": _entity_ref("client id"),
                    "ip": _entity_ref("client IP address"),
                },
                "Who is limited: a user, a client id, both (user + client id), or an IP address.",
                minProperties=1,
                validations=[
                    _cel(
                        "has(self.ip) ? !has(self.user) && !has(self.clientId) : true",
                        "an ip quota cannot be combined with user or clientId",
                    )
                ],
            ),
            **rates,
        },
        f"Kafka client quotas for one entity. {CLUSTER_LABEL_DOC} Each key has one owner: when "
        "two Quotas of a cluster set the same key of the same entity, the older one applies it "
        "and the newer one reports the conflict.",
        required=["entity"],
        validations=[
            _cel("self.entity == oldSelf.entity", "spec.entity cannot change: create another Quota for it"),
            _cel(
                "has(self.connectionCreationRate) ? has(self.entity.ip) : true",
                "connectionCreationRate applies to ip entities only",
            ),
            _cel(
                "has(self.entity.ip) ? !has(self.producerByteRate) && !has(self.consumerByteRate)"
                " && !has(self.requestPercentage) && !has(self.controllerMutationRate) : true",
                "an ip quota takes only connectionCreationRate",
            ),
        ],
        anyOf=[{"required": [key]} for key in QUOTA_KEYS],
    )
    applied = {
        "type": "object",
        "description": "The quota values this resource applied (keys as in spec).",
        "properties": {key: {"type": "number"} for key in QUOTA_KEYS},
    }
    status = _simple_status(
        {
            "entity": _str("The Kafka quota entity, e.g. `user=alice,client-id=<default>`."),
            "applied": applied,
        }
    )
    return _crd(
        "Quota",
        "quotas",
        ["kq"],
        spec,
        status,
        [
            _cluster_column(),
            _printer("Entity", "string", ".status.entity", "Kafka quota entity."),
            _ready_column(),
            _age(),
        ],
        "Client quotas of a kopfka cluster.",
    )


def user_crd() -> Schema:
    from .security.users import AUTHENTICATION_TYPES as USER_AUTHENTICATION
    from .security.users import OPERATIONS, PATTERN_TYPES, PERMISSIONS, RESOURCE_TYPES

    acl = _obj(
        {
            "resource": _obj(
                {
                    "type": _str("What the ACL is on.", enum=list(RESOURCE_TYPES)),
                    "name": _str("Its name, or the prefix with patternType prefix; `*` is every one.", minLength=1),
                    "patternType": _str(
                        "`literal`: exactly `name` (or `*`); `prefix`: every name starting with it.",
                        enum=list(PATTERN_TYPES),
                        default="literal",
                    ),
                },
                "The resource pattern (Kafka's ResourcePattern); a cluster ACL takes no name.",
                required=["type"],
                validations=[
                    _cel("self.type == 'cluster' || has(self.name)", "resource.name is required but for a cluster")
                ],
            ),
            "operations": {
                "type": "array",
                "description": "Operations allowed (or denied): one Kafka ACL each.",
                "minItems": 1,
                "items": {"type": "string", "enum": list(OPERATIONS)},
            },
            "host": _str("Client address the ACL applies to; `*` for any.", default="*"),
            "type": _str("allow or deny (a matching deny wins).", enum=list(PERMISSIONS), default="allow"),
        },
        "ACLs of the user's principal on one resource pattern.",
        required=["resource", "operations"],
    )
    spec = _obj(
        {
            "authentication": _obj(
                {
                    "type": _str(
                        "`scram-sha-512` / `scram-sha-256`: the operator generates a password into the Secret "
                        "named after the User (keys password, sasl.jaas.config) and sets the SCRAM credential; "
                        "`tls`: it issues a client certificate from the clients CA into that Secret (user.crt, "
                        "user.key). Both Secrets carry ca.crt, the CA that signs the brokers.",
                        enum=list(USER_AUTHENTICATION),
                    )
                },
                "How the user authenticates; omitted: ACLs only (for a principal authenticated otherwise).",
                required=["type"],
            ),
            "authorization": _obj(
                {
                    "type": _str("`simple`: Kafka ACLs.", enum=["simple"], default="simple"),
                    "acls": {"type": "array", "description": "The user's ACLs.", "items": acl},
                },
                "The ACLs of the principal User:<metadata.name> the operator manages: it creates these and "
                "deletes those it created that are no longer listed (ACLs created by others are kept).",
                required=["type"],
            ),
        },
        f"A Kafka user: its credential and its ACLs. {CLUSTER_LABEL_DOC} The principal is "
        "User:<metadata.name>. Deleting the User removes its credential, its ACLs and its Secret.",
    )
    acl_status = _obj(
        {
            "resourceType": _str("topic, group, cluster or transactionalId."),
            "name": _str("Resource name or prefix."),
            "patternType": _str("literal or prefix."),
            "operation": _str("The operation."),
            "type": _str("allow or deny."),
            "host": _str("Host."),
        },
        "An ACL the operator created for this User.",
    )
    status = _simple_status(
        {
            "principal": _str("The Kafka principal, User:<name>."),
            "secret": _str("The Secret holding the credentials.", nullable=True),
            "authentication": _str("The authentication applied.", nullable=True),
            "secretVersion": _str("resourceVersion of the Secret the credential was set from.", nullable=True),
            "certificateNotAfter": _str("When the client certificate expires (tls).", nullable=True),
            "acls": {"type": "array", "description": "The ACLs this User owns in Kafka.", "items": acl_status},
        }
    )
    return _crd(
        "User",
        "users",
        ["ku", "kafkauser"],
        spec,
        status,
        [
            _cluster_column(),
            _printer("Authentication", "string", ".spec.authentication.type", "scram-sha-512, scram-sha-256 or tls."),
            _ready_column(),
            _printer("Secret", "string", ".status.secret", "Secret with the credentials.", 1),
            _age(),
        ],
        "A Kafka user of a kopfka cluster: SCRAM credential or client certificate, and ACLs.",
    )


ALL_CRDS = {
    "kafkaclusters": kafkacluster_crd,
    "topics": topic_crd,
    "quotas": quota_crd,
    "users": user_crd,
}


def render(plural: str) -> str:
    """The YAML text of one CRD file, exactly as committed in `crds/`."""
    header = "# Generated by `python -m kopfka_operator.crds --write crds`; do not edit.\n"
    return header + yaml.safe_dump(ALL_CRDS[plural](), sort_keys=False, width=100)


def file_name(plural: str) -> str:
    return f"{GROUP}_{plural}.yaml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", metavar="DIR", type=Path, help="write the CRD files into DIR")
    args = parser.parse_args(argv)
    for plural in ALL_CRDS:
        if args.write:
            (args.write / file_name(plural)).write_text(render(plural))
        else:
            sys.stdout.write("---\n" + render(plural))
    return 0


if __name__ == "__main__":
    sys.exit(main())
