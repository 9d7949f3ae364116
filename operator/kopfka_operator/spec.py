"""Parse and validate a KafkaCluster spec into typed, immutable dataclasses.

The CRD schema already rejects most mistakes, but not every API server evaluates CEL rules
(older clusters, test servers) and defaults may be missing when the object was stored before a
CRD upgrade. So this module re-checks everything the manifests rely on and fills the same
defaults as the CRD: an invalid spec never reaches the children, it becomes a status message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .naming import (
    CONTROLLER_PORT,
    HTTP_PORT,
    MAX_BROKERS,
    MAX_CONTROLLERS,
    REPLICATION_PORT,
    Role,
)

# server.properties keys the operator writes (docs/runtime-contract.md) plus their aliases.
OWNED_CONFIG_KEYS = frozenset(
    {
        "node.id",
        "broker.id",
        "process.roles",
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "controller.listener.names",
        "inter.broker.listener.name",
        "security.inter.broker.protocol",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
        "log.dirs",
        "log.dir",
        "metadata.log.dir",
        "broker.rack",
        "kopfka.http.listener",
    }
)
# Listener names double as Service port names (lower-cased, _ -> -): at most 15 characters.
LISTENER_NAME = re.compile(r"[A-Z](_?[A-Z0-9])*")
RESERVED_LISTENER_NAMES = frozenset({"CONTROLLER", "REPLICATION"})
RESERVED_PORTS = frozenset({CONTROLLER_PORT, REPLICATION_PORT, HTTP_PORT})
DEFAULT_GRACE_SECONDS = 300


class SpecError(ValueError):
    """A spec the operator refuses to render; `reason` becomes the Warning condition's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Volume:
    id: int
    size: str
    storage_class: str | None = None
    delete_claim: bool = False
    kraft_metadata: bool = False


@dataclass(frozen=True)
class Pool:
    """One StatefulSet's worth of nodes sharing a role, storage layout and resources."""

    role: Role
    replicas: int
    volumes: tuple[Volume, ...]
    resources: Mapping[str, Any] = field(default_factory=dict)

    @property
    def metadata_volume(self) -> Volume:
        flagged = [v for v in self.volumes if v.kraft_metadata]
        return flagged[0] if flagged else min(self.volumes, key=lambda v: v.id)

    @property
    def is_voter(self) -> bool:
        return self.role in ("controller", "combined")

    @property
    def is_broker(self) -> bool:
        return self.role in ("broker", "combined")


# spec.listeners[].authentication.type -> the SASL mechanism it enables (tls: a client certificate)
AUTHENTICATION_TYPES = {
    "scram-sha-512": "SCRAM-SHA-512",
    "scram-sha-256": "SCRAM-SHA-256",
    "plain": "PLAIN",
    "tls": None,
}


# spec.listeners[].type: internal (the pods' DNS names) or one way in from outside the cluster.
LISTENER_TYPES = ("internal", "nodeport", "loadbalancer", "ingress")
# A host name or an IP address (advertisedHost, ingress hosts): also safe in the pod's shell.
HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.:-]{0,251}[A-Za-z0-9])?")
DEFAULT_INGRESS_CLASS = "nginx"
INGRESS_PORT = 443


@dataclass(frozen=True)
class BrokerOverride:
    """spec.listeners[].configuration.brokers[]: one broker's address on an external listener."""

    broker: int  # the broker's node id
    advertised_host: str | None = None
    advertised_port: int | None = None
    node_port: int | None = None  # nodeport: the port to ask for (else Kubernetes allocates one)
    host: str | None = None  # ingress: this broker's host (else from brokerHostTemplate)


@dataclass(frozen=True)
class ExternalConfig:
    """spec.listeners[].configuration of a nodeport, loadbalancer or ingress listener."""

    bootstrap_host: str | None = None  # ingress: the bootstrap host (required)
    bootstrap_node_port: int | None = None
    broker_host_template: str | None = None  # ingress: "{id}" is replaced with the node id
    ingress_class: str = DEFAULT_INGRESS_CLASS
    brokers: tuple[BrokerOverride, ...] = ()

    def override(self, node_id: int) -> BrokerOverride | None:
        return next((b for b in self.brokers if b.broker == node_id), None)


