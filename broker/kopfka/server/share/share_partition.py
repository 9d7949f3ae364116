"""SharePartition: the in-flight records of one share-partition (group, topic, partition), held by
the partition leader (KIP-932, Kafka's SharePartition).

The share-partition start offset (SPSO) is the first offset not yet delivered for good; every
offset in [SPSO, next_offset) is tracked in a run of records sharing a state, a delivery count
and (when acquired) an owner and an acquisition lock:

- AVAILABLE: may be acquired by the next fetch (never delivered, released, or its lock expired);
- ACQUIRED: handed to one member, locked for `share.record.lock.duration.ms`;
- ACKNOWLEDGED: processed (ACCEPT);
- ARCHIVED: given up — rejected (REJECT), a gap without a record (GAP), released or timed out
  after `share.delivery.count.limit` deliveries, or below the log start offset.

Acquiring bumps the delivery count; releasing or a lock expiry makes the records AVAILABLE again,
or ARCHIVED once their count reached the limit. Every state change an acknowledgement, a release
or an expiry makes is written to the share coordinator before it counts: the runs involved are
marked in flight, the change is persisted (WriteShareGroupState), then committed — or rolled
back if the write failed (records whose lock expired meanwhile become AVAILABLE). The SPSO then
moves past the leading ACKNOWLEDGED/ARCHIVED records. Acquisition is not persisted (as in
Kafka): after a failover, records acquired but not acknowledged are delivered again.

Runs are kept as a sorted list of [first, last] ranges; a state change splits the runs it cuts
and merges neighbours that end up alike.
"""

from __future__ import annotations

import asyncio
import bisect
import enum
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kopfka.coordinator.share.records import StateBatch
from kopfka.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
TERMINAL = (ACKNOWLEDGED, ARCHIVED)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
ACK_TO_STATE = {GAP: ARCHIVED, ACCEPT: ACKNOWLEDGED, RELEASE: AVAILABLE, REJECT: ARCHIVED}


class PartitionState(enum.Enum):
    EMPTY = "empty"
    INITIALIZING = "initializing"
    ACTIVE = "active"
    FAILED = "failed"
    FENCED = "fenced"


@dataclass
class Run:
    first: int
    last: int
    state: int
    count: int
    member: str = ""
    lock: int = 0  # acquisition lock id (0: none)
    pending: bool = False  # a state change of these records is being persisted

    def alike(self, other: Run) -> bool:
        return (self.state, self.count, self.member, self.lock, self.pending) == (
            other.state,
            other.count,
            other.member,
            other.lock,
            other.pending,
        )


@dataclass
class Change:
    """A state change being persisted: the runs marked pending and what they become."""

    ranges: list[tuple[int, int, int, int, str, int]]  # (first, last, old state, count, old member, old lock)
    new_state: dict[tuple[int, int], tuple[int, int, str, int]] = field(default_factory=dict)


