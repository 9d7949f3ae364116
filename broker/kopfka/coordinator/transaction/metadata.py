"""TransactionMetadata: the coordinator's state of one transactional id, and its transitions.

Every change is *prepared* (a `TxnTransit`, with `pending_state` set so concurrent requests
get CONCURRENT_TRANSACTIONS), written to `__transaction_state`, and only *completed* on the
in-memory object once the write is committed — so the cache never runs ahead of the log.

States (ids as in the log): Empty 0, Ongoing 1, PrepareCommit 2, PrepareAbort 3,
CompleteCommit 4, CompleteAbort 5, Dead 6, PrepareEpochFence 7. Transaction version 2
(KIP-890) bumps the producer epoch at every commit/abort; an exhausted epoch rotates to a new
producer id carried in `next_producer_id` until the transaction completes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from kopfka.coordinator.transaction.records import TxnLogValue

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767

TopicPartition = tuple[str, int]


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def wire_name(self) -> str:
        """Kafka's name (DescribeTransactions, ListTransactions filters)."""
        return "".join(w.capitalize() for w in self.name.split("_"))

    @classmethod
    def from_wire_name(cls, name: str) -> TxnState | None:
        for s in cls:
            if s.wire_name == name:
                return s
        return None

    @property
    def expiration_allowed(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    # transaction version 2 may abort a transaction that added nothing (the client is unsure of it)
    TxnState.PREPARE_ABORT: frozenset(
        {
            TxnState.ONGOING,
            TxnState.PREPARE_EPOCH_FENCE,
            TxnState.EMPTY,
            TxnState.COMPLETE_COMMIT,
            TxnState.COMPLETE_ABORT,
        }
    ),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= SHORT_MAX - 1


class IllegalTransition(Exception):
    """A transition the state machine forbids: a coordinator bug, never a client error."""


@dataclass(frozen=True)
class TxnTransit:
    """The target of a prepared transition (Kafka's TxnTransitMetadata)."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int
    client_tv: int

    def to_log_value(self) -> TxnLogValue:
        parts: dict[str, list[int]] = {}
        for topic, p in sorted(self.partitions):
            parts.setdefault(topic, []).append(p)
        return TxnLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            int(self.state),
            parts,
            self.last_update_ms,
            self.start_ms,
            self.prev_producer_id,
            self.next_producer_id,
            self.client_tv,
        )


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    client_tv: int = 0  # the transaction version the client speaks (2: epoch bump per transaction)
    pending_state: TxnState | None = None
    has_failed_epoch_fence: bool = False

    @classmethod
    def from_log_value(cls, transactional_id: str, v: TxnLogValue) -> TransactionMetadata:
        try:
            state = TxnState(v.state)
        except ValueError as exc:
            from kopfka.coordinator.record_io import RecordFormatError

            raise RecordFormatError(f"unknown transaction state id {v.state}") from exc
        parts = set() if state == TxnState.EMPTY else {(t, p) for t, ps in v.partitions.items() for p in ps}
        return cls(
            transactional_id,
            v.producer_id,
            v.producer_epoch,
            v.timeout_ms,
            state,
            parts,
            v.start_ms,
            v.last_update_ms,
            v.previous_producer_id,
            v.next_producer_id,
            NO_PRODUCER_EPOCH,
            v.client_transaction_version,
        )

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.PREPARE_COMMIT)

    # --- preparing transitions ------------------------------------------------------------
    def _prepare(
        self,
        state: TxnState,
        producer_id: int,
        epoch: int,
        last_epoch: int,
        timeout_ms: int,
        partitions: frozenset[TopicPartition],
        start_ms: int,
        now: int,
        *,
        next_producer_id: int = NO_PRODUCER_ID,
        client_tv: int = 0,
    ) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: preparing {state.name} while {self.pending_state.name} is pending"
            )
        if producer_id < 0:
            raise IllegalTransition(f"{self.transactional_id}: illegal producer id {producer_id}")
        if state != TxnState.DEAD and epoch < 0:
            raise IllegalTransition(f"{self.transactional_id}: illegal producer epoch {epoch}")
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.name} -> {state.name} is not allowed")
        self.pending_state = state
        return TxnTransit(
            producer_id,
            self.producer_id,
            next_producer_id,
            epoch,
            last_epoch,
            timeout_ms,
            state,
            partitions,
            start_ms,
            now,
            client_tv,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        if self.producer_epoch == SHORT_MAX:
            raise IllegalTransition("cannot fence a producer whose epoch is already Short.MAX_VALUE")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            TxnState.PREPARE_EPOCH_FENCE,
            self.producer_id,
            bumped,
            NO_PRODUCER_EPOCH,
            self.timeout_ms,
            frozenset(self.partitions),
            self.start_ms,
            self.last_update_ms,
        )

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now: int
    ) -> TxnTransit | None:
        """InitProducerId on an existing id; None means the expected epoch is fenced."""
        if self.epoch_exhausted:
            raise IllegalTransition(f"no producer epochs left for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # a retry of a bump it never saw answered
        else:
            return None
        return self._prepare(TxnState.EMPTY, self.producer_id, epoch, last, timeout_ms, frozenset(), -1, now)

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now: int, record_last_epoch: bool
    ) -> TxnTransit:
        if self.has_pending_transaction:
            raise IllegalTransition("cannot rotate producer ids while a transaction is pending")
        return self._prepare(
            TxnState.EMPTY,
            new_producer_id,
            0,
            self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms,
            frozenset(),
            -1,
            now,
        )

    def prepare_add_partitions(self, added: set[TopicPartition], now: int, client_tv: int = 0) -> TxnTransit:
        start = (
            now if self.state in (TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT) else self.start_ms
        )
        return self._prepare(
            TxnState.ONGOING,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            frozenset(self.partitions | added),
            start,
            now,
            client_tv=client_tv,
        )

    def prepare_abort_or_commit(
        self, state: TxnState, client_tv: int, next_producer_id: int, now: int, no_partition_added: bool = False
    ) -> TxnTransit:
        if client_tv >= 2:
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        return self._prepare(
            state,
            self.producer_id,
            epoch,
            last,
            self.timeout_ms,
            frozenset(self.partitions),
            now if no_partition_added else self.start_ms,  # an empty abort starts when it is asked for
            now,
            next_producer_id=next_producer_id,
            client_tv=client_tv,
        )

    def prepare_complete(self, now: int) -> TxnTransit:
        state = TxnState.COMPLETE_COMMIT if self.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        if self.client_tv >= 2 and self.next_producer_id != NO_PRODUCER_ID:
            pid, epoch = self.next_producer_id, 0
        else:
            pid, epoch = self.producer_id, self.producer_epoch
        return self._prepare(
            state,
            pid,
            epoch,
            self.producer_epoch,
            self.timeout_ms,
            frozenset(),
            self.start_ms,
            now,
            client_tv=self.client_tv,
        )

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(
            TxnState.DEAD,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            frozenset(),
            self.start_ms,
            self.last_update_ms,
        )

    def prepare_no_transit(self) -> TxnTransit:
        return TxnTransit(
            self.producer_id,
            self.prev_producer_id,
            self.next_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            self.state,
            frozenset(self.partitions),
            self.start_ms,
            self.last_update_ms,
            0,
        )

    # --- completing ---------------------------------------------------------------------------
    def _valid_epoch(self, t: TxnTransit) -> bool:
        tv2 = t.client_tv >= 2
        overflow_complete = (
            tv2 and t.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) and t.producer_epoch == 0
        )
        if overflow_complete or (tv2 and t.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)):
            epoch = t.last_producer_epoch
        else:
            epoch = t.producer_epoch
        pid = t.prev_producer_id if overflow_complete else t.producer_id
        return epoch == self.producer_epoch and pid == self.producer_id

    def complete_transition(self, t: TxnTransit) -> None:
        """Adopt a prepared transition once its record is committed."""
        if self.pending_state != t.state:
            raise IllegalTransition(
                f"{self.transactional_id}: completing {t.state.name} but {self.pending_state} is pending"
            )
        s = t.state
        if s == TxnState.EMPTY:
            bump_ok = t.producer_epoch == self.producer_epoch + 1 or (
                t.producer_epoch == 0 and t.producer_id != self.producer_id
            )
            if (self.producer_epoch != t.producer_epoch and not bump_ok) or t.partitions or t.start_ms != -1:
                raise IllegalTransition(f"{self.transactional_id}: bad InitProducerId transition {t}")
            self.timeout_ms = t.timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.producer_id = t.producer_id
            self.prev_producer_id = t.prev_producer_id
        elif s == TxnState.ONGOING:
            if not self._valid_epoch(t) or not self.partitions <= t.partitions or self.timeout_ms != t.timeout_ms:
                raise IllegalTransition(f"{self.transactional_id}: bad AddPartitions transition {t}")
            self.start_ms = t.start_ms
            self.partitions |= t.partitions
        elif s in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            empty_abort = self.state not in (TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE)
            if (
                not self._valid_epoch(t)
                or set(self.partitions) != set(t.partitions)
                or self.timeout_ms != t.timeout_ms
                or (self.start_ms != t.start_ms and not empty_abort)
            ):
                raise IllegalTransition(f"{self.transactional_id}: bad EndTxn transition {t}")
            self.start_ms = t.start_ms
            if t.client_tv >= 2:
                self.producer_epoch = t.producer_epoch
                self.last_producer_epoch = t.last_producer_epoch
                self.next_producer_id = t.next_producer_id
        elif s in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            if not self._valid_epoch(t) or self.timeout_ms != t.timeout_ms or t.start_ms == -1:
                raise IllegalTransition(f"{self.transactional_id}: bad marker completion {t}")
            self.start_ms = t.start_ms
            self.partitions.clear()
            if t.client_tv >= 2:
                self.producer_epoch = t.producer_epoch
                self.last_producer_epoch = t.last_producer_epoch
                self.prev_producer_id = t.prev_producer_id
                self.producer_id = t.producer_id
                self.next_producer_id = t.next_producer_id
        else:
            raise IllegalTransition(f"{self.transactional_id}: {s.name} is never completed in the cache")
        self.client_tv = t.client_tv
        self.last_update_ms = t.last_update_ms
        self.pending_state = None
        self.state = s

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker was written to `tp` (or its topic is gone)."""
        if self.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise IllegalTransition(f"{self.transactional_id}: removing a partition in state {self.state.name}")
        self.partitions.discard(tp)

    def copy(self) -> TransactionMetadata:
        return replace(self, partitions=set(self.partitions))
