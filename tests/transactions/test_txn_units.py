"""Transaction coordinator units: the `__transaction_state` byte formats (built here field by
field from Kafka's TransactionLogKey/TransactionLogValue schemas) and the transactional-id
state machine of Kafka's TransactionMetadata, for transaction versions 0/1 and 2 (KIP-890)."""

from __future__ import annotations

import struct

import pytest
from kopfka.coordinator.record_io import RecordFormatError
from kopfka.coordinator.transaction import records as rec
from kopfka.coordinator.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    SHORT_MAX,
    IllegalTransition,
    TransactionMetadata,
    TxnState,
)


def _s16(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def _compact(s: str) -> bytes:
    return bytes([len(s) + 1]) + s.encode()


def test_key_is_version_0_and_a_string() -> None:
    assert rec.encode_key("my-txn") == struct.pack(">h", 0) + _s16("my-txn")
    assert rec.decode_key(rec.encode_key("my-txn")) == "my-txn"
    assert rec.decode_key(struct.pack(">h", 7) + _s16("x")) is None  # unknown key version: skipped on load


def test_value_v0_layout() -> None:
    v = rec.TxnLogValue(
        producer_id=42,
        producer_epoch=3,
        timeout_ms=60000,
        state=TxnState.ONGOING,
        partitions={"t": [0, 1]},
        last_update_ms=1700,
        start_ms=1600,
    )
    expected = (
        struct.pack(">hqhib", 0, 42, 3, 60000, 1)
        + struct.pack(">i", 1)
        + _s16("t")
        + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">qq", 1700, 1600)
    )
    assert rec.encode_value(v, 0) == expected
    back = rec.decode_value(expected)
    assert (back.producer_id, back.producer_epoch, back.timeout_ms, back.state, back.partitions) == (
        42,
        3,
        60000,
        1,
        {"t": [0, 1]},
    )
    # Empty has a null partition array
    empty = rec.TxnLogValue(42, 4, 60000, TxnState.EMPTY, {}, 1800, -1)
    assert rec.encode_value(empty, 0) == struct.pack(">hqhib", 0, 42, 4, 60000, 0) + struct.pack(">iqq", -1, 1800, -1)


def test_value_v1_is_flexible_with_tagged_fields() -> None:
    v = rec.TxnLogValue(
        producer_id=42,
        producer_epoch=3,
        timeout_ms=60000,
        state=TxnState.PREPARE_COMMIT,
        partitions={"t": [5]},
        last_update_ms=1700,
        start_ms=1600,
        previous_producer_id=41,
        next_producer_id=-1,
        client_transaction_version=2,
    )
    expected = (
        struct.pack(">hqhib", 1, 42, 3, 60000, 2)
        + bytes([2])
        + _compact("t")
        + bytes([2])
        + struct.pack(">i", 5)
        + bytes([0])
        + struct.pack(">qq", 1700, 1600)
        + bytes([2])
        + bytes([0, 8])
        + struct.pack(">q", 41)
        + bytes([2, 2])
        + struct.pack(">h", 2)
    )
    assert rec.encode_value(v, 1) == expected
    back = rec.decode_value(expected)
    assert (back.previous_producer_id, back.next_producer_id, back.client_transaction_version) == (41, -1, 2)
    assert back.partitions == {"t": [5]}


@pytest.mark.parametrize("bad", [b"", struct.pack(">h", 9) + bytes(40), struct.pack(">hq", 0, 1)])
def test_unreadable_values_raise_record_format_error(bad: bytes) -> None:
    with pytest.raises(RecordFormatError):
        rec.decode_value(bad)


def _ongoing(tv: int = 0) -> TransactionMetadata:
    md = TransactionMetadata("tx", producer_id=7, producer_epoch=NO_PRODUCER_EPOCH, timeout_ms=1000)
    md.complete_transition(md.prepare_increment_producer_epoch(1000, None, now=1))
    md.complete_transition(md.prepare_add_partitions({("t", 0)}, now=2, client_tv=tv))
    return md


