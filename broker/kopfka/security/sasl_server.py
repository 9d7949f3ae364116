"""The broker's SASL authenticator for one connection (Kafka's SaslServerAuthenticator), sans-IO.

States: `initial` (ApiVersions or SaslHandshake may come) → `handshake` (SaslHandshake must
come) → `authenticate` (SaslAuthenticate tokens; after a v0 handshake the tokens come raw,
size-prefixed, without a Kafka header) → `complete`. Anything else is an authentication failure:
the connection answers (when Kafka does) after `connection.failed.authentication.delay.ms`
and closes. Failure messages are Kafka's: a wrong password and an unknown user read the same.

Re-authentication (KIP-368): once complete, a SaslHandshake on the connection starts the
exchange again with the same mechanism, and must end with the same principal. A session has
a lifetime when `connections.max.reauth.ms` is set for the mechanism; a request other than
SaslHandshake after it expired closes the connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kopfka.protocol.errors import ErrorCode
from kopfka.security import plain, scram
from kopfka.security.listeners import ListenerSecurity
from kopfka.security.principal import USER_TYPE, KafkaPrincipal

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36


@dataclass
class AuthFailure(Exception):
    """Authentication failed: send `response` (if any) after the failure delay, then close."""

    reason: str
    response: dict[str, Any] | None = None


class SaslServerAuthenticator:
    def __init__(self, security: ListenerSecurity, clock: Callable[[], float] = time.monotonic) -> None:
        self.security = security
        self.clock = clock
        self.state = "initial"
        self.mechanism: str | None = None
        self.raw_tokens = False  # SaslHandshake v0: tokens without Kafka headers
        self.principal: KafkaPrincipal | None = None
        self.session_expiry: float | None = None
        self.client_supports_reauth = False
        self._previous: tuple[str, KafkaPrincipal] | None = None  # while re-authenticating
        self._bad_reauth_mechanism: str | None = None
        self._scram: scram.ScramServer | None = None

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    @property
    def text(self) -> str:
        return "re-authentication" if self._previous is not None else "authentication"

    def expired(self) -> bool:
        return self.session_expiry is not None and self.clock() >= self.session_expiry

    def accepts_api_versions(self) -> bool:
        return self.state == "initial"

    def api_versions_answered(self, ok: bool) -> None:
        """An ApiVersions answered in the initial state; only a supported one moves on (Kafka)."""
        if ok:
            self.state = "handshake"

    def begin_reauthentication(self) -> None:
        assert self.complete and self.mechanism is not None and self.principal is not None
        self._previous = (self.mechanism, self.principal)
        self.state = "handshake"

    # --- Kafka-framed requests -----------------------------------------------------------
    def handle(self, api_key: int, version: int, body: Any) -> dict[str, Any]:
        """Answer SaslHandshake/SaslAuthenticate; raise AuthFailure for anything out of order."""
        if self.state in ("initial", "handshake"):
            if api_key != SASL_HANDSHAKE or body is None:
                raise AuthFailure(f"Unexpected Kafka request of type {api_key} v{version} during SASL handshake.")
            return self._handshake(version, str(body.mechanism))
        if self.state == "authenticate":
            if api_key != SASL_AUTHENTICATE or body is None:
                raise AuthFailure(f"Unexpected Kafka request of type {api_key} v{version} during SASL authentication.")
            if version > 0:
                self.client_supports_reauth = True
            token, lifetime_ms = self._evaluate(bytes(body.auth_bytes))
            return {
                "error_code": ErrorCode.none,
                "error_message": None,
                "auth_bytes": token,
                "session_lifetime": lifetime_ms,
            }
        raise AuthFailure(f"Unexpected request in SASL state {self.state}")

    def _handshake(self, version: int, mechanism: str) -> dict[str, Any]:
        enabled = list(self.security.mechanisms)
        if mechanism not in enabled:
            raise AuthFailure(
                f"Unsupported SASL mechanism {mechanism}",
                {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": enabled},
            )
        if self._previous is not None and mechanism != self._previous[0]:
            self._bad_reauth_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication "
                f"of mechanism '{self._previous[0]}'"
            )
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._scram = None
        self.state = "authenticate"
        return {"error_code": ErrorCode.none, "mechanisms": enabled}

    # --- tokens --------------------------------------------------------------------------
    def evaluate_raw(self, token: bytes) -> bytes:
        """A raw (SaslHandshake v0) token; the answer goes back size-prefixed without a header."""
        out, _ = self._evaluate(token)
        return out

    def _failure(self, message: str) -> AuthFailure:
        self.state = "failed"
        return AuthFailure(
            message,
            None
            if self.raw_tokens
            else {
                "error_code": ErrorCode.sasl_authentication_failed,
                "error_message": message,
                "auth_bytes": b"",
                "session_lifetime": 0,
            },
        )

    def _evaluate(self, token: bytes) -> tuple[bytes, int]:
        if self._bad_reauth_mechanism is not None:
            raise self._failure(self._bad_reauth_mechanism)
        mech = self.mechanism
        assert mech is not None
        generic = f"Authentication failed during {self.text} due to invalid credentials with SASL mechanism {mech}"
        user: str | None = None
        if mech == "PLAIN":
            try:
                user = plain.authenticate(token, self.security.plain_users)
            except plain.PlainError as exc:
                raise self._failure(str(exc)) from None
            out = b""
        else:
            if self._scram is None:
                self._scram = scram.ScramServer(mech, lambda u: self.security.scram_lookup(u, mech))
            try:
                out = self._scram.evaluate(token)
            except scram.ScramError as exc:
                # Kafka sends its own message for an authzid mismatch; everything else is generic
                msg = str(exc) if "authorization id" in str(exc) else generic
                raise self._failure(msg) from None
            if self._scram.state != "complete":
                return out, 0
            user = self._scram.authorization_id
        principal = KafkaPrincipal(USER_TYPE, user)
        if self._previous is not None and principal != self._previous[1]:
            prev = self._previous[1]
            raise self._failure(
                f"Cannot change principals during re-authentication from {prev.principal_type}.{prev.name}: "
                f"{principal.principal_type}.{principal.name}"
            )
        self.principal = principal
        self.state = "complete"
        self._previous = None
        self._scram = None
        lifetime = max(0, int(self.security.reauth_ms.get(mech, 0)))
        self.session_expiry = self.clock() + lifetime / 1000 if lifetime > 0 else None
        return out, lifetime
