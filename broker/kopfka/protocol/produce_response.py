"""Hand-written ProduceResponse encoder (v3-v13), from the dict the Produce handler answers.

Every produce request is answered with one, so it is on the path of every write: kio's generic
path (`build` into frozen entities, then the field-by-field writer) took about a fifth of a
broker's Python time per acks=1 produce (py-spy --gil), more than the append. Tagged fields
(`current_leader`, `node_endpoints`, KIP-951) are written only when they differ from their
defaults, as kio's writer does; tested byte for byte against kio for every version.

`encode_produce_response` returns None for a body holding anything it does not know, so a
field added to the handler's answer later falls back to kio instead of being dropped.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

FIRST_VERSION, LAST_VERSION = 3, 13
_TOP = frozenset({"responses", "throttle_time", "node_endpoints"})
_TOPIC = frozenset({"name", "topic_id", "partition_responses"})
_PARTITION = frozenset(
    {
        "index",
        "error_code",
        "base_offset",
        "log_append_time",
        "log_start_offset",
        "record_errors",
        "error_message",
        "current_leader",
    }
)
_ZERO_UUID = bytes(16)
_PARTITION_HEAD = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_TWO_INT32 = struct.Struct(">ii")


def _uvarint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    b = s.encode()
    return (_uvarint(len(b) + 1) if flexible else _INT16.pack(len(b))) + b


def _array_len(n: int, flexible: bool) -> bytes:
    return _uvarint(n + 1) if flexible else _INT32.pack(n)


def _ms(v: Any) -> int:
    """An int of milliseconds, or a timedelta/datetime as kio's builder accepts them (None: -1)."""
    if v is None:
        return -1
    if isinstance(v, int):
        return v
    if hasattr(v, "total_seconds"):
        return int(v.total_seconds() * 1000)
    return int(v.timestamp() * 1000)


def _topic_id(v: Any) -> bytes:
    if v is None:
        return _ZERO_UUID
    if isinstance(v, uuid.UUID):
        return v.bytes
    raise TypeError(f"topic id {v!r} is no UUID")


def _leader(v: Mapping[str, Any]) -> tuple[int, int]:
    if not v.keys() <= {"leader_id", "leader_epoch"}:
        raise _Unknown
    return int(v.get("leader_id", -1)), int(v.get("leader_epoch", -1))


class _Unknown(Exception):
    """The body holds a field this encoder does not write."""


def _partition(buf: bytearray, p: Mapping[str, Any], version: int, flexible: bool) -> None:
    if not p.keys() <= _PARTITION:
        raise _Unknown
    buf += _PARTITION_HEAD.pack(p["index"], int(p["error_code"]), p["base_offset"], _ms(p.get("log_append_time", -1)))
    if version >= 5:
        buf += _INT64.pack(p.get("log_start_offset", -1))
    if version >= 8:
        errors: Sequence[Mapping[str, Any]] = p.get("record_errors") or ()
        buf += _array_len(len(errors), flexible)
        for e in errors:
            if not e.keys() <= {"batch_index", "batch_index_error_message"}:
                raise _Unknown
            buf += _INT32.pack(e["batch_index"])
            buf += _string(e.get("batch_index_error_message"), flexible)
            if flexible:
                buf += b"\x00"
        buf += _string(p.get("error_message"), flexible)
    if flexible:
        leader = p.get("current_leader")
        ids = _leader(leader) if leader is not None else (-1, -1)
        if version >= 10 and ids != (-1, -1):
            body = _TWO_INT32.pack(*ids) + b"\x00"
            buf += b"\x01\x00" + _uvarint(len(body)) + body
        else:
            buf += b"\x00"


def _node_endpoints(endpoints: Sequence[Mapping[str, Any]]) -> bytes:
    body = bytearray(_uvarint(len(endpoints) + 1))
    for n in endpoints:
        if not n.keys() <= {"node_id", "host", "port", "rack"}:
            raise _Unknown
        body += _INT32.pack(n["node_id"]) + _string(n["host"], True) + _INT32.pack(n["port"])
        body += _string(n.get("rack"), True) + b"\x00"
    return b"\x01\x00" + _uvarint(len(body)) + bytes(body)


def encode_produce_response(version: int, correlation_id: int, body: Mapping[str, Any]) -> bytes | None:
    """The whole framed response (size prefix, header v0/v1, body), or None: use kio."""
    if not FIRST_VERSION <= version <= LAST_VERSION or not body.keys() <= _TOP:
        return None
    flexible = version >= 9
    buf = bytearray(b"\0\0\0\0")
    buf += _INT32.pack(correlation_id)
    if flexible:
        buf += b"\x00"  # response header v1: no tagged fields
    try:
        topics: Sequence[Mapping[str, Any]] = body["responses"]
        buf += _array_len(len(topics), flexible)
        for t in topics:
            if not t.keys() <= _TOPIC:
                raise _Unknown
            if version >= 13:
                buf += _topic_id(t.get("topic_id"))
            else:
                buf += _string(t.get("name") or "", flexible)
            parts: Sequence[Mapping[str, Any]] = t["partition_responses"]
            buf += _array_len(len(parts), flexible)
            for p in parts:
                _partition(buf, p, version, flexible)
            if flexible:
                buf += b"\x00"
        buf += _INT32.pack(_ms(body.get("throttle_time", 0)))
        if flexible:
            endpoints = body.get("node_endpoints") or ()
            buf += _node_endpoints(endpoints) if version >= 10 and endpoints else b"\x00"
    except _Unknown:
        return None
    struct.pack_into(">i", buf, 0, len(buf) - 4)
    return bytes(buf)