@dataclass(frozen=True)
class Listener:
    name: str
    port: int
    protocol: str = "PLAINTEXT"  # derived from tls and authentication
    tls: bool = False
    authentication: str | None = None  # a key of AUTHENTICATION_TYPES
    type: str = "internal"  # one of LISTENER_TYPES
    external: ExternalConfig = field(default_factory=ExternalConfig)

    @property
    def mechanism(self) -> str | None:
        """The SASL mechanism clients use on this listener (None: no SASL)."""
        return AUTHENTICATION_TYPES[self.authentication] if self.authentication else None

    @property
    def is_external(self) -> bool:
        return self.type != "internal"


def listener_protocol(tls: bool, authentication: str | None) -> str:
    sasl = authentication is not None and authentication != "tls"
    if tls:
        return "SASL_SSL" if sasl else "SSL"
    return "SASL_PLAINTEXT" if sasl else "PLAINTEXT"


@dataclass(frozen=True)
class CertificateAuthority:
    """spec.clusterCa / spec.clientsCa. With generate=False the user provides the CA Secret."""

    generate: bool = True
    validity_days: int = 365
    renewal_days: int = 30


@dataclass(frozen=True)
class Authorization:
    """spec.authorization (type simple: Kafka's StandardAuthorizer)."""

    super_users: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodTemplate:
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    affinity: Mapping[str, Any] | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    topology_spread_constraints: tuple[Mapping[str, Any], ...] = ()
    priority_class_name: str | None = None
    termination_grace_period_seconds: int = DEFAULT_GRACE_SECONDS


@dataclass(frozen=True)
class RebalanceSpec:
    """spec.rebalance: how the data mover moves replicas (scale up/down, JBOD disk removal)."""

    on_scale_up: bool = True
    throttle_bytes_per_second: int = 0  # 0: unthrottled
    max_concurrent_moves: int = 5


@dataclass(frozen=True)
class ClusterSpec:
    image: str
    brokers: Pool
    controllers: Pool | None
    listeners: tuple[Listener, ...]
    config: Mapping[str, str]
    image_pull_policy: str = "IfNotPresent"
    image_pull_secrets: tuple[str, ...] = ()
    metrics_enabled: bool = True
    rack_topology_key: str | None = None
    pod_template: PodTemplate = field(default_factory=PodTemplate)
    metadata_version: str | None = None  # a release ("4.3"), as kafka-storage --release-version
    authorization: Authorization | None = None
    cluster_ca: CertificateAuthority = field(default_factory=CertificateAuthority)
    clients_ca: CertificateAuthority = field(default_factory=CertificateAuthority)
    rebalance: RebalanceSpec = field(default_factory=RebalanceSpec)

    @property
    def secured(self) -> bool:
        """TLS or authentication on a client listener, or authorization: then the operator's
        own listeners (REPLICATION, CONTROLLER) are mutual TLS with the cluster CA too, and the
        operator connects as a super user with its own certificate."""
        return self.authorization is not None or any(lst.tls or lst.authentication for lst in self.listeners)

    @property
    def external_listeners(self) -> tuple[Listener, ...]:
        return tuple(lst for lst in self.listeners if lst.is_external)

    @property
    def clients_ca_used(self) -> bool:
        """Whether a listener takes client certificates (the clients CA signs them)."""
        return any(lst.authentication == "tls" for lst in self.listeners)

    @property
    def mode(self) -> str:
        return "combined" if self.controllers is None else "dedicated"

    @property
    def pools(self) -> tuple[Pool, ...]:
        return (self.brokers,) if self.controllers is None else (self.controllers, self.brokers)

    @property
    def voters(self) -> Pool:
        """The pool whose pods form the KRaft quorum."""
        return self.controllers or self.brokers


def _get(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], path: str, default: Any = None) -> Any:
    value = obj.get(key, default)
    if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
        raise SpecError("InvalidSpec", f"{path}.{key} has the wrong type ({type(value).__name__})")
    return value


def _ranged(value: int, lo: int, hi: int, where: str) -> int:
    if not lo <= value <= hi:
        raise SpecError("InvalidSpec", f"{where} must be between {lo} and {hi}, got {value}")
    return value


