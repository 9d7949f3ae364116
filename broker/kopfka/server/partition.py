"""Partition: one replica of a topic partition on this broker, and its leadership state.

As leader it tracks every follower's log end offset (learned from their fetches), derives the
high watermark as the smallest LEO of the *maximal* ISR (the committed ISR plus any member an
in-flight AlterPartition would add or remove, so the HW never runs ahead of a replica that may
still count), and decides ISR expansion (a follower reached the HW) and shrinking (a follower
stopped catching up for replica.lag.time.max.ms). The ISR itself only changes through the
controller (AlterPartition): the partition proposes, the controller commits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kopfka.protocol.errors import ErrorCode
from kopfka.server.replication_trace import TRACE
from kopfka.storage.unified_log import UnifiedLog


@dataclass
class ReplicaState:
    """The leader's view of one follower."""

    broker_id: int
    log_end_offset: int = -1  # unknown until the follower's first fetch in this leader epoch
    last_caught_up_time: float = 0.0
    last_fetch_leader_leo: int = -1
    last_fetch_time: float = 0.0
    broker_epoch: int = -1


@dataclass
class PendingIsrChange:
    """An AlterPartition in flight; `generation` tells a stale response from the current one."""

    isr: tuple[int, ...]
    generation: int


@dataclass
class Partition:
    """Kafka's Partition: this broker's replica of one topic partition, its log and leadership/ISR state."""

    topic: str
    partition: int
    topic_id: str
    log: UnifiedLog
    node_id: int
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    # parked fetches: followers read up to the LEO, consumers up to the HW (or the LSO, which
    # moves only with the HW), so an append wakes only the first and a HW move only the second
    _log_end_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    _hw_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    replica_states: dict[int, ReplicaState] = field(default_factory=dict)
    pending_isr: PendingIsrChange | None = None
    leader_epoch_start_offset: int = -1
    _generation: int = 0
    # (required offset, future) of acks=all produces waiting for the HW (the produce purgatory)
    _produce_waiters: list[tuple[int, asyncio.Future[ErrorCode]]] = field(default_factory=list)
    # set by the ReplicaManager: proposes an ISR to the controller; (partition, new isr, generation)
    on_isr_change: Callable[[Partition, tuple[int, ...], int], None] | None = None
    # set by the ReplicaManager: may this broker (with this epoch) join the ISR? (KIP-841)
    is_eligible: Callable[[int, int], bool] | None = None

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return tuple(dict.fromkeys((*self.isr, *self.pending_isr.isr)))

    @property
    def effective_min_isr(self) -> int:
        """min.insync.replicas, at most the replication factor (Kafka's effectiveMinIsr)."""
        return max(1, min(int(self.log.config["min.insync.replicas"]), len(self.replicas) or 1))

    @property
    def under_min_isr(self) -> bool:
        return len(self.isr) < self.effective_min_isr

    # --- fetch waiters ---------------------------------------------------------------------
    def add_waiter(self, fut: asyncio.Future[None], *, to_log_end: bool = False) -> None:
        """Park a fetch: a follower's (`to_log_end`) until the LEO grows, a consumer's until the HW moves."""
        (self._log_end_waiters if to_log_end else self._hw_waiters).append(fut)

    def remove_waiter(self, fut: asyncio.Future[None], *, to_log_end: bool = False) -> None:
        try:
            (self._log_end_waiters if to_log_end else self._hw_waiters).remove(fut)
        except ValueError:
            pass

    def notify(self) -> None:
        """Wake every delayed fetch: a leadership change, a moved log start, a replaced log."""
        self.notify_appended()
        self.notify_high_watermark()

    def notify_appended(self) -> None:
        """The LEO grew: wake the followers' fetches (a consumer cannot read past the HW yet)."""
        waiters, self._log_end_waiters = self._log_end_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def notify_high_watermark(self) -> None:
        """The HW (and with it the LSO) moved: wake the consumers' fetches. A follower's fetch,
        which reads to the LEO, would find nothing new: as in Kafka, it learns the HW with the
        next records."""
        waiters, self._hw_waiters = self._hw_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    # --- role changes ----------------------------------------------------------------------
    def make_leader(self, now: float | None = None) -> None:
        """Fresh follower states for the new leader epoch; ISR members count as caught up now so
        they are not shrunk before they had a chance to fetch."""
        now = time.monotonic() if now is None else now
        self.replica_states = {
            r: ReplicaState(r, last_caught_up_time=now if r in self.isr else 0.0)
            for r in self.replicas
            if r != self.node_id
        }
        self.leader_epoch_start_offset = self.log.log_end_offset
        if self.leader_epoch >= 0 and self.log.latest_epoch != self.leader_epoch:
            # stamp the epoch start now, so a follower holding a newer-than-ours stale epoch sees
            # a divergence even before this leader appends anything (Kafka's maybeAssignEpochStartOffset)
            self.log.leader_epoch_cache.assign(self.leader_epoch, self.log.log_end_offset)
        self.clear_pending_isr()
        self.maybe_advance_high_watermark()

    def make_follower(self) -> None:
        self.replica_states = {}
        self.clear_pending_isr()
        self.fail_produce_waiters(ErrorCode.not_leader_or_follower)

    def clear_pending_isr(self) -> None:
        self.pending_isr = None
        self._generation += 1

    # --- leader: follower fetch state, HW, ISR -----------------------------------------------
    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """(epoch, end offset) where the follower's log diverges from ours, or None (KIP-320/595)."""
        found = self.log.end_offset_for_epoch(last_fetched_epoch)
        if found is None:
            return None
        epoch, end = found
        if epoch < last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None

    def update_follower_fetch(
        self, replica_id: int, fetch_offset: int, broker_epoch: int, now: float | None = None
    ) -> None:
        """Kafka's lastCaughtUpTime rule: caught up if it asked for our LEO, or for at least the
        LEO we had at its previous fetch (then it was caught up as of that fetch)."""
        st = self.replica_states.get(replica_id)
        if st is None:
            return
        now = time.monotonic() if now is None else now
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            st.last_caught_up_time = now
        elif fetch_offset >= st.last_fetch_leader_leo >= 0:
            st.last_caught_up_time = max(st.last_caught_up_time, st.last_fetch_time)
        if TRACE.enabled and fetch_offset > st.log_end_offset:
            TRACE.mark("ack", self.topic, self.partition, st.log_end_offset, fetch_offset, replica_id)
        st.log_end_offset = fetch_offset
        st.last_fetch_leader_leo = leo
        st.last_fetch_time = now
        if broker_epoch >= 0:
            st.broker_epoch = broker_epoch
        self.maybe_expand_isr(replica_id)
        self.maybe_advance_high_watermark()

    def maybe_expand_isr(self, replica_id: int) -> None:
        if not self.is_leader or self.pending_isr is not None or replica_id in self.isr:
            return
        st = self.replica_states.get(replica_id)
        if st is None or st.log_end_offset < max(self.log.high_watermark, self.leader_epoch_start_offset):
            return
        if self.is_eligible is not None and not self.is_eligible(replica_id, st.broker_epoch):
            return
        self.propose_isr((*self.isr, replica_id))

    def out_of_sync_replicas(self, lag_max_s: float, now: float | None = None) -> list[int]:
        now = time.monotonic() if now is None else now
        out = []
        for r in self.isr:
            if r == self.node_id:
                continue
            st = self.replica_states.get(r)
            if st is None or now - st.last_caught_up_time > lag_max_s:
                out.append(r)
        return out

    def maybe_shrink_isr(self, lag_max_s: float, now: float | None = None) -> None:
        if not self.is_leader or self.pending_isr is not None:
            return
        lagging = self.out_of_sync_replicas(lag_max_s, now)
        if lagging:
            self.propose_isr(tuple(r for r in self.isr if r not in lagging))

    def propose_isr(self, new_isr: tuple[int, ...]) -> None:
        self._generation += 1
        self.pending_isr = PendingIsrChange(new_isr, self._generation)
        if self.on_isr_change is not None:
            self.on_isr_change(self, new_isr, self._generation)

    def complete_isr_change(
        self, generation: int, isr: tuple[int, ...] | None, partition_epoch: int, leader_epoch: int
    ) -> None:
        """The controller's answer: adopt the committed ISR (it may beat the metadata update).
        An answer under a newer leader epoch means another leader was elected meanwhile (a
        reassignment that completed on this very expansion, say): this leader is stale, and keeps
        the maximal ISR for its high watermark until the metadata update makes it a follower, as
        Kafka's Partition does; falling back to its old, smaller ISR would commit, and acknowledge,
        records the new leader may not have."""
        if self.pending_isr is None or self.pending_isr.generation != generation:
            return
        if isr is not None and leader_epoch > self.leader_epoch:
            return
        self.pending_isr = None
        if isr is not None and leader_epoch == self.leader_epoch and partition_epoch > self.partition_epoch:
            self.isr = isr
            self.partition_epoch = partition_epoch
        self.maybe_advance_high_watermark()
        self.check_produce_waiters()

    def maybe_advance_high_watermark(self) -> bool:
        """HW = the smallest LEO in the maximal ISR; with a single in-sync replica that is our LEO.
        It does not advance while the committed ISR is below min.insync.replicas (KIP-966's strict
        min ISR, Kafka 3.7+): so a replica that leaves such an ISR still holds every committed record
        and may be elected from the ELR."""
        if not self.is_leader or self.under_min_isr:
            return False
        hw = self.log.log_end_offset
        for r in self.maximal_isr:
            if r == self.node_id:
                continue
            st = self.replica_states.get(r)
            if st is None or st.log_end_offset < 0:
                return False
            hw = min(hw, st.log_end_offset)
        old = self.log.maybe_increment_high_watermark(hw)
        if old is None:
            return False
        if TRACE.enabled:
            TRACE.mark("hw", self.topic, self.partition, old, hw)
        # the acks=all answers first: a producer with one request in flight (librdkafka's
        # idempotent producer) sends nothing more until it has its answer
        self.check_produce_waiters()
        self.notify_high_watermark()
        return True

    # --- the acks=all purgatory ------------------------------------------------------------
    def produce_status(self, required_offset: int) -> ErrorCode | None:
        """None while waiting; otherwise the produce's outcome (Kafka's checkEnoughReplicasReachOffset)."""
        if not self.is_leader:
            return ErrorCode.not_leader_or_follower
        if self.log.high_watermark >= required_offset:
            return ErrorCode.not_enough_replicas_after_append if self.under_min_isr else ErrorCode.none
        return None

    def add_produce_waiter(self, required_offset: int, fut: asyncio.Future[ErrorCode]) -> None:
        self._produce_waiters.append((required_offset, fut))

    def remove_produce_waiter(self, fut: asyncio.Future[ErrorCode]) -> None:
        self._produce_waiters = [w for w in self._produce_waiters if w[1] is not fut]

    def check_produce_waiters(self) -> None:
        if not self._produce_waiters:
            return
        keep = []
        for required, fut in self._produce_waiters:
            if fut.done():
                continue
            status = self.produce_status(required)
            if status is None:
                keep.append((required, fut))
            else:
                fut.set_result(status)
        self._produce_waiters = keep

    def fail_produce_waiters(self, code: ErrorCode) -> None:
        waiters, self._produce_waiters = self._produce_waiters, []
        for _, fut in waiters:
            if not fut.done():
                fut.set_result(code)
