"""KafkaRaftClient: the KRaft quorum over `__cluster_metadata-0` (KIP-595, KIP-853).

Voters elect a leader with Vote (randomized election timeouts), the leader announces itself
with BeginQuorumEpoch and steps down with EndQuorumEpoch; followers *and* observers (brokers,
controllers not yet in the voter set) pull the log with raft Fetch. The leader answers a fetch
whose (offset, last fetched epoch) disagrees with its log with a diverging epoch, and the
fetcher truncates. The high watermark is the largest offset a majority of voters have fetched
past, counted only once the leader's own epoch-start batch is covered; listeners get committed
batches strictly in offset order up to it. Epoch, vote and leader survive restarts in
`quorum-state`. The voter set is static (`controller.quorum.voters`) or the latest VotersRecord
in the log / bootstrap.checkpoint (dynamic quorum: AddRaftVoter / RemoveRaftVoter).

Everything runs on the event loop; RPC handlers and the driver task never hold state across an
await without re-checking the epoch, which replaces Kafka's single raft I/O thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopfka import uuids
from kopfka.client.connection import KafkaConnection
from kopfka.config.log_config import LogConfig
from kopfka.metadata import record_batches
from kopfka.metadata import records as mr
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.records import iter_batches
from kopfka.raft import snapshots
from kopfka.raft.metadata_log import METADATA_TOPIC, QUORUM_STATE, metadata_log_dir, read_committed_batches
from kopfka.raft.raft_client import CommittedBatch, LeaderAndEpoch, RaftListener
from kopfka.security.client import ClientSecurity
from kopfka.storage.producer_state import AppendOrigin
from kopfka.storage.unified_log import UnifiedLog
from kopfka.timeouts import wait_quietly
from kopfka.uuids import METADATA_TOPIC_ID

log = logging.getLogger(__name__)

FETCH_V, VOTE_V, BEGIN_V, END_V, SNAP_V, DESCRIBE_V = 17, 2, 1, 1, 1, 2
FETCH_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Voter:
    """A KRaft voter: node id, directory id and the host and port of its controller listener."""

    node_id: int
    directory_id: str
    host: str
    port: int

    def as_tuple(self) -> tuple[int, str, str, int]:
        return (self.node_id, self.directory_id, self.host, self.port)


# Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES; a batch header is 61 bytes, a record's framing
# (length, attributes, deltas, key, header count as varints) at most about 20
MAX_BATCH_SIZE_BYTES = 8 * 1024 * 1024
BATCH_OVERHEAD_BYTES = 64
RECORD_OVERHEAD_BYTES = 24


@dataclass
class ReplicaState:
    """The raft leader's view of one voter or observer, from its fetches (Kafka's LeaderState.ReplicaState)."""

    log_end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    directory_id: str = ""


def _now_ms() -> int:
    return int(time.time() * 1000)


def _dir_uuid(text: str | None) -> uuid.UUID | None:
    if not text:
        return None
    try:
        return uuids.from_str(text)
    except ValueError:
        return None


class RaftPeers:
    """Connections to other quorum nodes, one per (endpoint, purpose): a long-polling fetch
    never queues a Vote behind it."""

    def __init__(
        self,
        request_timeout_s: float,
        security: ClientSecurity | None = None,
        blocked: Callable[[], bool] | None = None,
    ) -> None:
        self.timeout = request_timeout_s
        self.security = security  # the controller listener's client side (TLS / SASL)
        self._conns: dict[tuple[str, int, str], KafkaConnection] = {}
        self._blocked = blocked

    async def request(
        self,
        host: str,
        port: int,
        api_key: int,
        version: int,
        body: dict[str, Any],
        *,
        purpose: str = "rpc",
        timeout: float | None = None,
    ) -> Any:
        if self._blocked is not None and self._blocked():
            await asyncio.sleep(min(self.timeout, timeout or self.timeout))  # as a request lost on the way
            raise ConnectionError(f"{host}:{port}: isolated by the test fault hook")
        key = (host, port, purpose)
        conn = self._conns.get(key)
        try:
            if conn is None:
                conn = await KafkaConnection.open(f"{host}:{port}", timeout=self.timeout, security=self.security)
                self._conns[key] = conn
            return await conn.request(api_key, version, body, timeout=timeout or self.timeout)
        except (OSError, asyncio.IncompleteReadError, TimeoutError, ConnectionError) as exc:
            bad = self._conns.pop(key, None)
            if bad is not None:
                with contextlib.suppress(Exception):
                    await bad.close()
            raise ConnectionError(f"{host}:{port}: {exc or type(exc).__name__}") from exc

    async def close(self) -> None:
        for conn in list(self._conns.values()):
            with contextlib.suppress(Exception):
                await conn.close()
        self._conns.clear()


class KafkaRaftClient:
    """One node's view of the quorum: voter (follower / candidate / leader) or observer."""

    def __init__(
        self,
        *,
        node_id: int,
        cluster_id: str,
        metadata_dir: Path,
        directory_id: str,
        static_voters: dict[int, tuple[str, int]] | None = None,
        bootstrap_servers: list[tuple[str, int]] | None = None,
        bootstrap_voters: tuple[tuple[int, str, str, int], ...] = (),
        local_endpoint: tuple[str, int] | None = None,
        election_timeout_ms: int = 1000,
        fetch_timeout_ms: int = 2000,
        request_timeout_ms: int = 2000,
        election_backoff_max_ms: int = 1000,
        retry_backoff_ms: int = 20,
        segment_bytes: int = 1 << 30,
        auto_join: bool = False,
        retention_bytes: int = 104_857_600,
        retention_ms: int = 604_800_000,
        security: ClientSecurity | None = None,
        isolation_file: Path | None = None,
    ) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.directory_id = directory_id
        self.dir = metadata_log_dir(metadata_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.static = static_voters is not None and bool(static_voters)
        self.bootstrap_servers = list(bootstrap_servers or [])
        self.local_endpoint = local_endpoint
        self.election_timeout = election_timeout_ms / 1000
        self.fetch_timeout = fetch_timeout_ms / 1000
        self.election_backoff_max = election_backoff_max_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000
        self.auto_join = auto_join
        self.retention_bytes = retention_bytes
        self.retention_ms = retention_ms
        # test-only fault hook: while this file exists the node neither sends nor answers quorum RPCs
        self._isolation_file = isolation_file
        self.peers = RaftPeers(request_timeout_ms / 1000, security, blocked=lambda: self.isolated)
        self._listeners: list[RaftListener] = []
        self._leader_change_cbs: list[Callable[[LeaderAndEpoch], None]] = []
        # retention of the metadata log is snapshot-driven (maybe_clean), never by the topic defaults
        log_config = LogConfig.defaults(**{"segment.bytes": segment_bytes, "retention.ms": -1, "retention.bytes": -1})
        self.log = UnifiedLog.load(self.dir, log_config, topic_id=METADATA_TOPIC_ID)
        # voter set: base (static / bootstrap) then every VotersRecord in the log, by offset
        if self.static:
            assert static_voters is not None
            base = {i: Voter(i, "", h, p) for i, (h, p) in static_voters.items()}
        else:
            base = {v[0]: Voter(*v) for v in bootstrap_voters}
        self._voter_history: list[tuple[int, dict[int, Voter]]] = [(-1, base)]
        self.endpoints: dict[int, tuple[str, int]] = {v.node_id: (v.host, v.port) for v in base.values()}
        # persisted election state
        self.epoch = 0
        self.leader_id = -1
        self.voted_id = -1
        self._load_quorum_state()
        self.role = "unattached"
        if self.leader_id == node_id:
            self.leader_id = -1  # a restarted leader does not resume: it waits for (or calls) an election
        elif self.leader_id >= 0:
            self.role = "follower"
        # log / commit state
        self.snapshot_id: snapshots.SnapshotId | None = snapshots.latest_snapshot(self.dir)
        self.hw = 0
        self._delivered = 0
        self._scan_voters(self.log.log_start_offset, self.log.log_end_offset)
        # leader state
        self._epoch_start = -1
        self._flushed_leo = self.log.log_end_offset
        self._replicas: dict[int, ReplicaState] = {}
        self._observers: dict[int, ReplicaState] = {}
        self._sent_hw: dict[int, int] = {}
        self._waiters: list[tuple[int, int, asyncio.Future[int]]] = []
        self._append_lock = asyncio.Lock()
        self._pending_voter_change = False
        self._begin_acked: set[int] = set()
        # timers and wake-ups
        self._last_leader_contact = time.monotonic()
        self._election_deadline = time.monotonic() + self._random_election_timeout()
        self._change = asyncio.Event()
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self._join_task: asyncio.Task[None] | None = None
        self.leader_ready = False
        self.fatal_error: str | None = None
        self._removed_clock: float | None = None
        self._next_clean = 0.0
        # KIP-996: a follower that has fetched from its leader since following it refuses pre-votes
        self._fetched_from_leader = False
        self._granted: set[int] = {node_id}  # who voted for this node's last won election
        # the finalized features the records are written for (their versions); set by the node
        self.record_features: Callable[[], Mapping[str, int] | None] = lambda: None

    # --- persistent state -----------------------------------------------------------------
    def _load_quorum_state(self) -> None:
        path = self.dir / QUORUM_STATE
        if not path.exists():
            return
        try:
            data = json.loads(path.read_text())
            self.epoch = int(data.get("leaderEpoch", 0))
            self.leader_id = int(data.get("leaderId", -1))
            self.voted_id = int(data.get("votedId", -1))
        except (ValueError, OSError, TypeError):
            log.warning("Ignoring unreadable %s", path)

    def _persist(self) -> None:
        path = self.dir / QUORUM_STATE
        tmp = path.with_suffix(".tmp")
        body = {
            "leaderId": self.leader_id,
            "leaderEpoch": self.epoch,
            "votedId": self.voted_id,
            "votedDirectoryId": "",
            "data_version": 1,
            "currentVoters": [{"voterId": v} for v in sorted(self.voters)],
        }
        with open(tmp, "w") as f:
            f.write(json.dumps(body))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    # --- voter set --------------------------------------------------------------------------
    @property
    def voters(self) -> dict[int, Voter]:
        return self._voter_history[-1][1]

    @property
    def is_voter(self) -> bool:
        return self._is_voter_key(self.node_id, self.directory_id)

    def _is_voter_key(self, node_id: int, directory_id: str | None) -> bool:
        """KIP-853 replica keys: a voter is its id *and* its metadata directory id, so a node
        that lost its disk (same id, new directory) is an observer until it is re-added; it
        must never vote or count toward the high watermark with an empty log."""
        voter = self.voters.get(node_id)
        if voter is None:
            return False
        return not (voter.directory_id and directory_id and voter.directory_id != directory_id)

    def _stale_self(self) -> Voter | None:
        """The voter entry that carries this node's id under another directory id, if any."""
        voter = self.voters.get(self.node_id)
        return voter if voter is not None and not self.is_voter else None

    @property
    def isolated(self) -> bool:
        """The test-only network partition (`internal.raft.isolation.file`) is in force."""
        return self._isolation_file is not None and self._isolation_file.exists()

    def _scan_voters(self, start: int, end: int) -> None:
        if self.static or start >= end:
            return
        for batch in read_committed_batches(self.log, start, end):
            self._note_voters(batch)

    def _note_voters(self, batch: CommittedBatch) -> None:
        for rec in batch.records:
            if isinstance(rec, mr.VotersRecord):
                vs = {v[0]: Voter(*v) for v in rec.voters}
                self._voter_history.append((batch.base_offset, vs))
                for v in vs.values():
                    self.endpoints[v.node_id] = (v.host, v.port)
                log.info("[RaftClient id=%d] voter set at offset %d: %s", self.node_id, batch.base_offset, sorted(vs))

    def _truncate_voters(self, offset: int) -> None:
        self._voter_history = [h for h in self._voter_history if h[0] < offset] or self._voter_history[:1]

    def _majority(self) -> int:
        return len(self.voters) // 2 + 1

    # --- RaftClient surface -------------------------------------------------------------------
    def register(self, listener: RaftListener) -> None:
        self._listeners.append(listener)

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(self.leader_id, self.epoch)

    @property
    def high_watermark(self) -> int:
        return self.hw

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def leader_endpoint(self) -> tuple[str, int] | None:
        return self.endpoints.get(self.leader_id) if self.leader_id >= 0 else None

    async def append(self, records: list[mr.MetadataRecord]) -> int:
        """Append one batch as leader; returns its last offset once the quorum committed it."""
        if not records:
            raise ValueError("empty metadata batch")
        if self.role != "leader":
            raise KafkaError(ErrorCode.not_controller, "this node is not the quorum leader")
        epoch = self.epoch
        async with self._append_lock:
            if self.role != "leader" or self.epoch != epoch:
                raise KafkaError(ErrorCode.not_controller, "leadership changed")
            last = await self._append_local(records)
        if last < self.hw:
            return last
        if self.role != "leader" or self.epoch != epoch:
            # stepped down while the batch was being flushed: _step_down has already failed the
            # waiters, so one registered now would never resolve (and would hold the caller, e.g. the
            # controller's lock, until a later leadership of this node happened to pass `last`)
            raise KafkaError(ErrorCode.not_controller, "leadership lost before commit")
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append((last, epoch, fut))
        self._maybe_advance_hw()
        return await fut

    async def _append_local(self, records: list[mr.MetadataRecord]) -> int:
        """Append the records as one batch, or as several when they exceed the batch size limit
        (Kafka's 8 MiB, or a smaller metadata segment) or mix control records (voters, leader
        change) with metadata records, which go in batches of their own: a write that must apply
        atomically is framed by Begin/EndTransactionRecord by its writer (metadata transactions, KIP-868)."""
        now = _now_ms()
        limit = min(MAX_BATCH_SIZE_BYTES, self.log.config.segment_bytes) - BATCH_OVERHEAD_BYTES
        features = self.record_features()
        chunks: list[tuple[bool, list[mr.MetadataRecord]]] = []
        for control, run in record_batches.runs(records):
            chunks.append((control, []))
            size = 0
            for r in run:
                n = mr.encoded_size(r, features)
                if chunks[-1][1] and size + n + RECORD_OVERHEAD_BYTES > limit:
                    chunks.append((control, []))
                    size = 0
                chunks[-1][1].append(r)
                size += n + RECORD_OVERHEAD_BYTES
        last = -1
        for control, chunk in chunks:
            data = record_batches.encode_run(
                chunk, control, base_offset=0, timestamp=now, leader_epoch=self.epoch, features=features
            )
            info = self.log.append_as_leader(data, leader_epoch=self.epoch, origin=AppendOrigin.RAFT_LEADER)
            batch = CommittedBatch(info.first_offset, info.last_offset, self.epoch, now, tuple(chunk))
            self._note_voters(batch)
            last = info.last_offset
        await asyncio.to_thread(self.log.flush)
        self._flushed_leo = max(self._flushed_leo, last + 1)
        self._notify()
        return last

    # --- startup / shutdown ---------------------------------------------------------------------
    def load_snapshot(self) -> None:
        """Deliver the latest local snapshot (if any) to the listeners: the start of replay."""
        snap = self.snapshot_id
        if snap is None:
            return
        recs = snapshots.read_snapshot(self.dir, snap)
        batch = CommittedBatch(0, snap.end_offset - 1, snap.epoch, _now_ms(), tuple(recs), is_snapshot=True)
        for lst in self._listeners:
            lst.handle_commit(batch)
        self._delivered = snap.end_offset
        self.hw = max(self.hw, snap.end_offset)
        if not self.static:
            for rec in recs:
                if isinstance(rec, mr.VotersRecord):
                    self._voter_history.insert(1, (snap.end_offset - 1, {v[0]: Voter(*v) for v in rec.voters}))
        if self.log.log_end_offset < snap.end_offset:
            self.log.truncate_fully_and_start_at(snap.end_offset)
        log.info(
            "[RaftClient id=%d] loaded metadata snapshot %s; replaying the metadata log from offset %d",
            self.node_id,
            snap.file_name,
            snap.end_offset,
        )

    def start(self) -> None:
        self.load_snapshot()
        self._task = asyncio.create_task(self._run(), name=f"raft-{self.node_id}")

    async def close(self) -> None:
        self._closed = True
        if self.role == "leader":
            await self._send_end_quorum_epoch()
        for t in (self._task, self._join_task):
            if t is not None:
                t.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
        self._fail_waiters()
        await self.peers.close()
        self.log.close()

    def on_leader_change(self, cb: Callable[[LeaderAndEpoch], None]) -> None:
        self._leader_change_cbs.append(cb)

    # --- state transitions --------------------------------------------------------------------
    def _random_election_timeout(self) -> float:
        return self.election_timeout * (1 + random.random())

    def _notify(self) -> None:
        self._change.set()
        self._change = asyncio.Event()

    def _announce(self) -> None:
        le = self.leader_and_epoch
        log.info("[RaftClient id=%d] %s in epoch %d (leader %d)", self.node_id, self.role, self.epoch, self.leader_id)
        for lst in self._listeners:
            lst.handle_leader_change(le)
        for cb in self._leader_change_cbs:
            cb(le)

    def _fail_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for _, _, fut in waiters:
            if not fut.done():
                fut.set_exception(KafkaError(ErrorCode.not_controller, "leadership lost before commit"))

    def _step_down(self) -> None:
        was_leader = self.role == "leader"
        self.leader_ready = False
        self._removed_clock = None
        self._resolve_waiters()
        self._pending_voter_change = False
        if was_leader:
            self._fail_waiters()

    def _become_unattached(self, epoch: int) -> None:
        self._step_down()
        if epoch > self.epoch:
            self.voted_id = -1  # a vote is per epoch: never vote twice in one
        self.epoch, self.leader_id, self.role = epoch, -1, "unattached"
        self._persist()
        self._election_deadline = time.monotonic() + self._random_election_timeout()
        self._announce()
        self._notify()

    def _become_follower(self, leader_id: int, epoch: int) -> None:
        changed = (leader_id, epoch) != (self.leader_id, self.epoch)
        self._step_down()
        if epoch > self.epoch:
            self.voted_id = -1
        self.epoch, self.leader_id, self.role = epoch, leader_id, "follower"
        self._last_leader_contact = time.monotonic()
        self._fetched_from_leader = False
        if changed:
            self._persist()
            self._announce()
        self._notify()

    def _become_prospective(self) -> None:
        """KIP-996: before bumping the epoch, ask the voters whether they would vote at all (a
        pre-vote). The epoch, the known leader and our vote stay as they are, so a voter cut off
        from the quorum keeps its epoch and cannot disrupt the leader when it comes back."""
        self._step_down()
        self.role = "prospective"
        self._election_deadline = time.monotonic() + self._random_election_timeout()
        log.info(
            "[RaftClient id=%d] prospective in epoch %d (leader %d): asking for pre-votes",
            self.node_id,
            self.epoch,
            self.leader_id,
        )
        self._notify()

    def _become_candidate(self) -> None:
        self._step_down()
        self.epoch += 1
        self.leader_id, self.voted_id, self.role = -1, self.node_id, "candidate"
        self._persist()
        log.info("[RaftClient id=%d] starting election for epoch %d", self.node_id, self.epoch)
        self._notify()

    async def _become_leader(self) -> None:
        self.role, self.leader_id = "leader", self.node_id
        self._persist()
        self._replicas = {v: ReplicaState() for v in self.voters}
        self._sent_hw.clear()
        self._begin_acked = set()
        self._flushed_leo = self.log.log_end_offset
        self._last_leader_contact = time.monotonic()
        epoch = self.epoch
        self._announce()
        async with self._append_lock:
            if self.role != "leader" or self.epoch != epoch:
                return
            self._epoch_start = self.log.log_end_offset
            # Kafka's LeaderChange control batch: the first entry of the epoch, which commits it
            voters = tuple((v.node_id, v.directory_id) for v in sorted(self.voters.values(), key=lambda v: v.node_id))
            granted = tuple(v for v in voters if v[0] in self._granted)
            await self._append_local([mr.LeaderChangeRecord(self.node_id, voters, granted)])
        self._maybe_advance_hw()

    # --- high watermark and delivery --------------------------------------------------------
    def _replica(self, node: int) -> ReplicaState:
        st = self._replicas.get(node)
        if st is None:
            st = self._replicas[node] = ReplicaState()
        return st

    def _maybe_advance_hw(self) -> None:
        if self.role != "leader":
            return
        voters = self.voters
        if not voters:
            return
        leos = sorted(
            (self._flushed_leo if v == self.node_id else self._replica(v).log_end_offset for v in voters), reverse=True
        )
        candidate = leos[len(voters) // 2]  # the offset a majority has reached
        if candidate > self.hw and candidate > self._epoch_start:
            self._set_hw(candidate)
            if not self.leader_ready and self.node_id in voters:
                self.leader_ready = True
                log.info(
                    "[RaftClient id=%d] leader of epoch %d is ready at offset %d", self.node_id, self.epoch, self.hw
                )
                self._announce()
        self._resolve_waiters()

    def _set_hw(self, hw: int) -> None:
        hw = min(hw, self.log.log_end_offset)
        if hw <= self.hw:
            return
        self.hw = hw
        self._deliver()
        self._notify()

    def _deliver(self) -> None:
        if self._delivered >= self.hw:
            return
        start = max(self._delivered, self.log.log_start_offset)
        for batch in read_committed_batches(self.log, start, self.hw):
            for lst in self._listeners:
                lst.handle_commit(batch)
            self._delivered = batch.last_offset + 1

    def _resolve_waiters(self) -> None:
        keep = []
        for last, epoch, fut in self._waiters:
            if fut.done():
                continue
            if last < self.hw:
                fut.set_result(last)
            else:
                keep.append((last, epoch, fut))
        self._waiters = keep

    # --- metadata log retention ---------------------------------------------------------------
    def _retention_exceeded(self) -> bool:
        if self.retention_bytes >= 0 and self.log.size_in_bytes > self.retention_bytes:
            return True
        if self.retention_ms >= 0:
            segs = self.log.log_segments()
            if len(segs) > 1 and _now_ms() - segs[0].largest_timestamp() > self.retention_ms:
                return True
        return False

    async def maybe_clean(self) -> int:
        """Drop metadata log segments wholly below the latest snapshot once the log breaks
        `metadata.max.retention.bytes` or `metadata.max.retention.ms` (KIP-630).

        The log start offset moves to the snapshot's end offset and never past what is committed
        and delivered here, so a restart (snapshot + tail) and every reader stay whole; a replica
        fetching below the new start is sent the snapshot instead. Runs in the driver task (no
        follower append in flight) under the append lock (no leader flush in flight)."""
        snap = self.snapshot_id
        if snap is None:
            return 0
        async with self._append_lock:
            target = min(snap.end_offset, self.hw, self._delivered, self.log.log_end_offset)
            if target <= self.log.log_start_offset or not self._retention_exceeded():
                return 0
            self.log.update_high_watermark(self.hw)
            self.log.maybe_increment_log_start_offset(target, "metadata snapshot")
            deleted = self.log.delete_old_segments()
        log.info(
            "[RaftClient id=%d] metadata log start offset is now %d (snapshot %s); deleted %d segment(s)",
            self.node_id,
            self.log.log_start_offset,
            snap.file_name,
            deleted,
        )
        return deleted

    def _last_epoch(self) -> int:
        """Epoch of the last entry: the log's, or the snapshot's when the log is empty above it."""
        e = self.log.latest_epoch
        if e is not None:
            return e
        return self.snapshot_id.epoch if self.snapshot_id is not None else 0

    # --- the driver ---------------------------------------------------------------------------
    async def _run(self) -> None:
        while not self._closed:
            try:
                if time.monotonic() >= self._next_clean:
                    self._next_clean = time.monotonic() + 1.0
                    await self.maybe_clean()
                if self.role == "leader":
                    await self._leader_tick()
                elif self.role == "candidate":
                    await self._election()
                elif self.role == "prospective":
                    await self._pre_election()
                elif (
                    self.is_voter
                    and self.role == "unattached"
                    and (time.monotonic() >= self._election_deadline or self.voters.keys() == {self.node_id})
                ):
                    self._become_prospective()
                else:
                    await self._fetch_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("[RaftClient id=%d] unexpected error; retrying", self.node_id)
                await asyncio.sleep(self.retry_backoff * 10)

    async def _leader_tick(self) -> None:
        epoch = self.epoch
        pending = [v for v in self.voters if v != self.node_id and v not in self._begin_acked]
        if pending:
            await asyncio.gather(*(self._send_begin_epoch(v, epoch) for v in pending), return_exceptions=True)
        # check quorum: a leader cut off from a majority resigns so the others can elect
        now = _now_ms()
        alive = 1 + sum(
            1
            for v in self.voters
            if v != self.node_id and now - self._replica(v).last_fetch_ms < self.fetch_timeout * 1500
        )
        if (
            self.role == "leader"
            and self.epoch == epoch
            and alive < self._majority()
            and time.monotonic() - self._last_leader_contact > self.fetch_timeout * 1.5
        ):
            log.warning("[RaftClient id=%d] lost contact with a majority of voters; resigning", self.node_id)
            self._become_unattached(self.epoch)
            return
        if alive >= self._majority():
            self._last_leader_contact = time.monotonic()
        if self.role == "leader" and self.node_id not in self.voters and self.hw > self._removed_at():
            # removed: stop taking writes, let in-flight ones commit under the new voter set, then resign
            self.leader_ready = False
            if self._waiters and time.monotonic() - self._removed_seen < 3 * self.fetch_timeout:
                await wait_quietly(self._change.wait(), 0.1)
                return
            log.info("[RaftClient id=%d] removed from the voter set; resigning leadership", self.node_id)
            await self._send_end_quorum_epoch()
            self._become_unattached(self.epoch)
            return
        await wait_quietly(self._change.wait(), min(0.2, self.fetch_timeout / 4))

    def _removed_at(self) -> int:
        return self._voter_history[-1][0]

    @property
    def _removed_seen(self) -> float:
        if self._removed_clock is None:
            self._removed_clock = time.monotonic()
        return self._removed_clock

    async def _send_begin_epoch(self, voter: int, epoch: int) -> None:
        ep = self.endpoints.get(voter)
        if ep is None:
            return
        body = {
            "cluster_id": self.cluster_id,
            "voter_id": voter,
            "topics": [
                {
                    "topic_name": METADATA_TOPIC,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "voter_directory_id": None,
                            "leader_id": self.node_id,
                            "leader_epoch": epoch,
                        }
                    ],
                }
            ],
            "leader_endpoints": self._my_endpoints(),
        }
        try:
            resp = await self.peers.request(ep[0], ep[1], 53, BEGIN_V, body)
        except (ConnectionError, KafkaError):
            return
        p = resp.topics[0].partitions[0] if resp.topics else None
        if p is not None and p.error_code == ErrorCode.none and self.epoch == epoch:
            self._begin_acked.add(voter)
        elif p is not None and p.leader_epoch > self.epoch:
            self._become_unattached(p.leader_epoch)

    async def _send_end_quorum_epoch(self) -> None:
        body = {
            "cluster_id": self.cluster_id,
            "topics": [
                {
                    "topic_name": METADATA_TOPIC,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "leader_id": self.node_id,
                            "leader_epoch": self.epoch,
                            "preferred_candidates": [
                                {"candidate_id": v, "candidate_directory_id": None}
                                for v in self.voters
                                if v != self.node_id
                            ],
                        }
                    ],
                }
            ],
            "leader_endpoints": self._my_endpoints(),
        }
        tasks = []
        for v in self.voters:
            ep = self.endpoints.get(v)
            if v != self.node_id and ep is not None:
                tasks.append(self.peers.request(ep[0], ep[1], 54, END_V, body, timeout=0.5))
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _my_endpoints(self) -> list[dict[str, Any]]:
        if self.local_endpoint is None:
            return []
        return [{"name": "CONTROLLER", "host": self.local_endpoint[0], "port": self.local_endpoint[1]}]

    async def _election(self) -> None:
        """Candidate: a binding vote in our (already bumped) epoch; a majority makes us leader. A
        lost election backs off and starts over from a pre-vote (KIP-996), not a new epoch."""
        epoch = self.epoch
        won = await self._collect_votes(pre_vote=False)
        if won is None or self.role != "candidate" or self.epoch != epoch:
            return  # a BeginQuorumEpoch or a higher epoch moved us on
        if won:
            await self._become_leader()
            return
        await asyncio.sleep(random.random() * self.election_backoff_max)
        if self.role == "candidate" and self.epoch == epoch:
            self._become_prospective()

    async def _pre_election(self) -> None:
        """Prospective: a majority of pre-votes lets us become a candidate (and only then bump
        the epoch); otherwise we go back to the leader we knew (or to unattached) and wait for
        the next fetch or election timeout."""
        epoch = self.epoch
        won = await self._collect_votes(pre_vote=True)
        if won is None or self.role != "prospective" or self.epoch != epoch:
            return
        if won:
            self._become_candidate()
            return
        await asyncio.sleep(random.random() * self.election_backoff_max)
        if self.role != "prospective" or self.epoch != epoch:
            return
        if self.leader_id >= 0 and self.leader_id != self.node_id:
            self._become_follower(self.leader_id, epoch)
        else:
            self._become_unattached(epoch)

    async def _collect_votes(self, *, pre_vote: bool) -> bool | None:
        """Ask every voter for a (pre-)vote in our epoch until a majority grants, a majority
        refuses, or the election timeout passes: True when granted, False when not, None when a
        response showed a newer epoch or leader and we moved on."""
        epoch = self.epoch
        role = self.role
        voters = dict(self.voters)
        if not self.is_voter:  # KIP-853: our id under another directory id is not us
            self._become_unattached(epoch)
            return None
        majority = len(voters) // 2 + 1
        granted, refused = {self.node_id}, set()
        if len(granted) >= majority:
            self._granted = granted
            return True
        last_epoch = self._last_epoch()
        leo = self.log.log_end_offset

        async def ask(v: Voter) -> Any:
            body = {
                "cluster_id": self.cluster_id,
                "voter_id": v.node_id,
                "topics": [
                    {
                        "topic_name": METADATA_TOPIC,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "replica_epoch": epoch,
                                "replica_id": self.node_id,
                                "replica_directory_id": _dir_uuid(self.directory_id),
                                "voter_directory_id": _dir_uuid(v.directory_id),
                                "last_offset_epoch": last_epoch,
                                "last_offset": leo,
                                "pre_vote": pre_vote,
                            }
                        ],
                    }
                ],
            }
            return v.node_id, await self.peers.request(v.host, v.port, 52, VOTE_V, body)

        deadline = time.monotonic() + self._random_election_timeout()
        tasks = [asyncio.create_task(ask(v)) for v in voters.values() if v.node_id != self.node_id]
        try:
            for fut in asyncio.as_completed(tasks, timeout=max(0.01, deadline - time.monotonic())):
                try:
                    voter_id, resp = await fut
                except (ConnectionError, KafkaError):
                    continue
                if self.role != role or self.epoch != epoch:
                    return None
                p = resp.topics[0].partitions[0] if resp.topics else None
                if p is None:
                    continue
                if p.leader_epoch > epoch:
                    if p.leader_id >= 0 and p.leader_id != self.node_id:
                        self._become_follower(p.leader_id, p.leader_epoch)
                    else:
                        self._become_unattached(p.leader_epoch)
                    return None
                if pre_vote and p.leader_epoch == epoch and p.leader_id not in (-1, self.node_id, self.leader_id):
                    self._become_follower(p.leader_id, epoch)  # a leader of our epoch we did not know of
                    return None
                if p.vote_granted:
                    granted.add(voter_id)
                    if len(granted) >= majority:
                        self._granted = granted
                        return True
                else:
                    refused.add(voter_id)
                    if len(refused) > len(voters) - majority:
                        return False
        except TimeoutError:
            pass
        finally:
            for t in tasks:
                t.cancel()
        return False

    async def _fetch_once(self) -> None:
        target = self._fetch_target()
        if target is None:
            await asyncio.sleep(self.retry_backoff * 10)
            self._maybe_timeout()
            return
        host, port = target
        epoch = self.epoch
        leo = self.log.log_end_offset
        last_epoch = self.log.latest_epoch if leo > 0 else -1
        if leo > 0 and last_epoch is None:
            last_epoch = self.snapshot_id.epoch if self.snapshot_id else 0
        max_wait_ms = int(min(500, self.fetch_timeout * 1000 / 2))
        body = {
            "cluster_id": self.cluster_id,
            "replica_state": {"replica_id": self.node_id, "replica_epoch": -1},
            "max_wait": max_wait_ms,
            "min_bytes": 0,
            "max_bytes": FETCH_MAX_BYTES,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "rack_id": "",
            "forgotten_topics_data": [],
            "topics": [
                {
                    "topic_id": METADATA_TOPIC_ID,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": epoch,
                            "fetch_offset": leo,
                            "last_fetched_epoch": last_epoch if last_epoch is not None else -1,
                            "log_start_offset": self.log.log_start_offset,
                            "partition_max_bytes": FETCH_MAX_BYTES,
                            "replica_directory_id": _dir_uuid(self.directory_id),
                        }
                    ],
                }
            ],
        }
        try:
            resp = await self.peers.request(
                host, port, 1, FETCH_V, body, purpose="fetch", timeout=max_wait_ms / 1000 + self.peers.timeout
            )
        except (ConnectionError, KafkaError) as exc:
            log.debug("[RaftClient id=%d] fetch from %s:%d failed: %s", self.node_id, host, port, exc)
            if self.leader_id >= 0 and (host, port) == self.leader_endpoint():
                self._bootstrap_cursor += 1
            await asyncio.sleep(self.retry_backoff * 5)
            self._maybe_timeout()
            return
        await self._handle_fetch_response(resp, epoch, (host, port))
        self._maybe_timeout()

    _bootstrap_cursor = 0

    def _fetch_target(self) -> tuple[str, int] | None:
        if self.leader_id >= 0 and self.leader_id != self.node_id:
            ep = self.endpoints.get(self.leader_id)
            if ep is not None:
                return ep
        candidates = [(v.host, v.port) for v in self.voters.values() if v.node_id != self.node_id]
        candidates += [b for b in self.bootstrap_servers if b != self.local_endpoint]
        if not candidates:
            return None
        self._bootstrap_cursor += 1
        return candidates[self._bootstrap_cursor % len(candidates)]

    def _maybe_timeout(self) -> None:
        """A voter that has not heard from its leader within fetch timeout starts an election."""
        if self._closed:
            return
        now = time.monotonic()
        if not self.is_voter:
            if self.leader_id >= 0 and now - self._last_leader_contact > self.fetch_timeout:
                log.info(
                    "[RaftClient id=%d] no fetch response from leader %d for %.1fs; looking for the leader",
                    self.node_id,
                    self.leader_id,
                    now - self._last_leader_contact,
                )
                self.leader_id, self.role = -1, "unattached"  # look for the new leader via other nodes
                self._last_leader_contact = now
            return
        if self.role == "follower" and now - self._last_leader_contact > self.fetch_timeout:
            log.info(
                "[RaftClient id=%d] no fetch response from leader %d for %.1fs",
                self.node_id,
                self.leader_id,
                now - self._last_leader_contact,
            )
            self._become_prospective()
        elif self.role == "unattached" and now >= self._election_deadline:
            self._become_prospective()

    async def _handle_fetch_response(self, resp: Any, epoch: int, source: tuple[str, int]) -> None:
        if resp.error_code != ErrorCode.none:
            if resp.error_code == ErrorCode.inconsistent_cluster_id:
                self.fatal_error = (
                    f"cluster id mismatch: the controller at {source[0]}:{source[1]} belongs to another "
                    f"cluster than {self.cluster_id}, the cluster this node's log dirs were formatted for"
                )
                log.error("[RaftClient id=%d] %s", self.node_id, self.fatal_error)
            await asyncio.sleep(self.retry_backoff * 10)
            return
        for ne in resp.node_endpoints:
            self.endpoints[int(ne.node_id)] = (ne.host, int(ne.port))
        p = resp.responses[0].partitions[0]
        cl = p.current_leader
        if self.epoch != epoch:
            return
        if cl.leader_epoch > self.epoch or (
            cl.leader_epoch == self.epoch
            and cl.leader_id >= 0
            and self.leader_id != cl.leader_id
            and self.role != "candidate"
        ):
            if cl.leader_id >= 0 and cl.leader_id != self.node_id:
                self._become_follower(int(cl.leader_id), int(cl.leader_epoch))
            elif cl.leader_epoch > self.epoch:
                self._become_unattached(int(cl.leader_epoch))
            if p.error_code != ErrorCode.none:
                return
        if p.error_code != ErrorCode.none:
            if p.error_code in (
                ErrorCode.not_leader_or_follower,
                ErrorCode.fenced_leader_epoch,
                ErrorCode.unknown_leader_epoch,
            ):
                await asyncio.sleep(self.retry_backoff * 5)
            return
        if self.role not in ("follower", "unattached") or self.leader_id < 0:
            return
        self._last_leader_contact = time.monotonic()
        self._fetched_from_leader = self.role == "follower"
        if p.diverging_epoch.epoch >= 0 or p.diverging_epoch.end_offset >= 0:
            target = max(0, min(int(p.diverging_epoch.end_offset), self.log.log_end_offset))
            if target < self.hw:
                log.warning("[RaftClient id=%d] leader asks to truncate below the high watermark", self.node_id)
            log.info(
                "[RaftClient id=%d] log diverges from leader at epoch %d; truncating to %d",
                self.node_id,
                p.diverging_epoch.epoch,
                target,
            )
            self.log.truncate_to(target)
            self._truncate_voters(target)
            return
        if p.snapshot_id.end_offset >= 0:
            await self._fetch_snapshot(
                source, snapshots.SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch))
            )
            return
        data = bytes(p.records) if p.records else b""
        if data:
            batches = list(iter_batches(data, allow_partial_tail=True))
            if batches and batches[0].base_offset == self.log.log_end_offset:
                start = self.log.log_end_offset
                self.log.append_as_follower(data)
                await asyncio.to_thread(self.log.flush)
                self._scan_voters(start, self.log.log_end_offset)
        self._set_hw(min(int(p.high_watermark), self.log.log_end_offset))
        if (
            self.auto_join
            and not self.is_voter
            and self._join_task is None
            and not self.static
            and self.hw > 0
            and self.log.log_end_offset >= int(p.high_watermark)
        ):
            self._join_task = asyncio.create_task(self._auto_join())

    async def _fetch_snapshot(self, source: tuple[str, int], snap: snapshots.SnapshotId) -> None:
        chunks: list[bytes] = []
        position = 0
        while True:
            body = {
                "cluster_id": self.cluster_id,
                "replica_id": self.node_id,
                "max_bytes": FETCH_MAX_BYTES,
                "topics": [
                    {
                        "name": METADATA_TOPIC,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": self.epoch,
                                "snapshot_id": {"end_offset": snap.end_offset, "epoch": snap.epoch},
                                "position": position,
                                "replica_directory_id": _dir_uuid(self.directory_id),
                            }
                        ],
                    }
                ],
            }
            resp = await self.peers.request(source[0], source[1], 59, SNAP_V, body)
            # a whole-request error (CLUSTER_AUTHORIZATION_FAILED, say) comes without partitions
            p = resp.topics[0].partitions[0] if resp.error_code == ErrorCode.none and resp.topics else resp
            if p.error_code != ErrorCode.none:
                log.warning("[RaftClient id=%d] FetchSnapshot failed: %s", self.node_id, p.error_code.name)
                return
            part = bytes(p.unaligned_records or b"")
            chunks.append(part)
            position += len(part)
            if position >= p.size or not part:
                break
        snapshots.write_snapshot_bytes(self.dir, snap, b"".join(chunks))
        log.info(
            "[RaftClient id=%d] installed snapshot %s (%d bytes) from the leader; loading it",
            self.node_id,
            snap.file_name,
            position,
        )
        self.log.truncate_fully_and_start_at(snap.end_offset)
        snapshots.delete_snapshots_before(self.dir, snap)
        self.snapshot_id = snap
        self._voter_history = self._voter_history[:1]  # the log is gone: voters come from the snapshot
        self.hw = 0
        self._delivered = 0
        self.load_snapshot()
        log.info("[RaftClient id=%d] loaded snapshot %s; fetching the log from there", self.node_id, snap.file_name)

    async def _auto_join(self) -> None:
        """KIP-853 auto-join: a caught-up controller outside the voter set asks to be added.
        If its id is still a voter under an old directory id (the disk was lost and
        re-formatted), it first asks for that stale voter's removal, as Kafka's controllers do."""
        try:
            while not self._closed and not self.is_voter:
                ep = self.leader_endpoint()
                stale = self._stale_self()
                if ep is not None and stale is not None:
                    body = {
                        "cluster_id": self.cluster_id,
                        "voter_id": self.node_id,
                        "voter_directory_id": _dir_uuid(stale.directory_id),
                    }
                    try:
                        resp = await self.peers.request(ep[0], ep[1], 81, 0, body, timeout=10)
                        log.info(
                            "[RaftClient id=%d] RemoveRaftVoter of my stale directory %s: %s",
                            self.node_id,
                            stale.directory_id,
                            resp.error_code.name,
                        )
                    except (ConnectionError, KafkaError):
                        pass
                elif ep is not None and self.local_endpoint is not None:
                    body = {
                        "cluster_id": self.cluster_id,
                        "timeout": 5000,
                        "voter_id": self.node_id,
                        "voter_directory_id": _dir_uuid(self.directory_id),
                        "listeners": [
                            {"name": "CONTROLLER", "host": self.local_endpoint[0], "port": self.local_endpoint[1]}
                        ],
                    }
                    try:
                        resp = await self.peers.request(ep[0], ep[1], 80, 0, body, timeout=10)
                        if resp.error_code == ErrorCode.none:
                            log.info("[RaftClient id=%d] joined the voter set", self.node_id)
                        elif resp.error_code != ErrorCode.duplicate_voter:
                            log.info(
                                "[RaftClient id=%d] AddRaftVoter: %s %s",
                                self.node_id,
                                resp.error_code.name,
                                resp.error_message,
                            )
                    except (ConnectionError, KafkaError):
                        pass
                await asyncio.sleep(1.0)
        finally:
            self._join_task = None

    # --- RPC handlers (controller listener) ------------------------------------------------------
    def _check_cluster(self, cluster_id: str | None) -> bool:
        return cluster_id is None or cluster_id == self.cluster_id

    def handle_vote(self, req: Any) -> dict[str, Any]:
        p = req.topics[0].partitions[0]
        out = {
            "partition_index": 0,
            "error_code": ErrorCode.none,
            "leader_id": self.leader_id,
            "leader_epoch": self.epoch,
            "vote_granted": False,
        }
        if not self._check_cluster(req.cluster_id):
            return self._vote_response(ErrorCode.inconsistent_cluster_id, out)
        wanted = uuids.to_str(p.voter_directory_id) if p.voter_directory_id is not None else None
        if wanted and self.directory_id and wanted != self.directory_id:
            # The candidate asks the voter this node was before its disk was lost: no vote.
            out["error_code"] = ErrorCode.invalid_voter_key
            return self._vote_response(ErrorCode.none, out)
        cand, cand_epoch = int(p.replica_id), int(p.replica_epoch)
        pre_vote = bool(getattr(p, "pre_vote", False))
        last = (int(p.last_offset_epoch), int(p.last_offset))
        # a candidate bumped its epoch past its log's; a prospective (pre-vote) has not
        if last[1] < 0 or last[0] < 0 or (last[0] > cand_epoch if pre_vote else last[0] >= cand_epoch):
            out["error_code"] = ErrorCode.invalid_request
            return self._vote_response(ErrorCode.none, out)
        if cand_epoch < self.epoch:
            out["error_code"] = ErrorCode.fenced_leader_epoch
            return self._vote_response(ErrorCode.none, out)
        if cand_epoch > self.epoch:
            self._become_unattached(cand_epoch)
        up_to_date = last >= (self._last_epoch(), self.log.log_end_offset)
        if pre_vote:
            # KIP-996: a pre-vote binds nothing and changes no state. Refused by a leader, and by a
            # follower that has heard from its leader since following it (the leader is alive)
            granted = up_to_date and self.role != "leader"
            if self.role == "follower" and self._fetched_from_leader:
                granted = False
            log.info(
                "[RaftClient id=%d] pre-vote for %d in epoch %d %s",
                self.node_id,
                cand,
                cand_epoch,
                "granted" if granted else "refused",
            )
        else:
            granted = (
                up_to_date
                and self.role not in ("leader", "candidate")
                and self.leader_id < 0
                and self.voted_id in (-1, cand)
            )
            if granted:
                if self.voted_id != cand:
                    self.voted_id = cand
                    self._persist()
                self._election_deadline = time.monotonic() + self._random_election_timeout()
                log.info("[RaftClient id=%d] voted for %d in epoch %d", self.node_id, cand, self.epoch)
        out.update(leader_id=self.leader_id, leader_epoch=self.epoch, vote_granted=granted)
        return self._vote_response(ErrorCode.none, out)

    def _vote_response(self, error: ErrorCode, part: dict[str, Any]) -> dict[str, Any]:
        return {
            "error_code": error,
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [part]}],
            "node_endpoints": self._node_endpoints(),
        }

    def _node_endpoints(self) -> list[dict[str, Any]]:
        ep = self.endpoints.get(self.leader_id) if self.leader_id >= 0 else None
        if self.leader_id == self.node_id and self.local_endpoint:
            ep = self.local_endpoint
        return [{"node_id": self.leader_id, "host": ep[0], "port": ep[1], "rack": None}] if ep else []

    def handle_begin_quorum_epoch(self, req: Any) -> dict[str, Any]:
        p = req.topics[0].partitions[0]
        error = ErrorCode.none
        if not self._check_cluster(req.cluster_id):
            error = ErrorCode.inconsistent_cluster_id
        elif p.leader_epoch < self.epoch:
            error = ErrorCode.fenced_leader_epoch
        else:
            for le in req.leader_endpoints:
                self.endpoints[int(p.leader_id)] = (le.host, int(le.port))
            if p.leader_epoch > self.epoch or self.leader_id != p.leader_id:
                self._become_follower(int(p.leader_id), int(p.leader_epoch))
            self._last_leader_contact = time.monotonic()
        return {
            "error_code": ErrorCode.none,
            "topics": [
                {
                    "topic_name": METADATA_TOPIC,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": error,
                            "leader_id": self.leader_id,
                            "leader_epoch": self.epoch,
                        }
                    ],
                }
            ],
            "node_endpoints": self._node_endpoints(),
        }

    def handle_end_quorum_epoch(self, req: Any) -> dict[str, Any]:
        p = req.topics[0].partitions[0]
        error = ErrorCode.none
        if not self._check_cluster(req.cluster_id):
            error = ErrorCode.inconsistent_cluster_id
        elif p.leader_epoch < self.epoch:
            error = ErrorCode.fenced_leader_epoch
        elif p.leader_epoch == self.epoch and p.leader_id == self.leader_id and self.role == "follower":
            # the leader resigned: elect quickly instead of waiting for the fetch timeout
            self._become_unattached(self.epoch)
            self._election_deadline = time.monotonic() + random.random() * self.election_timeout / 2
        return {
            "error_code": ErrorCode.none,
            "topics": [
                {
                    "topic_name": METADATA_TOPIC,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": error,
                            "leader_id": self.leader_id,
                            "leader_epoch": self.epoch,
                        }
                    ],
                }
            ],
            "node_endpoints": self._node_endpoints(),
        }

    async def handle_fetch(self, req: Any) -> dict[str, Any]:
        replica = int(req.replica_state.replica_id)
        tp = req.topics[0]
        p = tp.partitions[0]
        part: dict[str, Any] = {
            "partition_index": 0,
            "error_code": ErrorCode.none,
            "high_watermark": self.hw,
            "last_stable_offset": self.hw,
            "log_start_offset": self.log.log_start_offset,
            "diverging_epoch": {"epoch": -1, "end_offset": -1},
            "current_leader": {"leader_id": self.leader_id, "leader_epoch": self.epoch},
            "snapshot_id": {"end_offset": -1, "epoch": -1},
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            "records": None,
        }

        def respond(error: ErrorCode = ErrorCode.none) -> dict[str, Any]:
            part["error_code"] = error
            part["high_watermark"] = self.hw
            part["current_leader"] = {"leader_id": self.leader_id, "leader_epoch": self.epoch}
            return {
                "throttle_time": 0,
                "error_code": ErrorCode.none,
                "session_id": 0,
                "responses": [{"topic_id": METADATA_TOPIC_ID, "partitions": [part]}],
                "node_endpoints": self._node_endpoints(),
            }

        if not self._check_cluster(req.cluster_id):
            out = respond()
            out["error_code"] = ErrorCode.inconsistent_cluster_id
            return out
        if self.role != "leader":
            return respond(ErrorCode.not_leader_or_follower)
        if p.current_leader_epoch < self.epoch:
            return respond(ErrorCode.fenced_leader_epoch)
        if p.current_leader_epoch > self.epoch:
            return respond(ErrorCode.unknown_leader_epoch)
        offset, last_epoch = int(p.fetch_offset), int(p.last_fetched_epoch)
        leo = self.log.log_end_offset
        if offset < self.log.log_start_offset and self.snapshot_id is not None:
            part["snapshot_id"] = {"end_offset": self.snapshot_id.end_offset, "epoch": self.snapshot_id.epoch}
            return respond()
        if offset > 0 and last_epoch >= 0:
            e, end = self.log.leader_epoch_cache.end_offset_for(last_epoch, leo)
            if (e, end) == (-1, -1):
                e, end = 0, self.log.log_start_offset
            if e != last_epoch or end < offset:
                if end < self.log.log_start_offset and self.snapshot_id is not None:
                    # the common prefix is gone from the log: only the snapshot can bring it back
                    part["snapshot_id"] = {
                        "end_offset": self.snapshot_id.end_offset,
                        "epoch": self.snapshot_id.epoch,
                    }
                    return respond()
                part["diverging_epoch"] = {"epoch": e, "end_offset": end}
                return respond()
        elif offset > leo:
            part["diverging_epoch"] = {"epoch": self.log.latest_epoch or 0, "end_offset": leo}
            return respond()
        now = _now_ms()
        fetcher_dir = uuids.to_str(p.replica_directory_id) if p.replica_directory_id is not None else None
        st = (
            self._replica(replica)
            if self._is_voter_key(replica, fetcher_dir)
            else self._observers.setdefault(replica, ReplicaState())
        )
        st.log_end_offset, st.last_fetch_ms = offset, now
        if offset >= self.hw:
            st.last_caught_up_ms = now
        if p.replica_directory_id is not None:
            st.directory_id = uuids.to_str(p.replica_directory_id)
        self._maybe_advance_hw()
        wait = req.max_wait.total_seconds() if hasattr(req.max_wait, "total_seconds") else int(req.max_wait) / 1000
        if offset >= self.log.log_end_offset and self._sent_hw.get(replica) == self.hw and wait > 0:
            ev = self._change
            await wait_quietly(ev.wait(), wait)
            if self.role != "leader":
                return respond(ErrorCode.not_leader_or_follower)
        if offset < self.log.log_end_offset:
            info = self.log.read(
                offset, int(p.partition_max_bytes) or FETCH_MAX_BYTES, isolation="log_end", min_one_message=True
            )
            if info.records is not None:
                part["records"] = info.records.read()
        self._sent_hw[replica] = self.hw
        return respond()

    def handle_fetch_snapshot(self, req: Any) -> dict[str, Any]:
        p = req.topics[0].partitions[0]
        snap = snapshots.SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch))
        out: dict[str, Any] = {
            "index": 0,
            "error_code": ErrorCode.none,
            "snapshot_id": {"end_offset": snap.end_offset, "epoch": snap.epoch},
            "current_leader": {"leader_id": self.leader_id, "leader_epoch": self.epoch},
            "size": 0,
            "position": int(p.position),
            "unaligned_records": b"",
        }
        path = self.dir / snap.file_name
        if self.role != "leader":
            out["error_code"] = ErrorCode.not_leader_or_follower
        elif not path.exists():
            out["error_code"] = ErrorCode.snapshot_not_found
        else:
            data = path.read_bytes()
            out["size"] = len(data)
            out["unaligned_records"] = data[int(p.position) : int(p.position) + int(req.max_bytes or FETCH_MAX_BYTES)]
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "topics": [{"name": METADATA_TOPIC, "partitions": [out]}],
            "node_endpoints": self._node_endpoints(),
        }

    def handle_describe_quorum(self, req: Any) -> dict[str, Any]:
        part: dict[str, Any] = {
            "partition_index": 0,
            "error_code": ErrorCode.none,
            "error_message": None,
            "leader_id": self.leader_id,
            "leader_epoch": self.epoch,
            "high_watermark": self.hw,
            "current_voters": [],
            "observers": [],
        }
        if self.role != "leader":
            part["error_code"] = ErrorCode.not_leader_or_follower
        else:

            def state(node: int, st: ReplicaState, directory_id: str | None = None) -> dict[str, Any]:
                leo = self.log.log_end_offset if node == self.node_id else st.log_end_offset
                now = _now_ms()
                return {
                    "replica_id": node,
                    "replica_directory_id": _dir_uuid(directory_id or st.directory_id),
                    "log_end_offset": leo,
                    "last_fetch_timestamp": now if node == self.node_id else st.last_fetch_ms,
                    "last_caught_up_timestamp": now if node == self.node_id else st.last_caught_up_ms,
                }

            part["current_voters"] = [
                state(v, self._replica(v), self.voters[v].directory_id) for v in sorted(self.voters)
            ]
            part["observers"] = [
                state(o, st) for o, st in sorted(self._observers.items()) if not self._is_voter_key(o, st.directory_id)
            ]
        nodes = [
            {"node_id": v.node_id, "listeners": [{"name": "CONTROLLER", "host": v.host, "port": v.port}]}
            for v in self.voters.values()
        ]
        return {
            "error_code": ErrorCode.none,
            "error_message": None,
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [part]}],
            "nodes": nodes,
        }

    async def add_voter(self, voter_id: int, directory_id: str, host: str, port: int) -> tuple[ErrorCode, str | None]:
        """AddRaftVoter at the leader: the new voter must be a caught-up observer."""
        if self.role != "leader" or not self.leader_ready:
            return ErrorCode.not_leader_or_follower, "not the quorum leader"
        if self.static:
            return ErrorCode.invalid_request, "the voter set is static (controller.quorum.voters)"
        if voter_id in self.voters:
            return ErrorCode.duplicate_voter, f"node {voter_id} is already a voter"
        if self._pending_voter_change or self._removed_at() >= self.hw:
            return ErrorCode.request_timed_out, "another voter change is in progress"
        obs = self._observers.get(voter_id)
        if obs is None or obs.log_end_offset < self.hw or _now_ms() - obs.last_fetch_ms > self.fetch_timeout * 1000:
            return ErrorCode.request_timed_out, f"node {voter_id} is not a caught-up observer"
        new = {**self.voters, voter_id: Voter(voter_id, directory_id, host, port)}
        return await self._write_voters(new)

    async def remove_voter(self, voter_id: int, directory_id: str | None) -> tuple[ErrorCode, str | None]:
        if self.role != "leader" or not self.leader_ready:
            return ErrorCode.not_leader_or_follower, "not the quorum leader"
        if self.static:
            return ErrorCode.invalid_request, "the voter set is static (controller.quorum.voters)"
        v = self.voters.get(voter_id)
        if v is None or (directory_id and v.directory_id and directory_id != v.directory_id):
            return ErrorCode.voter_not_found, f"node {voter_id} is not a voter"
        if len(self.voters) == 1:
            return ErrorCode.invalid_request, "cannot remove the last voter"
        if self._pending_voter_change or self._removed_at() >= self.hw:
            return ErrorCode.request_timed_out, "another voter change is in progress"
        new = {k: x for k, x in self.voters.items() if k != voter_id}
        return await self._write_voters(new)

    async def _write_voters(self, new: dict[int, Voter]) -> tuple[ErrorCode, str | None]:
        self._pending_voter_change = True
        try:
            await self.append(
                [mr.VotersRecord(tuple(v.as_tuple() for v in sorted(new.values(), key=lambda x: x.node_id)))]
            )
        except KafkaError as exc:
            return ErrorCode.not_leader_or_follower, exc.message
        finally:
            self._pending_voter_change = False
        for gone in set(self._replicas) - set(new):
            del self._replicas[gone]  # a re-added id starts from what it fetched as an observer
        for v in new:
            if v not in self._replicas and v in self._observers:
                self._replicas[v] = self._observers.pop(v)
            self._replica(v)
        self._notify()
        return ErrorCode.none, None
