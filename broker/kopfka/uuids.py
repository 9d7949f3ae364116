"""Kafka's UUID text form: 16 random bytes as unpadded base64url (22 characters)."""

from __future__ import annotations

import base64
import functools
import uuid

ZERO_UUID = uuid.UUID(int=0)
# Kafka reserves the first 100 UUIDs (e.g. METADATA_TOPIC_ID = 1, MIGRATING = 0s, LOST = 2).
METADATA_TOPIC_ID = uuid.UUID(int=1)
RESERVED_UUID_LIMIT = 100


def random_uuid() -> uuid.UUID:
    while True:
        u = uuid.uuid4()
        if u.int >= RESERVED_UUID_LIMIT and not to_str(u).startswith("-"):
            return u


# Both conversions are pure and ask for the same few topic ids on every produce and fetch
# (a request names topics by id, a response carries them): remembered, a lookup instead of a
# base64 round and a UUID construction each time. Bounded, as requests may name any id.
_CACHED = 8192


@functools.lru_cache(maxsize=_CACHED)
def to_str(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


@functools.lru_cache(maxsize=_CACHED)
def from_str(s: str) -> uuid.UUID:
    s = s.strip()
    if len(s) != 22:
        raise ValueError(f"{s!r} is not a 22-character base64url Kafka UUID")
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=="))
    except Exception as exc:
        raise ValueError(f"{s!r} is not a valid Kafka UUID") from exc