def _volumes(storage: Mapping[str, Any], path: str) -> tuple[Volume, ...]:
    if _get(storage, "type", str, path, "jbod") != "jbod":
        raise SpecError("InvalidSpec", f"{path}.type must be jbod")
    raw = _get(storage, "volumes", list, path) or []
    if not raw:
        raise SpecError("InvalidSpec", f"{path}.volumes needs at least one volume")
    volumes = []
    for i, item in enumerate(raw):
        where = f"{path}.volumes[{i}]"
        if not isinstance(item, Mapping) or "id" not in item or "size" not in item:
            raise SpecError("InvalidSpec", f"{where} needs an id and a size")
        volumes.append(
            Volume(
                id=_ranged(_get(item, "id", int, where), 0, 999, f"{where}.id"),
                size=str(_get(item, "size", (str, int), where)),
                storage_class=_get(item, "storageClass", str, where),
                delete_claim=bool(_get(item, "deleteClaim", bool, where, False)),
                kraft_metadata=bool(_get(item, "kraftMetadata", bool, where, False)),
            )
        )
    ids = [v.id for v in volumes]
    if len(set(ids)) != len(ids):
        raise SpecError("InvalidSpec", f"{path}.volumes has duplicate ids {sorted(ids)}")
    if sum(v.kraft_metadata for v in volumes) > 1:
        raise SpecError("InvalidSpec", f"{path}.volumes: at most one volume may set kraftMetadata")
    return tuple(sorted(volumes, key=lambda v: v.id))


def _pool(raw: Mapping[str, Any], role: Role, path: str, max_replicas: int, min_replicas: int) -> Pool:
    if not isinstance(raw, Mapping):
        raise SpecError("InvalidSpec", f"{path} must be an object")
    storage = _get(raw, "storage", Mapping, path)
    if storage is None:
        raise SpecError("InvalidSpec", f"{path}.storage is required")
    return Pool(
        role=role,
        replicas=_ranged(_get(raw, "replicas", int, path, 3), min_replicas, max_replicas, f"{path}.replicas"),
        volumes=_volumes(storage, f"{path}.storage"),
        resources=dict(_get(raw, "resources", Mapping, path) or {}),
    )


def _listeners(raw: list[Any] | None) -> tuple[Listener, ...]:
    items = raw if raw is not None else [{"name": "CLIENT", "port": 9092}]
    if not items:
        raise SpecError("InvalidSpec", "spec.listeners needs at least one listener")
    listeners = []
    for i, item in enumerate(items):
        where = f"spec.listeners[{i}]"
        if not isinstance(item, Mapping):
            raise SpecError("InvalidSpec", f"{where} must be an object")
        name = _get(item, "name", str, where) or ""
        port = _get(item, "port", int, where)
        if name in RESERVED_LISTENER_NAMES:
            raise SpecError("InvalidSpec", f"{where}.name {name} is reserved for the operator")
        if len(name) > 15 or not LISTENER_NAME.fullmatch(name):
            raise SpecError("InvalidSpec", f"{where}.name must be 1-15 upper case letters, digits or single _")
        if port is None or port in RESERVED_PORTS:
            raise SpecError("InvalidSpec", f"{where}.port must be set and not one of {sorted(RESERVED_PORTS)}")
        legacy = _get(item, "protocol", str, where, "PLAINTEXT")
        if legacy != "PLAINTEXT":
            raise SpecError("InvalidSpec", f"{where}.protocol {legacy}: set tls and authentication instead")
        tls = bool(_get(item, "tls", bool, where, False))
        auth = _get(_get(item, "authentication", Mapping, where) or {}, "type", str, f"{where}.authentication")
        if auth is not None and auth not in AUTHENTICATION_TYPES:
            raise SpecError(
                "InvalidSpec", f"{where}.authentication.type must be one of {', '.join(AUTHENTICATION_TYPES)}"
            )
        if auth == "tls" and not tls:
            raise SpecError("InvalidSpec", f"{where}: authentication type tls needs tls: true")
        kind = _get(item, "type", str, where, "internal")
        if kind not in LISTENER_TYPES:
            raise SpecError("InvalidSpec", f"{where}.type must be one of {', '.join(LISTENER_TYPES)}")
        if kind == "ingress" and not tls:
            raise SpecError("InvalidSpec", f"{where}: type ingress needs tls: true (TLS passthrough, routed by SNI)")
        external = _external_config(_get(item, "configuration", Mapping, where) or {}, kind, f"{where}.configuration")
        listeners.append(
            Listener(
                name,
                _ranged(port, 1024, 65535, f"{where}.port"),
                listener_protocol(tls, auth),
                tls,
                auth,
                kind,
                external,
            )
        )
    for attr in ("name", "port"):
        values = [getattr(lst, attr) for lst in listeners]
        if len(set(values)) != len(values):
            raise SpecError("InvalidSpec", f"spec.listeners: duplicate {attr}s")
    return tuple(listeners)


