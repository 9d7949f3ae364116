"""How a client connects to a secured listener: the broker's own clients (replica fetcher,
node-to-controller channel, raft) and kopfka's tools.

`ClientSecurity.for_listener` derives the broker's client side from its server config as Kafka
does: the inter-broker (or controller) listener's protocol, its ssl.* keys (the keystore doubles
as the client certificate for mutual TLS), `sasl.mechanism.inter.broker.protocol` /
`sasl.mechanism.controller.protocol` and the username/password options of that listener's
`listener.name.<l>.<mechanism>.sasl.jaas.config`. `ClientSecurity.from_properties` reads a Kafka
client config (`--command-config`): security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kopfka.config.definitions import ConfigError
from kopfka.security import jaas
from kopfka.security.listeners import (
    LISTENER_PREFIX,
    PLAINTEXT,
    SECURITY_PROTOCOLS,
    SUPPORTED_MECHANISMS,
    ListenerSettings,
    controller_listener,
    inter_broker_listener,
    uses_sasl,
    uses_tls,
)

if TYPE_CHECKING:
    from kopfka.config.server_config import KafkaConfig


class AuthenticationError(ConnectionError):
    """The server refused our credentials (SASL) — retried like a lost connection by the
    broker's own clients, reported as is by the tools."""


@dataclass(frozen=True)
class ClientSecurity:
    """How one of kopfka's own clients connects: security protocol, TLS context, SASL mechanism and credentials."""

    protocol: str = PLAINTEXT
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = field(default="", repr=False)  # never in a log line through repr

    @property
    def tls(self) -> bool:
        return uses_tls(self.protocol)

    @classmethod
    def for_listener(cls, cfg: KafkaConfig, listener: str, mechanism: str) -> ClientSecurity:
        s = ListenerSettings(cfg, listener)
        proto = s.protocol
        ctx = _tls_context(s.get) if uses_tls(proto) else None
        if not uses_sasl(proto):
            return cls(proto, ctx)
        mech = mechanism.upper()
        if mech not in SUPPORTED_MECHANISMS:
            raise ConfigError(
                "sasl.mechanism.inter.broker.protocol"
                if listener != controller_listener(cfg)
                else "sasl.mechanism.controller.protocol",
                mech,
                f"listener {listener} uses {proto}: use one of {', '.join(SUPPORTED_MECHANISMS)}",
            )
        key = f"{LISTENER_PREFIX}{listener.lower()}.{mech.lower()}.sasl.jaas.config"
        text = s.get("sasl.jaas.config", mech)
        if not s.is_overridden("sasl.jaas.config", mech) or not text:
            raise ConfigError(
                key, None, f"the broker's own {mech} client on {listener} needs username and password options"
            )
        entry = jaas.parse(text, key)
        user, password = entry.options.get("username"), entry.options.get("password")
        if not user or password is None:
            raise ConfigError(key, "<hidden>", 'needs username="..." and password="..." options')
        return cls(proto, ctx, mech, user, password)

    @classmethod
    def inter_broker(cls, cfg: KafkaConfig) -> ClientSecurity:
        return cls.for_listener(cfg, inter_broker_listener(cfg), str(cfg["sasl.mechanism.inter.broker.protocol"]))

    @classmethod
    def controller(cls, cfg: KafkaConfig) -> ClientSecurity:
        return cls.for_listener(cfg, controller_listener(cfg), str(cfg["sasl.mechanism.controller.protocol"]))

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        """A Kafka client config (kafka-*.sh --command-config)."""
        from kopfka.config.server_config import SERVER_CONFIG

        proto = props.get("security.protocol", PLAINTEXT).strip().upper()
        if proto not in SECURITY_PROTOCOLS:
            raise ConfigError("security.protocol", proto, f"expected one of {', '.join(SECURITY_PROTOCOLS)}")

        def get(key: str) -> Any:
            defn = SERVER_CONFIG.keys[key]
            return defn.parse(props[key]) if key in props else defn.default

        ctx = _tls_context(get) if uses_tls(proto) else None
        if not uses_sasl(proto):
            return cls(proto, ctx)
        mech = props.get("sasl.mechanism", "GSSAPI").strip().upper()
        if mech not in SUPPORTED_MECHANISMS:
            raise ConfigError("sasl.mechanism", mech, f"expected one of {', '.join(SUPPORTED_MECHANISMS)}")
        if "sasl.jaas.config" not in props:
            raise ConfigError("sasl.jaas.config", None, f"{proto} needs the client's username and password")
        entry = jaas.parse(props["sasl.jaas.config"])
        user, password = entry.options.get("username"), entry.options.get("password")
        if not user or password is None:
            raise ConfigError("sasl.jaas.config", "<hidden>", 'needs username="..." and password="..." options')
        return cls(proto, ctx, mech, user, password)


PLAINTEXT_CLIENT = ClientSecurity()


def _tls_context(get: Any) -> ssl.SSLContext:
    """Imported here: cryptography costs ~0.1 s of every process start, and only TLS needs it."""
    from kopfka.security.ssl_contexts import client_context

    return client_context(get)