class SharePartition:
    _locks = itertools.count(1)

    def __init__(
        self,
        group_id: str,
        topic: str,
        topic_id: uuid.UUID,
        partition: int,
        leader_epoch: int,
        *,
        persister: Any,
        settings: Callable[[str], Any],
    ) -> None:
        self.group_id = group_id
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.persister = persister
        self.settings = settings  # group config key -> effective value
        self.state = PartitionState.EMPTY
        self.state_epoch = 0
        self.start_offset = 0
        self.next_offset = 0
        self.runs: list[Run] = []
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._init: asyncio.Future[None] | None = None
        self._waiters: list[asyncio.Future[None]] = []
        self.on_fenced: Callable[[SharePartition], None] | None = None

    def __repr__(self) -> str:
        return f"SharePartition({self.group_id}, {self.topic}-{self.partition})"

    # --- settings ---------------------------------------------------------------------------------
    @property
    def delivery_limit(self) -> int:
        return int(self.settings("share.delivery.count.limit"))

    @property
    def max_in_flight(self) -> int:
        return int(self.settings("share.partition.max.record.locks"))

    @property
    def lock_duration_ms(self) -> int:
        return int(self.settings("share.record.lock.duration.ms"))

    # --- waiting for acquirable records --------------------------------------------------------------
    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.append(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        if fut in self._waiters:
            self._waiters.remove(fut)

    def _notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    # --- initialization -----------------------------------------------------------------------------
    async def initialize(
        self,
        log_offsets: Callable[[], tuple[int, int]],
        offset_for_time: Callable[[int], int | None],
    ) -> None:
        """Read the persisted state once (concurrent callers share the read). `log_offsets` gives
        (log start offset, latest offset) for share.auto.offset.reset."""
        if self.state is PartitionState.ACTIVE:
            return
        if self.state is PartitionState.FENCED:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"{self} is fenced")
        if self._init is None:
            self._init = asyncio.get_running_loop().create_future()
            self.state = PartitionState.INITIALIZING
            try:
                await self._load(log_offsets, offset_for_time)
                self.state = PartitionState.ACTIVE
                self._init.set_result(None)
            except BaseException as exc:
                self.state = PartitionState.FAILED
                self._init.set_exception(
                    exc if isinstance(exc, KafkaError) else KafkaError(ErrorCode.unknown_server_error, str(exc))
                )
                self._init.exception()  # retrieved: other waiters re-raise it
                raise
        await asyncio.shield(self._init)

    async def _load(
        self, log_offsets: Callable[[], tuple[int, int]], offset_for_time: Callable[[int], int | None]
    ) -> None:
        res = await self.persister.read(self.group_id, self.topic_id, self.partition, self.leader_epoch)
        if res.error != ErrorCode.none:
            raise KafkaError(_persister_error(res.error), res.message or res.error.name)
        st = res.state
        self.state_epoch = st.state_epoch
        start = st.start_offset
        log_start, latest = log_offsets()
        if start == -1:
            from kopfka.config.group_config import auto_offset_reset

            strategy, duration_ms = auto_offset_reset(str(self.settings("share.auto.offset.reset")))
            if strategy == "earliest":
                start = log_start
            elif strategy == "by_duration":
                found = offset_for_time(int(time.time() * 1000) - duration_ms)
                start = latest if found is None else found
            else:
                start = latest
        start = max(start, log_start)
        self.start_offset = start
        runs: list[Run] = []
        cursor = start
        for b in sorted(st.batches, key=lambda b: b.first_offset):
            if b.last_offset < cursor:
                continue
            first = max(b.first_offset, cursor)
            if first > cursor:  # never-recorded offsets (acquired, then lost): deliverable again
                runs.append(Run(cursor, first - 1, AVAILABLE, 0))
            state = b.delivery_state if b.delivery_state in (AVAILABLE, ACKNOWLEDGED, ARCHIVED) else AVAILABLE
            runs.append(Run(first, b.last_offset, state, b.delivery_count))
            cursor = b.last_offset + 1
        self.runs = self._merged(runs)
        self.next_offset = cursor
        self._advance_start()
        log.info(
            "Initialized share-partition %s-%s-%d at start offset %d (%d runs in flight, state epoch %d)",
            self.group_id,
            self.topic,
            self.partition,
            self.start_offset,
            len(self.runs),
            self.state_epoch,
        )

    def fence(self) -> None:
        self.state = PartitionState.FENCED
        for t in self._timers.values():
            t.cancel()
        self._timers.clear()
        self._notify()

    # --- runs ---------------------------------------------------------------------------------------
    @staticmethod
    def _merged(runs: list[Run]) -> list[Run]:
        out: list[Run] = []
        for r in runs:
            if out and out[-1].last + 1 == r.first and out[-1].alike(r):
                out[-1].last = r.last
            else:
                out.append(r)
        return out

    def _index(self, offset: int) -> int:
        """Index of the run containing `offset`, or of the first run after it."""
        i = bisect.bisect_right([r.first for r in self.runs], offset) - 1
        if i >= 0 and self.runs[i].last >= offset:
            return i
        return i + 1

    def _split(self, first: int, last: int) -> tuple[int, int]:
        """Split runs so that [first, last] is covered by whole runs; returns their index range."""
        i = self._index(first)
        if i < len(self.runs) and self.runs[i].first < first <= self.runs[i].last:
            r = self.runs[i]
            self.runs.insert(i + 1, Run(first, r.last, r.state, r.count, r.member, r.lock, r.pending))
            r.last = first - 1
            i += 1
        j = self._index(last)
        if j < len(self.runs) and self.runs[j].first <= last < self.runs[j].last:
            r = self.runs[j]
            self.runs.insert(j + 1, Run(last + 1, r.last, r.state, r.count, r.member, r.lock, r.pending))
            r.last = last
        j = self._index(last)
        if j >= len(self.runs) or self.runs[j].first > last:
            j -= 1
        return i, j + 1

    def _normalize(self) -> None:
        self.runs = self._merged(self.runs)

    def _advance_start(self) -> None:
        """Move the SPSO past leading records delivered for good."""
        while self.runs and self.runs[0].state in TERMINAL and not self.runs[0].pending:
            self.start_offset = max(self.start_offset, self.runs[0].last + 1)
            self.runs.pop(0)
        if not self.runs:
            self.start_offset = max(self.start_offset, self.next_offset)
            self.next_offset = self.start_offset

    def delivery_complete_count(self) -> int:
        return sum(r.last - r.first + 1 for r in self.runs if r.state in TERMINAL)

    def in_flight(self) -> int:
        return self.next_offset - self.start_offset

    def next_fetch_offset(self) -> int:
        for r in self.runs:
            if r.state == AVAILABLE and not r.pending and r.last >= self.start_offset:
                return max(r.first, self.start_offset)
        return self.next_offset

    def maybe_move_to_log_start(self, log_start: int) -> None:
        """Records below the log start offset are gone (retention, DeleteRecords): the AVAILABLE ones
        are archived and the SPSO moves to the log start (Kafka's updateCacheAndOffsets). Records
        still acquired there stay with their owner; released, they are archived."""
        if log_start <= self.start_offset:
            return
        if self.runs and self.runs[0].first < log_start:
            i, j = self._split(self.runs[0].first, min(log_start, self.next_offset) - 1)
            for r in self.runs[i:j]:
                if r.state == AVAILABLE and not r.pending:
                    r.state = ARCHIVED
        self.runs = [r for r in self.runs if not (r.last < log_start and r.state in TERMINAL and not r.pending)]
        self.start_offset = log_start
        self.next_offset = max(self.next_offset, log_start)
        self._normalize()
        self._advance_start()

    # --- acquisition ----------------------------------------------------------------------------------
    def acquire(
        self,
        member: str,
        batches: Iterable[tuple[int, int]],
        max_records: int,
        record_limit: bool,
        skip: set[tuple[int, int]] | frozenset[tuple[int, int]] = frozenset(),
    ) -> list[tuple[int, int, int]]:
        """Acquire records of the fetched log batches ((base offset, last offset) in order) for
        `member`: AVAILABLE tracked records, then new ones past next_offset within the in-flight
        limit. At most `max_records` (whole log batches in the default batch-optimized mode,
        exactly in record-limit mode). Batches in `skip` (markers, aborted transactions) are
        archived, not delivered. Returns (first, last, delivery count) ranges."""
        if self.state is not PartitionState.ACTIVE or max_records <= 0:
            return []
        lock = next(self._locks)
        acquired: list[tuple[int, int, int]] = []
        budget = max_records
        for base, last in batches:
            if budget <= 0:
                break
            lo = max(base, self.start_offset)
            if last < lo:
                continue
            undeliverable = (base, last) in skip
            hi_tracked = min(last, self.next_offset - 1)
            if lo <= hi_tracked:  # tracked records: take the AVAILABLE ones
                i, j = self._split(lo, hi_tracked)
                for r in self.runs[i:j]:
                    if budget <= 0:
                        break
                    if r.state != AVAILABLE or r.pending:
                        continue
                    if undeliverable:
                        r.state = ARCHIVED
                        continue
                    if record_limit and r.last - r.first + 1 > budget:
                        self._split(r.first, r.first + budget - 1)
                    r.state, r.member, r.lock = ACQUIRED, member, lock
                    r.count += 1
                    acquired.append((r.first, r.last, r.count))
                    budget -= r.last - r.first + 1
            lo_new = max(lo, self.next_offset)
            if lo_new > last or budget <= 0:
                continue
            if lo_new > self.next_offset:  # offsets the log does not have (compaction): nothing to deliver
                self.runs.append(Run(self.next_offset, lo_new - 1, ARCHIVED, 0))
                self.next_offset = lo_new
            if undeliverable:
                self.runs.append(Run(lo_new, last, ARCHIVED, 0))
                self.next_offset = last + 1
                continue
            room = self.start_offset + self.max_in_flight - lo_new
            if room <= 0:
                break
            hi_new = min(last, lo_new + budget - 1, lo_new + room - 1) if record_limit else last
            self.runs.append(Run(lo_new, hi_new, ACQUIRED, 1, member, lock))
            self.next_offset = hi_new + 1
            acquired.append((lo_new, hi_new, 1))
            budget -= hi_new - lo_new + 1
        self._normalize()
        self._advance_start()
        if acquired:
            self._timers[lock] = asyncio.get_running_loop().call_later(
                self.lock_duration_ms / 1000, self._lock_expired, lock
            )
        return _coalesce(acquired)

    # --- state changes --------------------------------------------------------------------------------
    def _begin(self, targets: list[tuple[int, int, int]], member: str | None) -> Change:
        """Mark [first, last] ranges (with their new state) pending; `member` None: any owner."""
        change = Change([])
        for first, last, new_state in targets:
            i, j = self._split(first, last)
            for r in self.runs[i:j]:
                if r.state != ACQUIRED or r.pending or (member is not None and r.member != member):
                    continue
                state = new_state
                if state == AVAILABLE and (r.count >= self.delivery_limit or r.last < self.start_offset):
                    state = ARCHIVED
                change.ranges.append((r.first, r.last, r.state, r.count, r.member, r.lock))
                change.new_state[(r.first, r.last)] = (state, r.count, "", 0)
                r.pending = True
        return change

    async def _persist(self, change: Change) -> ErrorCode:
        if not change.ranges:
            return ErrorCode.none
        batches = [StateBatch(first, last, *change.new_state[(first, last)][:2]) for first, last, *_ in change.ranges]
        start = self._projected_start(change)
        res = await self.persister.write(
            self.group_id,
            self.topic_id,
            self.partition,
            state_epoch=self.state_epoch,
            leader_epoch=self.leader_epoch,
            start_offset=start,
            delivery_complete_count=self._projected_complete(change, start),
            batches=batches,
        )
        error = ErrorCode.none if res.error == ErrorCode.none else _persister_error(res.error)
        self._finish(change, error == ErrorCode.none)
        if error in (ErrorCode.not_leader_or_follower,) and self.on_fenced is not None:
            self.on_fenced(self)
        return error

    def _projected(self, change: Change) -> list[tuple[int, int, int]]:
        """(first, last, state) of every run as it will be once `change` commits."""
        out = []
        for r in self.runs:
            new = change.new_state.get((r.first, r.last))
            out.append((r.first, r.last, new[0] if new is not None else (r.state if not r.pending else ACQUIRED)))
        return out

    def _projected_start(self, change: Change) -> int:
        start = self.start_offset
        for first, last, state in self._projected(change):
            if state not in TERMINAL:
                return first
            start = last + 1
        return max(start, self.next_offset)

    def _projected_complete(self, change: Change, start: int) -> int:
        return sum(
            last - max(first, start) + 1
            for first, last, state in self._projected(change)
            if state in TERMINAL and last >= start
        )

    def _finish(self, change: Change, committed: bool) -> None:
        released = False
        for first, last, old_state, count, old_member, old_lock in change.ranges:
            i, j = self._split(first, last)
            for r in self.runs[i:j]:
                r.pending = False
                if committed:
                    r.state, r.count, r.member, r.lock = change.new_state[(first, last)]
                    released |= r.state == AVAILABLE
                elif old_lock != 0 and old_lock not in self._timers:  # its lock expired meanwhile
                    r.state, r.member, r.lock = (ARCHIVED if count >= self.delivery_limit else AVAILABLE), "", 0
                    released |= r.state == AVAILABLE
                else:
                    r.state, r.member, r.lock = old_state, old_member, old_lock
        self._normalize()
        self._advance_start()
        if released or committed:
            self._notify()

    async def acknowledge(self, member: str, batches: list[tuple[int, int, list[int]]]) -> ErrorCode:
        """Apply a member's acknowledgements: (first offset, last offset, ack types — one for the
        whole range, or one per offset). All-or-nothing for the partition, as in Kafka: the batches
        are taken in turn, and an offset that is not acquired by `member` (or is already being
        changed, by an earlier batch of the same request say) fails the whole request."""
        if self.state is not PartitionState.ACTIVE:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"{self} is not active")
        change = Change([])
        renew: list[tuple[int, int]] = []
        for first, last, types in batches:
            if last < self.start_offset and not self._holds(member, first, last):
                continue  # archived already
            error = self._check_acquired(member, first, last)
            if error is not None:
                self._finish(change, False)
                return error
            for lo, hi, ack in _ranges(first, last, types):
                if ack == RENEW:
                    renew.append((lo, hi))
                    continue
                state = ACK_TO_STATE.get(ack)
                if state is None:
                    self._finish(change, False)
                    return ErrorCode.invalid_request
                if hi < self.start_offset:
                    state = ARCHIVED  # gone from the log meanwhile
                step = self._begin([(lo, hi, state)], member)
                change.ranges += step.ranges
                change.new_state.update(step.new_state)
        if renew and not self.settings("share.renew.acknowledge.enable"):
            self._finish(change, False)
            return ErrorCode.invalid_record_state
        for lo, hi in renew:
            self._renew(member, lo, hi)
        return await self._persist(change)

    def _holds(self, member: str, first: int, last: int) -> bool:
        return any(
            r.state == ACQUIRED and r.member == member and r.first <= last and r.last >= first for r in self.runs
        )

    def _check_acquired(self, member: str, first: int, last: int) -> ErrorCode | None:
        if first >= self.next_offset or last >= self.next_offset:
            return ErrorCode.invalid_request  # "the offsets in the request are past the acquired records"
        lo = first if self._holds(member, first, min(last, self.start_offset - 1)) else max(first, self.start_offset)
        i, j = self._split(lo, last)
        for r in self.runs[i:j]:
            if r.state != ACQUIRED or r.pending or r.member != member:
                return ErrorCode.invalid_record_state
        return None

    def _renew(self, member: str, first: int, last: int) -> None:
        lock = next(self._locks)
        i, j = self._split(first, last)
        for r in self.runs[i:j]:
            if r.state == ACQUIRED and r.member == member and not r.pending:
                r.lock = lock
        self._normalize()
        self._timers[lock] = asyncio.get_running_loop().call_later(
            self.lock_duration_ms / 1000, self._lock_expired, lock
        )

    async def release_member(self, member: str) -> ErrorCode:
        """Release every record `member` holds (its share session closed or its connection dropped)."""
        if self.state is not PartitionState.ACTIVE:
            return ErrorCode.none
        targets = [(r.first, r.last, AVAILABLE) for r in self.runs if r.state == ACQUIRED and r.member == member]
        return await self._persist(self._begin(targets, member))

    def _lock_expired(self, lock: int) -> None:
        self._timers.pop(lock, None)
        if self.state is not PartitionState.ACTIVE:
            return
        targets = [
            (r.first, r.last, AVAILABLE) for r in self.runs if r.state == ACQUIRED and r.lock == lock and not r.pending
        ]
        if not targets:
            return
        log.debug("Acquisition lock %d of %s expired for offsets %s", lock, self, targets)
        change = self._begin(targets, None)
        task = asyncio.get_running_loop().create_task(self._persist(change))
        task.add_done_callback(_log_failure)

    def counts(self) -> dict[int, int]:
        """Records per state in the window (for tests and metrics)."""
        out: dict[int, int] = {}
        for r in self.runs:
            out[r.state] = out.get(r.state, 0) + r.last - r.first + 1
        return out


