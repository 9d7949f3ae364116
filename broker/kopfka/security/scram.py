"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka speaks it: credentials, server and client.

Sans-IO: each side takes the peer's message bytes and returns its own. Messages follow
Kafka's ScramMessages grammar (gs2 header `n,,` only — no channel binding; the `tokenauth`
extension is accepted and ignored, delegation tokens are not supported).

Credentials are what the metadata log stores (UserScramCredentialRecord): salt, iterations,
StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword, "Server
Key"); the password itself is never stored. An unknown user gets a made-up but stable salt
and fails at the same step as a wrong password (RFC 5802 §5.1), so the exchange does not tell
an attacker which user names exist.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
MECHANISM_BY_TYPE = {t: name for name, (t, _) in MECHANISMS.items()}
MIN_ITERATIONS, MAX_ITERATIONS, DEFAULT_ITERATIONS = 4096, 16384, 4096


class ScramError(Exception):
    """The exchange failed. `message` is safe to send to the client (it never says whether the
    user exists or which part of the proof was wrong)."""


@dataclass(frozen=True)
class ScramCredential:
    """A user's stored SCRAM credential for one mechanism: salt, StoredKey, ServerKey and iterations."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism.upper()][1]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r} (expected SCRAM-SHA-256 or SCRAM-SHA-512)") from None


def _hmac(h: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, h).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password.encode("utf-8"), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    h = hash_name(mechanism)
    client_key = _hmac(h, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(h, client_key).digest(), _hmac(h, salted, b"Server Key"), iterations)


def new_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    salt = secrets.token_bytes(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def sasl_name(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def username(saslname: str) -> str:
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise ScramError("Invalid username")
    return name.replace("=3D", "=")


_VALUE_RE = r"[\x01-\x2B\x2D-\x7F]+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_B64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXT = rf"(?:,[a-zA-Z]+={_VALUE_RE})*"
CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE_RE},)?n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<ext>{_EXT})"
)
SERVER_FIRST = re.compile(
    rf"(?:m={_VALUE_RE},)?r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_B64}),i=(?P<iterations>[0-9]+){_EXT}"
)
CLIENT_FINAL = re.compile(rf"c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE}){_EXT},p=(?P<proof>{_B64})")
SERVER_FINAL = re.compile(rf"(?:e=(?P<error>{_VALUE_RE}))|(?:v=(?P<signature>{_B64})){_EXT}")


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("Invalid SCRAM message encoding") from None


def _nonce() -> str:
    return base64.b64encode(secrets.token_bytes(24)).decode().replace("/", "-").replace("+", ".").rstrip("=")


class ScramServer:
    """One server-side exchange. `lookup(username)` returns the stored credential or None."""

    def __init__(
        self, mechanism: str, lookup: Callable[[str], ScramCredential | None], *, secret: bytes | None = None
    ) -> None:
        self.mechanism = mechanism.upper()
        self.hash = hash_name(self.mechanism)
        self._lookup = lookup
        self._secret = secret or secrets.token_bytes(32)  # seeds stable fake salts for unknown users
        self.state: Literal["first", "final", "complete", "failed"] = "first"
        self.authorization_id = ""
        self._cred: ScramCredential | None = None
        self._real = False
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def _fake(self, user: str) -> ScramCredential:
        salt = _hmac("sha256", self._secret, f"{self.mechanism}:{user}".encode())
        return ScramCredential(salt, b"\0" * hashlib.new(self.hash).digest_size, b"", DEFAULT_ITERATIONS)

    def evaluate(self, data: bytes) -> bytes:
        try:
            if self.state == "first":
                return self._first(_text(data))
            if self.state == "final":
                return self._final(_text(data))
            raise ScramError(f"Unexpected SCRAM message in state {self.state}")
        except ScramError:
            self.state = "failed"
            self._cred = None
            raise

    def _first(self, msg: str) -> bytes:
        m = CLIENT_FIRST.fullmatch(msg)
        if m is None:
            raise ScramError("Invalid SCRAM client first message format")
        user = username(m.group("saslname"))
        authzid = m.group("authzid")
        if authzid and username(authzid) != user:
            raise ScramError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        cred = self._lookup(user)
        self._real = cred is not None and cred.iterations >= MIN_ITERATIONS
        if cred is None or not self._real:
            cred = self._fake(user)  # fails at the proof, exactly like a wrong password
        self._cred = cred
        self.authorization_id = user
        self._client_first_bare = msg[msg.index(",", 2) + 1 :]
        self._nonce = m.group("nonce") + _nonce()
        self._server_first = f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        self.state = "final"
        return self._server_first.encode()

    def _final(self, msg: str) -> bytes:
        m = CLIENT_FINAL.fullmatch(msg)
        if m is None:
            raise ScramError("Invalid SCRAM client final message format")
        # Kafka checks endsWith, not equality: librdkafka <= 2.0 sends its client nonce twice
        if not m.group("nonce").endswith(self._nonce):
            raise ScramError("Invalid client nonce in the final client message.")
        assert self._cred is not None
        without_proof = msg[: msg.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(self.hash, self._cred.stored_key, auth_message)
        proof = base64.b64decode(m.group("proof"))
        if len(proof) != len(client_signature):
            raise ScramError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        computed = hashlib.new(self.hash, client_key).digest()
        if not (hmac.compare_digest(computed, self._cred.stored_key) and self._real):
            raise ScramError("Invalid client credentials")
        signature = _hmac(self.hash, self._cred.server_key, auth_message)
        self._cred = None
        self.state = "complete"
        return f"v={base64.b64encode(signature).decode()}".encode()


class ScramClient:
    """The client side: first() → server first → final() → server final → verify()."""

    def __init__(self, mechanism: str, user: str, password: str) -> None:
        self.mechanism = mechanism.upper()
        self.hash = hash_name(self.mechanism)
        self.user = user
        self.password = password
        self._nonce = _nonce()
        self._client_first_bare = f"n={sasl_name(user)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        sf = _text(server_first)
        m = SERVER_FIRST.fullmatch(sf)
        if m is None:
            raise ScramError("Invalid SCRAM server first message format")
        nonce, iterations = m.group("nonce"), int(m.group("iterations"))
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ScramError("Invalid server nonce: does not start with client nonce")
        if iterations < MIN_ITERATIONS:
            raise ScramError(f"Requested iterations {iterations} is less than the minimum {MIN_ITERATIONS}")
        salted = salted_password(self.mechanism, self.password, base64.b64decode(m.group("salt")), iterations)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{sf},{without_proof}".encode()
        client_key = _hmac(self.hash, salted, b"Client Key")
        signature = _hmac(self.hash, hashlib.new(self.hash, client_key).digest(), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(self.hash, _hmac(self.hash, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        m = SERVER_FINAL.fullmatch(_text(server_final))
        if m is None:
            raise ScramError("Invalid SCRAM server final message format")
        if m.group("error"):
            raise ScramError(f"Sasl authentication using {self.mechanism} failed with error: {m.group('error')}")
        if not hmac.compare_digest(base64.b64decode(m.group("signature")), self._server_signature):
            raise ScramError("Invalid server signature in server final message")
