"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer: `[authzid] NUL authcid NUL passwd`.

The users a listener accepts are PlainLoginModule's `user_<name>="<password>"` options of
its `listener.name.<l>.plain.sasl.jaas.config`; passwords compare in constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping


class PlainError(Exception):
    """Failed authentication; the message is Kafka's and safe to send to the client."""


def client_token(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


def authenticate(token: bytes, users: Mapping[str, str]) -> str:
    """Check a client's PLAIN token; returns the authorization id (the user name)."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise PlainError("Invalid SASL/PLAIN response: expected UTF-8") from None
    parts = text.split("\0")
    if len(parts) != 3:
        raise PlainError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
    authzid, user, password = parts
    if not user:
        raise PlainError("Authentication failed: username not specified")
    if not password:
        raise PlainError("Authentication failed: password not specified")
    expected = users.get(user)
    # compare against something even for an unknown user, so timing does not tell
    ok = hmac.compare_digest((expected if expected is not None else "\0" + password).encode(), password.encode())
    if expected is None or not ok:
        raise PlainError("Authentication failed: Invalid username or password")
    if authzid and authzid != user:
        raise PlainError("Authentication failed: Client requested an authorization id that is different from username")
    return user