def _ranges(first: int, last: int, types: list[int]) -> list[tuple[int, int, int]]:
    """(lo, hi, ack type) runs of an acknowledgement batch."""
    if len(types) == 1:
        return [(first, last, types[0])]
    out: list[tuple[int, int, int]] = []
    for i, t in enumerate(types):
        off = first + i
        if out and out[-1][2] == t and out[-1][1] == off - 1:
            out[-1] = (out[-1][0], off, t)
        else:
            out.append((off, off, t))
    return out


def _coalesce(ranges: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    out: list[tuple[int, int, int]] = []
    for first, last, count in sorted(ranges):
        if out and out[-1][1] + 1 == first and out[-1][2] == count:
            out[-1] = (out[-1][0], last, count)
        else:
            out.append((first, last, count))
    return out


def _persister_error(code: ErrorCode) -> ErrorCode:
    """Kafka's SharePartition.fetchPersisterError: what a failed state read or write becomes."""
    if code in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress):
        return ErrorCode.coordinator_not_available
    if code in (ErrorCode.fenced_leader_epoch, ErrorCode.fenced_state_epoch):
        return ErrorCode.not_leader_or_follower
    if code in (ErrorCode.group_id_not_found, ErrorCode.unknown_topic_or_partition):
        return code
    return ErrorCode.unknown_server_error


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("Releasing timed-out records failed: %s", task.exception())