def _host(value: str | None, where: str) -> str | None:
    if value is not None and not HOST_NAME.fullmatch(value):
        raise SpecError("InvalidSpec", f"{where} must be a host name or an IP address, got {value!r}")
    return value


def _external_config(raw: Mapping[str, Any], kind: str, where: str) -> ExternalConfig:
    """The external addresses of one listener; for an internal listener nothing may be set."""
    if kind == "internal":
        if raw:
            raise SpecError("InvalidSpec", f"{where} is for nodeport, loadbalancer and ingress listeners only")
        return ExternalConfig()
    bootstrap = _get(raw, "bootstrap", Mapping, where) or {}
    brokers = []
    for i, item in enumerate(_get(raw, "brokers", list, where) or []):
        at = f"{where}.brokers[{i}]"
        if not isinstance(item, Mapping) or "broker" not in item:
            raise SpecError("InvalidSpec", f"{at} needs a broker (its node id)")
        node_port = _get(item, "nodePort", int, at)
        brokers.append(
            BrokerOverride(
                broker=_ranged(_get(item, "broker", int, at), 0, MAX_BROKERS - 1, f"{at}.broker"),
                advertised_host=_host(_get(item, "advertisedHost", str, at), f"{at}.advertisedHost"),
                advertised_port=_get(item, "advertisedPort", int, at),
                node_port=None if node_port is None else _ranged(node_port, 1, 65535, f"{at}.nodePort"),
                host=_host(_get(item, "host", str, at), f"{at}.host"),
            )
        )
        if brokers[-1].advertised_port is not None:
            _ranged(brokers[-1].advertised_port, 1, 65535, f"{at}.advertisedPort")
    if len({b.broker for b in brokers}) != len(brokers):
        raise SpecError("InvalidSpec", f"{where}.brokers names a broker twice")
    bootstrap_node_port = _get(bootstrap, "nodePort", int, f"{where}.bootstrap")
    config = ExternalConfig(
        bootstrap_host=_host(_get(bootstrap, "host", str, f"{where}.bootstrap"), f"{where}.bootstrap.host"),
        bootstrap_node_port=bootstrap_node_port,
        broker_host_template=_get(raw, "brokerHostTemplate", str, where),
        ingress_class=_get(raw, "class", str, where, DEFAULT_INGRESS_CLASS),
        brokers=tuple(brokers),
    )
    if kind == "ingress":
        template = config.broker_host_template
        if not config.bootstrap_host or not template:
            raise SpecError("InvalidSpec", f"{where}: type ingress needs bootstrap.host and brokerHostTemplate")
        if "{id}" not in template or not HOST_NAME.fullmatch(template.replace("{id}", "0")):
            raise SpecError("InvalidSpec", f"{where}.brokerHostTemplate must be a host name containing {{id}}")
    return config


# Security keys the operator writes when the cluster is secured (spec.listeners tls or
# authentication, spec.authorization); refused in spec.config then. Listener-prefixed forms of
# the operator's own listeners are refused by prefix.
SECURITY_CONFIG_KEYS = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.client.auth",
        "sasl.enabled.mechanisms",
        "ssl.principal.mapping.rules",
    }
)
AUTHORIZATION_CONFIG_KEYS = frozenset({"authorizer.class.name", "super.users"})


