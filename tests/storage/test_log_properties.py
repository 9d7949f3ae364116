"""Hypothesis stateful test: the log against an in-memory model of records.

Random appends (sizes, counts, idempotent or not), duplicates, rolls, reads by offset and by
timestamp, clean and unclean restarts and truncations; after every step the log must agree
with the model.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from kopfka.protocol.record_codec import decode_records
from kopfka.protocol.records import iter_batches
from kopfka.storage.unified_log import UnifiedLog

from .helpers import BASE_TS, Clock, batch, small_config

PID = 77


@dataclass
class ModelBatch:
    first: int
    values: list[bytes]
    timestamps: list[int]
    base_sequence: int  # -1 if not idempotent

    @property
    def last(self) -> int:
        return self.first + len(self.values) - 1


def _config():  # small segments, dense sparse index, tiny index files -> rolls of every kind
    return small_config(
        **{"segment.bytes": 4096, "index.interval.bytes": 128, "segment.index.bytes": 256}
    )


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kopfka-prop-"))
        self.dir = self.tmp / "prop-0"
        self.clock = Clock(BASE_TS)
        self.log = UnifiedLog.load(self.dir, _config(), time=self.clock)
        self.batches: list[ModelBatch] = []
        self.next_ts = BASE_TS
        self.next_seq = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def leo(self) -> int:
        return self.batches[-1].last + 1 if self.batches else 0

    def _values(self) -> list[tuple[int, bytes, int]]:
        return [
            (b.first + i, v, b.timestamps[i]) for b in self.batches for i, v in enumerate(b.values)
        ]

    @rule(
        sizes=st.lists(st.integers(0, 400), min_size=1, max_size=8),
        idempotent=st.booleans(),
        gap=st.integers(1, 50),
        fill=st.binary(min_size=1, max_size=1),
    )
    def append(self, sizes: list[int], idempotent: bool, gap: int, fill: bytes) -> None:
        values = [fill * s for s in sizes]
        timestamps = [self.next_ts + gap + i for i in range(len(values))]
        self.next_ts = timestamps[-1]
        self.clock.now = self.next_ts
        seq = self.next_seq if idempotent else -1
        data = batch(
            values,
            timestamps=timestamps,
            producer_id=PID if idempotent else -1,
            producer_epoch=0 if idempotent else -1,
            base_sequence=seq,
        )
        info = self.log.append_as_leader(data, leader_epoch=0)
        assert not info.duplicate
        assert info.first_offset == self.leo
        assert info.last_offset == self.leo + len(values) - 1
        self.batches.append(ModelBatch(info.first_offset, values, timestamps, seq))
        if idempotent:
            self.next_seq += len(values)
        self.log.update_high_watermark(self.log.log_end_offset)

    @precondition(lambda self: any(b.base_sequence >= 0 for b in self.batches))
    @rule()
    def resend_last_idempotent_batch(self) -> None:
        last = [b for b in self.batches if b.base_sequence >= 0][-1]
        if last.base_sequence + len(last.values) != self.next_seq:
            return  # truncated away; the model's next sequence came from an older batch
        data = batch(
            last.values,
            timestamps=last.timestamps,
            producer_id=PID,
            producer_epoch=0,
            base_sequence=last.base_sequence,
        )
        info = self.log.append_as_leader(data, leader_epoch=0)
        assert info.duplicate
        assert (info.first_offset, info.last_offset) == (last.first, last.last)

    @rule()
    def roll(self) -> None:
        if self.log.active_segment.size > 0:
            n = self.log.num_segments
            self.log.roll()
            assert self.log.num_segments == n + 1

    @rule(data=st.data(), max_bytes=st.integers(1, 3000), min_one=st.booleans())
    def read_by_offset(self, data: st.DataObject, max_bytes: int, min_one: bool) -> None:
        if not self.batches:
            assert self.log.read(0, max_bytes, isolation="log_end").records is None
            return
        offset = data.draw(st.integers(0, self.leo - 1))
        info = self.log.read(offset, max_bytes, isolation="log_end", min_one_message=min_one)
        containing = next(b for b in self.batches if b.first <= offset <= b.last)
        if info.records is None:
            assert not min_one
            return
        raw = info.records.read()
        assert len(raw) == info.records.size
        headers = list(iter_batches(raw, allow_partial_tail=True))
        if min_one:
            assert headers, "min_one_message must return at least one whole batch"
            assert len(raw) <= max(max_bytes, headers[0].size)
        else:
            assert len(raw) <= max_bytes
        if headers:
            assert headers[0].base_offset == containing.first
            by_first = {b.first: b for b in self.batches}
            for h in headers:
                model = by_first[h.base_offset]
                recs = decode_records(raw, h)
                assert [r.value for r in recs] == model.values
                assert [r.offset for r in recs] == list(range(model.first, model.last + 1))

    @rule(data=st.data())
    def read_by_timestamp(self, data: st.DataObject) -> None:
        flat = self._values()
        if not flat:
            assert self.log.fetch_offset_by_timestamp(BASE_TS) is None
            return
        target = data.draw(st.integers(BASE_TS, flat[-1][2] + 5))
        found = self.log.fetch_offset_by_timestamp(target)
        expected = next(((o, t) for o, _, t in flat if t >= target), None)
        if expected is None:
            assert found is None
        else:
            assert found is not None and (found.offset, found.timestamp) == expected
        mx = self.log.fetch_offset_by_timestamp(-3)
        assert mx is not None and (mx.offset, mx.timestamp) == (flat[-1][0], flat[-1][2])

    @rule(clean=st.booleans())
    def restart(self, clean: bool) -> None:
        if clean:
            self.log.flush()
            self.log.close()
            self.log = UnifiedLog.load(
                self.dir,
                _config(),
                time=self.clock,
                had_clean_shutdown=True,
                recovery_point=self.leo,
            )
        else:
            rp = self.log.recovery_point
            self.log.close_handlers()
            self.log = UnifiedLog.load(self.dir, _config(), time=self.clock, recovery_point=rp)
        assert self.log.log_end_offset == self.leo
        self.log.update_high_watermark(self.log.log_end_offset)

    @precondition(lambda self: len(self.batches) >= 2)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        idx = data.draw(st.integers(1, len(self.batches) - 1))
        target = self.batches[idx].first  # follower truncation lands on batch boundaries
        self.log.truncate_to(target)
        self.batches = self.batches[:idx]
        idem = [b for b in self.batches if b.base_sequence >= 0]
        self.next_seq = idem[-1].base_sequence + len(idem[-1].values) if idem else self.next_seq
        assert self.log.log_end_offset == target

    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset <= self.log.high_watermark <= self.log.log_end_offset
        segs = self.log.log_segments()
        assert [s.base_offset for s in segs] == sorted(s.base_offset for s in segs)
        assert all(s.size <= 4096 for s in segs)


LogMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestLog = LogMachine.TestCase