def test_tv0_commit_keeps_the_epoch() -> None:
    md = _ongoing()
    assert (md.producer_epoch, md.state, md.start_ms) == (0, TxnState.ONGOING, 2)
    md.complete_transition(md.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 0, -1, now=3))
    assert md.producer_epoch == 0
    md.remove_partition(("t", 0))
    md.complete_transition(md.prepare_complete(now=4))
    assert (md.state, md.producer_id, md.producer_epoch, md.partitions) == (TxnState.COMPLETE_COMMIT, 7, 0, set())


def test_tv2_bumps_the_epoch_at_every_end_and_rotates_when_exhausted() -> None:
    md = _ongoing(tv=2)
    t = md.prepare_abort_or_commit(TxnState.PREPARE_ABORT, 2, -1, now=3)
    assert (t.producer_epoch, t.last_producer_epoch) == (1, 0)
    md.complete_transition(t)
    md.complete_transition(md.prepare_complete(now=4))
    assert (md.state, md.producer_id, md.producer_epoch) == (TxnState.COMPLETE_ABORT, 7, 1)
    # an exhausted epoch: EndTxn carries the next producer id, completion switches to it at epoch 0
    md.producer_epoch = SHORT_MAX - 2
    md.complete_transition(md.prepare_add_partitions({("t", 1)}, now=5, client_tv=2))
    md.complete_transition(md.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 2, 99, now=6))
    assert (md.producer_epoch, md.next_producer_id) == (SHORT_MAX - 1, 99)
    md.remove_partition(("t", 1))
    md.complete_transition(md.prepare_complete(now=7))
    assert (md.producer_id, md.producer_epoch, md.prev_producer_id) == (99, 0, 7)


def test_fencing_bumps_once_and_init_increments_or_fences() -> None:
    md = _ongoing()
    fence = md.prepare_fence_producer_epoch()
    assert (fence.state, fence.producer_epoch) == (TxnState.PREPARE_EPOCH_FENCE, 1)
    md.pending_state = None
    md.has_failed_epoch_fence = True  # a failed fence write must not bump a second time
    assert md.prepare_fence_producer_epoch().producer_epoch == 0
    md.pending_state = None
    done = _ongoing()
    done.complete_transition(done.prepare_abort_or_commit(TxnState.PREPARE_ABORT, 0, -1, now=3))
    done.remove_partition(("t", 0))
    done.complete_transition(done.prepare_complete(now=4))
    assert done.prepare_increment_producer_epoch(1000, expected_epoch=5, now=5) is None  # a zombie's epoch
    retry = done.prepare_increment_producer_epoch(1000, expected_epoch=0, now=5)
    assert retry is not None and (retry.producer_epoch, retry.last_producer_epoch) == (1, 0)


def test_illegal_transitions_are_refused() -> None:
    md = TransactionMetadata("tx", 7, 0, 1000)
    with pytest.raises(IllegalTransition):
        md.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 0, -1, now=1)  # Empty -> PrepareCommit
    md.complete_transition(md.prepare_add_partitions({("t", 0)}, now=1))
    md.prepare_abort_or_commit(TxnState.PREPARE_ABORT, 0, -1, now=2)
    with pytest.raises(IllegalTransition):
        md.prepare_add_partitions({("t", 1)}, now=3)  # a transition is already pending
    with pytest.raises(IllegalTransition):
        TransactionMetadata("tx", 7, 0, 1000).remove_partition(("t", 0))


def test_log_value_round_trip_restores_the_metadata() -> None:
    md = _ongoing()
    t = md.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 0, -1, now=3)
    back = TransactionMetadata.from_log_value("tx", rec.decode_value(rec.encode_value(t.to_log_value(), 1)))
    assert (back.state, back.producer_id, back.producer_epoch, back.partitions, back.start_ms) == (
        TxnState.PREPARE_COMMIT,
        7,
        0,
        {("t", 0)},
        2,
    )
    with pytest.raises(RecordFormatError):
        TransactionMetadata.from_log_value("tx", rec.TxnLogValue(1, 0, 1000, 99))