def _check_security_config(config: Mapping[str, str], listeners: tuple[Listener, ...], secured: bool) -> None:
    for key in sorted(config):
        if key in AUTHORIZATION_CONFIG_KEYS:
            raise SpecError(
                "OperatorOwnedConfigKey", f"spec.config.{key} is set by the operator: use spec.authorization"
            )
        if not secured:
            continue
        listener, _, suffix = key.removeprefix("listener.name.").partition(".")
        prefixed = key.startswith("listener.name.")
        if (
            key in SECURITY_CONFIG_KEYS
            or (prefixed and listener in ("replication", "controller"))
            or (prefixed and suffix in SECURITY_CONFIG_KEYS)
        ):
            raise SpecError(
                "OperatorOwnedConfigKey",
                f"spec.config.{key} is set by the operator for a secured cluster: use "
                "spec.listeners[].tls and .authentication",
            )
    for lst in listeners:
        jaas = f"listener.name.{lst.name.lower()}.plain.sasl.jaas.config"
        if lst.authentication == "plain" and jaas not in config:
            raise SpecError(
                "InvalidSpec",
                f"listener {lst.name} authenticates with PLAIN: its users come from spec.config.{jaas} "
                '(PlainLoginModule required user_<name>="<password>" ...); SCRAM users are managed with '
                "User resources",
            )


def _certificate_authority(raw: Mapping[str, Any] | None, path: str) -> CertificateAuthority:
    raw = raw or {}
    ca = CertificateAuthority(
        generate=bool(_get(raw, "generateCertificateAuthority", bool, path, True)),
        validity_days=_ranged(_get(raw, "validityDays", int, path, 365), 1, 36500, f"{path}.validityDays"),
        renewal_days=_ranged(_get(raw, "renewalDays", int, path, 30), 1, 36500, f"{path}.renewalDays"),
    )
    if ca.renewal_days >= ca.validity_days:
        raise SpecError("InvalidSpec", f"{path}.renewalDays must be less than validityDays")
    return ca


def _authorization(raw: Mapping[str, Any] | None) -> Authorization | None:
    if raw is None:
        return None
    if _get(raw, "type", str, "spec.authorization", "simple") != "simple":
        raise SpecError("InvalidSpec", "spec.authorization.type must be simple")
    users = _get(raw, "superUsers", list, "spec.authorization") or []
    if not all(isinstance(u, str) and u and ";" not in u for u in users):
        raise SpecError("InvalidSpec", "spec.authorization.superUsers must be non-empty names without ';'")
    return Authorization(tuple(users))


def parse_config(raw: Mapping[str, Any] | None) -> dict[str, str]:
    """User server.properties overrides as strings; operator-owned keys are refused by name."""
    config: dict[str, str] = {}
    for key, value in (raw or {}).items():
        if key in OWNED_CONFIG_KEYS:
            raise SpecError(
                "OperatorOwnedConfigKey",
                f"spec.config.{key} is set by the operator and cannot be overridden; remove it "
                "(see the KafkaCluster field that controls it)",
            )
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise SpecError("InvalidSpec", f"spec.config.{key} must be a string or an integer")
        if any(c in str(value) for c in "\r\n"):
            raise SpecError("InvalidSpec", f"spec.config.{key} must be a single line")
        config[key] = str(value)
    return config


def _pod_template(raw: Mapping[str, Any]) -> PodTemplate:
    path = "spec.podTemplate"
    return PodTemplate(
        annotations=dict(_get(raw, "annotations", Mapping, path) or {}),
        labels=dict(_get(raw, "labels", Mapping, path) or {}),
        affinity=_get(raw, "affinity", Mapping, path),
        tolerations=tuple(_get(raw, "tolerations", list, path) or ()),
        node_selector=dict(_get(raw, "nodeSelector", Mapping, path) or {}),
        topology_spread_constraints=tuple(_get(raw, "topologySpreadConstraints", list, path) or ()),
        priority_class_name=_get(raw, "priorityClassName", str, path),
        termination_grace_period_seconds=_ranged(
            _get(raw, "terminationGracePeriodSeconds", int, path, DEFAULT_GRACE_SECONDS),
            30,
            86400,
            f"{path}.terminationGracePeriodSeconds",
        ),
    )


