"""What each listener speaks: its security protocol and its (listener-overridden) settings.

Kafka resolves every security key of a listener as `listener.name.<listener>.<key>` first,
then the plain `<key>`; SASL keys may also be per mechanism:
`listener.name.<listener>.<mechanism>.<key>` (e.g. `...scram-sha-512.sasl.jaas.config`).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kopfka.config.definitions import ConfigError
from kopfka.security.jaas import parse as parse_jaas
from kopfka.security.principal import SslPrincipalMapper
from kopfka.security.scram import ScramCredential

if TYPE_CHECKING:
    from kopfka.config.server_config import KafkaConfig

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)  # in Kafka's id order
SECURITY_PROTOCOL_IDS = {name: i for i, name in enumerate(SECURITY_PROTOCOLS)}  # Kafka's SecurityProtocol ids

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
LISTENER_PREFIX = "listener.name."


def uses_tls(protocol: str) -> bool:
    return protocol in (SSL, SASL_SSL)


def uses_sasl(protocol: str) -> bool:
    return protocol in (SASL_PLAINTEXT, SASL_SSL)


def listener_protocol(cfg: KafkaConfig, listener: str) -> str:
    from kopfka.config.server_config import listener_security_protocols

    proto = listener_security_protocols(cfg).get(listener.upper())
    if proto is None:
        raise ConfigError(
            "listener.security.protocol.map",
            ",".join(cfg["listener.security.protocol.map"]),
            f"No security protocol defined for listener {listener}",
        )
    return proto


def is_listener_key(key: str) -> bool:
    """A `listener.name.<l>.[<mechanism>.]<key>` override of a known server key."""
    from kopfka.config.server_config import SERVER_CONFIG

    if not key.startswith(LISTENER_PREFIX):
        return False
    rest = key[len(LISTENER_PREFIX) :].partition(".")[2]
    if rest in SERVER_CONFIG:
        return True
    mech, _, tail = rest.partition(".")
    return mech.upper() in (*SUPPORTED_MECHANISMS, "GSSAPI", "OAUTHBEARER") and tail in SERVER_CONFIG


@dataclass(frozen=True)
class ListenerSettings:
    """One listener's view of the security keys, overrides applied and values typed."""

    config: KafkaConfig
    listener: str

    @property
    def protocol(self) -> str:
        return listener_protocol(self.config, self.listener)

    def _raw(self, key: str, mechanism: str | None = None) -> tuple[bool, Any]:
        prefix = f"{LISTENER_PREFIX}{self.listener.lower()}."
        originals = self.config.originals
        if mechanism is not None and prefix + f"{mechanism.lower()}.{key}" in originals:
            return True, originals[prefix + f"{mechanism.lower()}.{key}"]
        if prefix + key in originals:
            return True, originals[prefix + key]
        return False, None

    def is_overridden(self, key: str, mechanism: str | None = None) -> bool:
        return self._raw(key, mechanism)[0]

    def get(self, key: str, mechanism: str | None = None) -> Any:
        from kopfka.config.server_config import SERVER_CONFIG

        found, raw = self._raw(key, mechanism)
        if not found:
            return self.config.values.get(key)
        name = f"{LISTENER_PREFIX}{self.listener.lower()}.{key}"
        defn = SERVER_CONFIG.keys[key]
        try:
            return defn.parse(raw)
        except ConfigError as exc:
            raise ConfigError(name, raw, exc.reason) from None

    def enabled_mechanisms(self) -> list[str]:
        mechs = [m.upper() for m in self.get("sasl.enabled.mechanisms")]
        bad = [m for m in mechs if m not in SUPPORTED_MECHANISMS]
        if bad:
            raise ConfigError(
                "sasl.enabled.mechanisms",
                ",".join(mechs),
                f"listener {self.listener}: {', '.join(bad)} not supported by kopfka "
                f"(supported: {', '.join(SUPPORTED_MECHANISMS)})",
            )
        if not mechs:
            raise ConfigError(
                "sasl.enabled.mechanisms", "", f"listener {self.listener} uses SASL but enables no mechanism"
            )
        return mechs


def inter_broker_listener(cfg: KafkaConfig) -> str:
    """inter.broker.listener.name, else the listener named after security.inter.broker.protocol,
    else the first broker listener (a single-listener config needs neither key)."""
    name = cfg["inter.broker.listener.name"]
    if name:
        return str(name).upper()
    names = [lst.name for lst in cfg.broker_listeners]
    proto = str(cfg["security.inter.broker.protocol"]).upper()
    if proto in names:
        return proto
    return names[0] if names else PLAINTEXT


def controller_listener(cfg: KafkaConfig) -> str:
    """The listener this node's clients use to reach the controllers: the first of controller.listener.names."""
    names = cfg.controller_listener_names
    return names[0] if names else "CONTROLLER"


@dataclass
class ListenerSecurity:
    """Everything a listener needs to secure a connection, built once at startup."""

    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    mapper: SslPrincipalMapper = field(default_factory=lambda: SslPrincipalMapper("DEFAULT"))
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict)
    reauth_ms: dict[str, int] = field(default_factory=dict)  # mechanism -> connections.max.reauth.ms
    failed_auth_delay_ms: int = 100
    max_receive_bytes: int = 524_288
    # (user, mechanism) -> stored credential; set by the server from its metadata image
    scram_lookup: Callable[[str, str], ScramCredential | None] = lambda _u, _m: None

    @property
    def sasl(self) -> bool:
        return uses_sasl(self.protocol)


def listener_security(cfg: KafkaConfig, name: str) -> ListenerSecurity:
    """Resolve and validate one listener's security (a ConfigError names the key at fault)."""
    s = ListenerSettings(cfg, name)
    proto = s.protocol
    sec = ListenerSecurity(
        name,
        proto,
        mapper=SslPrincipalMapper(s.get("ssl.principal.mapping.rules")),
        failed_auth_delay_ms=int(s.get("connection.failed.authentication.delay.ms")),
        max_receive_bytes=int(s.get("sasl.server.max.receive.size")),
    )
    if s.get("principal.builder.class"):
        raise ConfigError(
            "principal.builder.class", s.get("principal.builder.class"), "custom principal builders are not supported"
        )
    if uses_tls(proto):
        # KIP-684: on SASL_SSL only a listener-prefixed ssl.client.auth applies
        client_auth = s.get("ssl.client.auth") if proto == SSL or s.is_overridden("ssl.client.auth") else "none"
        from kopfka.security.ssl_contexts import server_context  # cryptography: only TLS listeners pay its import

        sec.ssl_context = server_context(s.get, client_auth)
    if uses_sasl(proto):
        sec.mechanisms = tuple(s.enabled_mechanisms())
        for mech in sec.mechanisms:
            sec.reauth_ms[mech] = int(s.get("connections.max.reauth.ms", mech))
        if "PLAIN" in sec.mechanisms:
            text = s.get("sasl.jaas.config", "PLAIN")
            if not s.is_overridden("sasl.jaas.config", "PLAIN") or not text:
                raise ConfigError(
                    f"{LISTENER_PREFIX}{name.lower()}.plain.sasl.jaas.config",
                    None,
                    f'listener {name} enables PLAIN: list its users as user_<name>="<password>" options',
                )
            sec.plain_users = parse_jaas(text, f"{LISTENER_PREFIX}{name.lower()}.plain.sasl.jaas.config").plain_users()
    return sec
