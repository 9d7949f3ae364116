"""Hand-written encoder of the replica fetcher's FetchRequest (v17, the version it sends).

A follower sends one Fetch per round trip to each leader it follows, so on an acks=all write
its request is built once per replicated batch, on the path between its append and the HW
move. kio's generic writer spends ~30 µs on a one-partition request and ~250 µs on twenty
(profiled: a fifth of a broker's Python time at 2,000 acks=all writes/s); this writes the
same fields with a few struct packs. Decoding it with kio gives the request the fetcher would
have built with kio (tests/protocol); as Kafka's own writer, it leaves tagged fields at their
defaults out (cluster id null, replica directory id zero).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

FETCH_KEY = 1
VERSION = 17

# partition, current leader epoch, fetch offset, last fetched epoch, log start offset, max bytes
FetchPartition = tuple[int, int, int, int, int, int]

_HEADER = struct.Struct(">ihhih")  # size, api key, version, correlation id, client id length
_FIXED = struct.Struct(">iiibii")  # max wait, min bytes, max bytes, isolation, session id, epoch
_PARTITION = struct.Struct(">iiqiqib")  # ... + the partition's empty tagged fields
_REPLICA_STATE = struct.Struct(">BBBiqB")  # 1 tagged field, tag 1, size 13, id, epoch, no tags


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_replica_fetch(
    correlation_id: int,
    client_id: str,
    replica_id: int,
    replica_epoch: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    topics: Sequence[tuple[uuid.UUID, Sequence[FetchPartition]]],
) -> bytes:
    """The whole frame (size prefix, request header v2, body): read_uncommitted, no fetch
    session, no rack, nothing forgotten."""
    cid = client_id.encode()
    out = bytearray(_HEADER.pack(0, FETCH_KEY, VERSION, correlation_id, len(cid)))
    out += cid
    out += b"\x00"  # header tagged fields
    out += _FIXED.pack(max_wait_ms, min_bytes, max_bytes, 0, 0, -1)
    out += _uvarint(len(topics) + 1)
    pack_partition = _PARTITION.pack
    for topic_id, partitions in topics:
        out += topic_id.bytes
        out += _uvarint(len(partitions) + 1)
        for p in partitions:
            out += pack_partition(*p, 0)
        out += b"\x00"  # topic tagged fields
    out += b"\x01\x01"  # no forgotten topics, rack id ""
    out += _REPLICA_STATE.pack(1, 1, 13, replica_id, replica_epoch, 0)  # 4 + 8 + its own empty tags
    struct.pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)
