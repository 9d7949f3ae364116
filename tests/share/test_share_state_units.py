"""The `__share_group_state` records and the state-batch combining rule, byte by byte."""

from __future__ import annotations

import uuid

import pytest
from kopfka.coordinator.share import records as rec
from kopfka.coordinator.share.coordinator import ShareGroupOffset, _parse_coordinator_key, coordinator_key
from kopfka.coordinator.share.records import StateBatch as B
from kopfka.coordinator.share.state_batches import combine
from kopfka.protocol.errors import KafkaError

AVAILABLE, ACKED, ARCHIVED = 0, 2, 4
TOPIC = uuid.UUID("12345678-1234-5678-1234-567812345678")


def test_key_layout_is_kafkas() -> None:
    # record type (int16) 0, "g" (int16 length), 16 uuid bytes, partition 3
    key = rec.encode_key(rec.SNAPSHOT, "g", TOPIC, 3)
    assert key == b"\x00\x00" + b"\x00\x01g" + TOPIC.bytes + b"\x00\x00\x00\x03"
    assert rec.decode_key(key) == rec.ShareKey(rec.SNAPSHOT, "g", TOPIC, 3)
    assert rec.decode_key(rec.encode_key(rec.UPDATE, "g", TOPIC, 3)).record_type == rec.UPDATE  # type: ignore[union-attr]
    assert rec.decode_key(b"\x00\x07\x00\x01g") is None  # a record type we do not know is skipped


def test_snapshot_value_layout_is_kafkas() -> None:
    v = rec.ShareSnapshot(1, 2, 3, 40, 1000, 2000, [B(40, 41, ACKED, 1)], delivery_complete_count=2)
    data = rec.encode_snapshot(v)
    expected = (
        b"\x00\x00"  # value version 0
        + b"\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x03"  # snapshot, state, leader epoch
        + (40).to_bytes(8, "big")
        + (1000).to_bytes(8, "big")
        + (2000).to_bytes(8, "big")
        + b"\x02"  # compact array of one batch
        + (40).to_bytes(8, "big")
        + (41).to_bytes(8, "big")
        + b"\x02\x00\x01\x00"  # state, count, no tags
        + b"\x01\x00\x04\x00\x00\x00\x02"  # tagged field 0: DeliveryCompleteCount = 2
    )
    assert data == expected
    assert rec.decode_snapshot(data) == v
    # the tag is left out at its default, -1
    assert rec.encode_snapshot(rec.ShareSnapshot(0, 0, 0, 0, 0, 0)).endswith(b"\x01\x00")


def test_update_value_round_trips() -> None:
    v = rec.ShareUpdate(4, 7, -1, [B(5, 9, ARCHIVED, 5), B(10, 10, AVAILABLE, 2)], 5)
    assert rec.decode_update(rec.encode_update(v)) == v
    with pytest.raises(rec.RecordFormatError):
        rec.decode_update(b"\x00\x01" + rec.encode_update(v)[2:])  # unknown version
    with pytest.raises(rec.RecordFormatError):
        rec.decode_update(rec.encode_update(v)[:-3])  # truncated


def test_later_state_wins_on_overlap() -> None:
    so_far = [B(0, 9, AVAILABLE, 1)]
    # offsets 3-5 acknowledged: the batch is split around them
    assert combine(so_far, [B(3, 5, ACKED, 1)]) == [B(0, 2, AVAILABLE, 1), B(3, 5, ACKED, 1), B(6, 9, AVAILABLE, 1)]
    # a higher delivery count wins over a lower one, whatever the order they come in
    assert combine([B(0, 4, AVAILABLE, 2)], [B(0, 4, AVAILABLE, 1)]) == [B(0, 4, AVAILABLE, 2)]
    assert combine([B(0, 4, ACKED, 1)], [B(2, 8, AVAILABLE, 1)]) == [B(0, 4, ACKED, 1), B(5, 8, AVAILABLE, 1)]


def test_start_offset_prunes_and_adjacent_batches_merge() -> None:
    so_far = [B(0, 4, ACKED, 1), B(5, 9, ARCHIVED, 5), B(10, 12, AVAILABLE, 1)]
    assert combine(so_far, [], 7) == [B(7, 9, ARCHIVED, 5), B(10, 12, AVAILABLE, 1)]
    assert combine(so_far, [], 13) == []
    merged = combine([B(0, 1, ACKED, 1)], [B(2, 3, ACKED, 1), B(6, 7, ACKED, 1)])
    assert merged == [B(0, 3, ACKED, 1), B(6, 7, ACKED, 1)]


def test_update_merges_into_a_snapshot_as_on_replay() -> None:
    snap = ShareGroupOffset.from_snapshot(rec.ShareSnapshot(0, 1, 0, 10, 1, 1, [B(10, 19, AVAILABLE, 1)]))
    merged = snap.merged(rec.ShareUpdate(0, -1, 15, [B(15, 16, ACKED, 1)], 2))
    assert merged.start_offset == 15 and merged.leader_epoch == 0 and merged.delivery_complete_count == 2
    assert merged.batches == [B(15, 16, ACKED, 1), B(17, 19, AVAILABLE, 1)]


def test_coordinator_key() -> None:
    key = coordinator_key("my:group", TOPIC, 7)
    assert _parse_coordinator_key(key) == ("my:group", TOPIC, 7)
    for bad in ("x", "g:notauuid:1", ":" + key.split(":", 2)[2]):
        with pytest.raises(KafkaError):
            _parse_coordinator_key(bad)