def parse_spec(spec: Mapping[str, Any], default_image: str | None = None) -> ClusterSpec:
    """The typed spec, or SpecError naming the first problem found."""
    image = _get(spec, "image", str, "spec") or default_image
    if not image:
        raise SpecError("InvalidSpec", "spec.image is not set and the operator has no default image")
    mode = _get(spec, "mode", str, "spec", "dedicated")
    if mode not in ("dedicated", "combined"):
        raise SpecError("InvalidSpec", f"spec.mode must be dedicated or combined, got {mode}")
    raw_controllers: Any = spec.get("controllers")
    if mode == "combined" and raw_controllers is not None:
        raise SpecError(
            "InvalidSpec",
            "combined mode: the broker pods are the controllers; omit spec.controllers",
        )
    if mode == "dedicated" and raw_controllers is None:
        raise SpecError("InvalidSpec", "dedicated mode needs spec.controllers")
    raw_brokers = spec.get("brokers")
    if raw_brokers is None:
        raise SpecError("InvalidSpec", "spec.brokers is required")
    if mode == "combined":
        brokers = _pool(raw_brokers, "combined", "spec.brokers", MAX_CONTROLLERS, 1)
        controllers = None
    else:
        brokers = _pool(raw_brokers, "broker", "spec.brokers", MAX_BROKERS, 0)
        controllers = _pool(raw_controllers, "controller", "spec.controllers", MAX_CONTROLLERS, 1)
    rack = _get(raw_brokers, "rack", Mapping, "spec.brokers")
    pull_secrets = _get(spec, "imagePullSecrets", list, "spec") or []
    listeners = _listeners(_get(spec, "listeners", list, "spec"))
    config = parse_config(_get(spec, "config", Mapping, "spec"))
    authorization = _authorization(_get(spec, "authorization", Mapping, "spec"))
    secured = authorization is not None or any(lst.tls or lst.authentication for lst in listeners)
    _check_security_config(config, listeners, secured)
    return ClusterSpec(
        image=image,
        brokers=brokers,
        controllers=controllers,
        listeners=listeners,
        config=config,
        authorization=authorization,
        cluster_ca=_certificate_authority(_get(spec, "clusterCa", Mapping, "spec"), "spec.clusterCa"),
        clients_ca=_certificate_authority(_get(spec, "clientsCa", Mapping, "spec"), "spec.clientsCa"),
        image_pull_policy=_get(spec, "imagePullPolicy", str, "spec", "IfNotPresent"),
        image_pull_secrets=tuple(str(s.get("name")) for s in pull_secrets if isinstance(s, Mapping)),
        metrics_enabled=bool(_get(_get(spec, "metrics", Mapping, "spec") or {}, "enabled", bool, "spec.metrics", True)),
        rack_topology_key=_get(rack, "topologyKey", str, "spec.brokers.rack") if rack else None,
        pod_template=_pod_template(_get(spec, "podTemplate", Mapping, "spec") or {}),
        metadata_version=_metadata_version(spec.get("metadataVersion")),
        rebalance=parse_rebalance(spec),
    )


def parse_rebalance(spec: Mapping[str, Any]) -> RebalanceSpec:
    raw = _get(spec, "rebalance", Mapping, "spec") or {}
    where = "spec.rebalance"
    return RebalanceSpec(
        on_scale_up=bool(_get(raw, "onScaleUp", bool, where, True)),
        throttle_bytes_per_second=_ranged(
            _get(raw, "throttleBytesPerSecond", int, where, 0), 0, 2**63 - 1, f"{where}.throttleBytesPerSecond"
        ),
        max_concurrent_moves=_ranged(
            _get(raw, "maxConcurrentMoves", int, where, 5), 1, 1000, f"{where}.maxConcurrentMoves"
        ),
    )


def _metadata_version(raw: Any) -> str | None:
    """A release kopfka knows or a feature level; checked here so a typo is a status message,
    not a format-storage init container failing on every node."""
    if raw is None or raw == "":
        return None
    text = str(raw)
    from kopfka.metadata.features import metadata_level_for

    try:
        metadata_level_for(text)
    except (KeyError, ValueError) as exc:
        raise SpecError("InvalidSpec", f"spec.metadataVersion {text!r} is not a known release: {exc}") from None
    return text
