"""ReplicaFetcherManager: follower partitions pull from their leaders (Kafka's replica fetchers).

One fetcher task per (leader broker, fetcher id), the id being the partition's hash modulo
num.replica.fetchers. A fetcher sends full Fetch v17 requests (no fetch session: the partition
set is small and changes with leadership; written by kopfka.protocol.fetch_request, as one is
sent per replicated batch) carrying the replica state (our id and broker epoch),
each partition's current leader epoch, fetch offset (= our LEO) and last fetched epoch. The
leader answers either records, which are appended with the leader's offsets and epochs, or a
diverging epoch, on which we truncate (KIP-320/595) and fetch again — no separate
OffsetsForLeaderEpoch round trip. The leader's HW comes back with every response and bounds
ours. Replication throttles (`{leader,follower}.replication.throttled.rate` for the replicas
listed in the topics' `*.replication.throttled.replicas`) sit here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kopfka import uuids
from kopfka.client.connection import CLIENT_ID, KafkaConnection
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.fetch_request import VERSION as FETCH_VERSION
from kopfka.protocol.fetch_request import FetchPartition, encode_replica_fetch
from kopfka.protocol.records import LOG_OVERHEAD, iter_batches
from kopfka.quota.stats import MetricConfig, Sensor
from kopfka.security.client import ClientSecurity
from kopfka.security.listeners import inter_broker_listener
from kopfka.server.replication_trace import TRACE
from kopfka.timeouts import wait_quietly

if TYPE_CHECKING:
    from kopfka.server.partition import Partition
    from kopfka.server.replica_manager import FetchPartitionData, ReplicaManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
RETRY_LATER = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.unknown_topic_id,
    ErrorCode.kafka_storage_error,
    ErrorCode.replica_not_available,
    ErrorCode.leader_not_available,
}
UNLIMITED = 2**63 - 1
# A leader that answers UNKNOWN_LEADER_EPOCH has not applied the leadership change we fetch
# under yet: metadata reaches brokers at slightly different times, and it catches up within
# milliseconds. Kafka's fetcher backs such a partition off for replica.fetch.backoff.ms (1 s by
# default) like any other error, holding the new leader's acks=all produces for that long after
# a leadership move; kopfka asks again after this pause (never later than the backoff).
LEADER_CATCH_UP_S = 0.02


class ReplicationQuota:
    """A byte-rate bound shared by every throttled replica on one side (leader or follower).

    Kafka checks only the rate sampled over 11 one-second windows, which lets a fresh or idle
    throttle pass ~10 windows' worth at once and then frees it all at once when that sample
    expires (a burst/silence sawtooth): a 3 MB catch-up at 200 kB/s would end after ~11 s. Here
    each recorded chunk also pushes a pacing point forward by size / rate, and nothing throttled
    moves before it, so a catching-up replica advances at the rate from the start."""

    def __init__(self, rate: int) -> None:
        self.sensor = Sensor("replication", MetricConfig(samples=11, window_ms=1000), None)
        self.pace_next = 0.0  # monotonic seconds
        self.update(rate)

    def update(self, rate: int) -> None:
        self.sensor.bound = None if rate >= UNLIMITED or rate <= 0 else float(rate)
        if self.sensor.bound is None:
            self.pace_next = 0.0

    @property
    def enabled(self) -> bool:
        return self.sensor.bound is not None

    def chunk(self, max_bytes: int) -> int:
        """At most a second's worth per throttled partition and fetch: one response cannot run far ahead."""
        return max_bytes if self.sensor.bound is None else max(1, min(max_bytes, int(self.sensor.bound)))

    def exceeded(self) -> bool:
        if self.sensor.bound is None:
            return False
        now = time.monotonic()
        return now < self.pace_next or self.sensor.value(now * 1000) > self.sensor.bound

    def free_at(self) -> float:
        """When (monotonic seconds) the next throttled chunk may move: the pacing point, or a short
        while when it is the windowed rate that is over the bound."""
        now = time.monotonic()
        return self.pace_next if self.pace_next > now else now + 0.05

    def record(self, n: int) -> None:
        if self.sensor.bound is not None and n > 0:
            now = time.monotonic()
            self.sensor.record(n, now * 1000, check=False)
            self.pace_next = max(self.pace_next, now) + n / self.sensor.bound


def throttled(topic_config: Mapping[str, Any], key: str, partition: int, broker_id: int) -> bool:
    raw = topic_config.get(key) or []
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    items = [i.strip() for i in items if i and i.strip()]
    return "*" in items or f"{partition}:{broker_id}" in items


def _whole_batches(records: bytes) -> bytes:
    """A fetch response may end in a partial batch (cut at the byte limit): append the whole ones."""
    end = 0
    for b in iter_batches(records, verify_crc=False, allow_partial_tail=True):
        end = b.position + LOG_OVERHEAD + b.batch_length
    return records[:end] if end < len(records) else records


def divergence_truncation_offset(ulog: Any, epoch: int, end_offset: int) -> int:
    """Where our log leaves the leader's, given the leader's (epoch, end offset) answer to our
    last fetched epoch (Kafka's getOffsetTruncationState)."""
    leo = int(ulog.log_end_offset)
    local = ulog.end_offset_for_epoch(epoch) if epoch >= 0 else None
    if end_offset < 0:
        return int(ulog.high_watermark)
    if local is None:
        return min(end_offset, leo)
    if local[0] != epoch:  # we don't know the leader's epoch: back to our previous one, then ask again
        return min(int(local[1]), leo)
    return min(int(local[1]), end_offset, leo)


class ReplicaFetcherManager:
    def __init__(self, rm: ReplicaManager, config: Any, security: ClientSecurity | None = None) -> None:
        self.rm = rm
        self.config = config
        self.security = security  # the inter-broker listener's client side (TLS / SASL)
        self.num_fetchers = max(1, int(config["num.replica.fetchers"]))
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self.assignment: dict[TopicPartition, tuple[int, int]] = {}
        self.listener = inter_broker_listener(config) if hasattr(config, "broker_listeners") else "PLAINTEXT"
        self.leader_quota = ReplicationQuota(int(config["leader.replication.throttled.rate"]))
        self.follower_quota = ReplicationQuota(int(config["follower.replication.throttled.rate"]))

    def update_throttle_rates(self, leader_rate: int, follower_rate: int) -> None:
        self.leader_quota.update(leader_rate)
        self.follower_quota.update(follower_rate)

    def _fetcher_id(self, tp: TopicPartition) -> int:
        h = 0
        for ch in tp[0]:
            h = (31 * h + ord(ch)) & 0xFFFFFFFF
        return ((31 * h + tp[1]) & 0x7FFFFFFF) % self.num_fetchers

    def add_partition(self, tp: TopicPartition, leader_id: int) -> None:
        key = (leader_id, self._fetcher_id(tp))
        old = self.assignment.get(tp)
        if old is not None and old != key:
            self._remove_from(old, tp)
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = self.fetchers[key] = ReplicaFetcher(self, leader_id, key[1])
        self.assignment[tp] = key
        fetcher.add(tp)

    def remove_partition(self, tp: TopicPartition) -> None:
        key = self.assignment.pop(tp, None)
        if key is not None:
            self._remove_from(key, tp)

    def _remove_from(self, key: tuple[int, int], tp: TopicPartition) -> None:
        """A fetcher left without partitions stops and closes its connection (Kafka's
        shutdownIdleFetcherThreads): kept, it would hold a connection to a leader that may
        restart meanwhile, and the first fetch after leadership returns would fail on it and
        back off replica.fetch.backoff.ms while acks=all produces wait for this follower."""
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            return
        fetcher.remove(tp)
        if not fetcher.partitions:
            fetcher.stop()
            del self.fetchers[key]

    def resize(self, num_fetchers: int) -> None:
        """num.replica.fetchers changed (Kafka's resizeThreadPool): every partition is assigned
        again by hash over the new count, keeping its fetch state (the log is the state: the next
        fetch starts at its end), and fetchers left without partitions stop."""
        if num_fetchers == self.num_fetchers:
            return
        log.info("Resizing the fetcher pool from %d to %d fetchers per source broker", self.num_fetchers, num_fetchers)
        self.num_fetchers = num_fetchers
        for tp, (leader_id, _fid) in list(self.assignment.items()):
            self.add_partition(tp, leader_id)
        for key in [k for k, f in self.fetchers.items() if not f.partitions]:
            self.fetchers.pop(key).stop()

    def is_leader_throttled(self, tp: TopicPartition) -> bool:
        """Listed in leader.replication.throttled.replicas as served by us: its bytes count."""
        if not self.leader_quota.enabled:
            return False
        cfg = self.rm.image.topic_config(tp[0])
        return throttled(cfg, "leader.replication.throttled.replicas", tp[1], self.rm.node_id)

    def is_follower_throttled(self, tp: TopicPartition) -> bool:
        """Listed in follower.replication.throttled.replicas for us: its bytes count."""
        if not self.follower_quota.enabled:
            return False
        cfg = self.rm.image.topic_config(tp[0])
        return throttled(cfg, "follower.replication.throttled.replicas", tp[1], self.rm.node_id)

    def leader_holds_back(self, part: Partition, replica_id: int) -> bool:
        """Leader side: serve a throttled replica nothing while over the rate — unless it is in the
        ISR: as in Kafka, in-sync replicas are never held back (acks=all and the HW depend on them)."""
        return (
            self.leader_quota.enabled
            and replica_id not in part.isr
            and self.is_leader_throttled(part.tp)
            and self.leader_quota.exceeded()
        )

    def record_leader_bytes(self, result: Mapping[TopicPartition, FetchPartitionData]) -> None:
        if not self.leader_quota.enabled:
            return
        for tp, data in result.items():
            if data.size and self.is_leader_throttled(tp):
                self.leader_quota.record(data.size)

    def shutdown(self) -> None:
        for f in self.fetchers.values():
            f.stop()
        self.fetchers.clear()


class ReplicaFetcher:
    def __init__(self, manager: ReplicaFetcherManager, leader_id: int, fetcher_id: int) -> None:
        self.manager = manager
        self.rm = manager.rm
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        cfg = manager.config
        self.max_wait_ms = int(cfg["replica.fetch.wait.max.ms"])
        self._throttled_out = False  # the last _ready left a throttled partition out
        self.min_bytes = int(cfg["replica.fetch.min.bytes"])
        self.max_bytes = int(cfg["replica.fetch.response.max.bytes"])
        self.partition_max_bytes = int(cfg["replica.fetch.max.bytes"])
        self.backoff_s = int(cfg["replica.fetch.backoff.ms"]) / 1000
        self.request_timeout_s = int(cfg["replica.socket.timeout.ms"]) / 1000
        self.partitions: dict[TopicPartition, float] = {}  # tp -> not before (monotonic)
        self._wake = asyncio.Event()
        self.conn: KafkaConnection | None = None
        self._stopped = False
        self._received = 0.0  # when the last response arrived (replication trace)
        self._topic_uuids: dict[str, uuid.UUID] = {}  # topic id (base64) -> UUID, parsed once
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"ReplicaFetcher-{fetcher_id}-{leader_id}")

    def add(self, tp: TopicPartition) -> None:
        self.partitions[tp] = 0.0
        self._wake.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    def stop(self) -> None:
        """Stop fetching. The connection is closed by the task itself as it ends: closing it here
        would finish an in-flight read in the same loop step as the cancellation."""
        self._stopped = True
        self.task.cancel()

    async def _run(self) -> None:
        try:
            while not self._stopped:  # also ends the loop should a cancellation ever be lost
                await self._fetch_round()
        finally:
            if self.conn is not None:
                self.conn.writer.close()
                self.conn = None

    async def _fetch_round(self) -> None:
        try:
            await self._fetch_once()
        except (OSError, ConnectionError, TimeoutError, asyncio.IncompleteReadError, KafkaError) as exc:
            log.info("[ReplicaFetcher %d->%d] fetch failed: %s", self.rm.node_id, self.leader_id, exc)
            await self._close()
            await asyncio.sleep(self.backoff_s)
        except Exception:
            log.exception("[ReplicaFetcher %d->%d] unexpected error", self.rm.node_id, self.leader_id)
            await self._close()
            await asyncio.sleep(self.backoff_s)

    async def _close(self) -> None:
        if self.conn is not None:
            conn, self.conn = self.conn, None
            with contextlib.suppress(OSError):
                await wait_quietly(conn.close(), 1)

    async def _connect(self) -> KafkaConnection:
        if self.conn is None:
            b = self.rm.image.brokers.get(self.leader_id)
            ep = b.endpoint(self.manager.listener) if b is not None else None
            if ep is None and b is not None and b.endpoints:
                ep = b.endpoints[0]
            if ep is None:
                raise KafkaError(ErrorCode.leader_not_available, f"no endpoint known for broker {self.leader_id}")
            self.conn = await KafkaConnection.open(
                f"{ep.host}:{ep.port}",
                timeout=5,
                security=self.manager.security,
                limit=max(self.partition_max_bytes, 2**16),  # a full partition's answer without pausing
            )
        return self.conn

    def _ready(self) -> list[tuple[TopicPartition, Partition]]:
        now = time.monotonic()
        out = []
        self._throttled_out = False
        for tp, not_before in self.partitions.items():
            part = self.rm.partitions.get(tp)
            if part is None or part.is_leader or part.leader_id != self.leader_id or not_before > now:
                continue
            if part.log.offline:
                continue
            if (
                self.rm.node_id not in part.isr
                and self.manager.is_follower_throttled(tp)
                and self.manager.follower_quota.exceeded()
            ):
                self._throttled_out = True
                continue  # in-sync replicas are never held back (Kafka's shouldFollowerThrottle)
            out.append((tp, part))
        return out

    async def _fetch_once(self) -> None:
        ready = self._ready()
        if not ready:
            self._wake.clear()
            delay = min((nb - time.monotonic() for nb in self.partitions.values()), default=1.0)
            await wait_quietly(self._wake.wait(), max(0.02, min(delay, 0.2)))
            return
        conn = await self._connect()
        sent: dict[TopicPartition, tuple[Partition, int, int]] = {}
        by_topic: dict[str, tuple[str, list[FetchPartition]]] = {}  # topic id -> (name, partitions)
        ids: dict[uuid.UUID, str] = {}
        for tp, part in ready:
            offset = part.log.log_end_offset
            latest = part.log.latest_epoch
            sent[tp] = (part, offset, part.leader_epoch)
            max_bytes = self.partition_max_bytes
            if self.rm.node_id not in part.isr and self.manager.is_follower_throttled(tp):
                max_bytes = self.manager.follower_quota.chunk(max_bytes)
            by_topic.setdefault(part.topic_id, (tp[0], []))[1].append(
                (
                    tp[1],
                    part.leader_epoch,
                    offset,
                    latest if latest is not None else -1,
                    part.log.log_start_offset,
                    max_bytes,
                )
            )
        topics = []
        for topic_id, (name, partitions) in by_topic.items():
            tid = self._topic_uuids.get(topic_id)
            if tid is None:
                tid = self._topic_uuids[topic_id] = uuids.from_str(topic_id)
            ids[tid] = name
            topics.append((tid, partitions))
        epoch = int(self.rm.broker_epoch()) if self.rm.broker_epoch is not None else -1
        node_id, wait, min_bytes, max_total = self.rm.node_id, self._max_wait_ms(), self.min_bytes, self.max_bytes
        resp = await conn.request_encoded(
            1,
            FETCH_VERSION,
            lambda corr: encode_replica_fetch(corr, CLIENT_ID, node_id, epoch, wait, min_bytes, max_total, topics),
            timeout=self.max_wait_ms / 1000 + self.request_timeout_s,
        )
        self._received = time.perf_counter() if TRACE.enabled else 0.0
        if resp.error_code != ErrorCode.none:
            raise KafkaError(resp.error_code, f"fetch from {self.leader_id} failed: {resp.error_code.name}")
        for t in resp.responses:
            topic = ids.get(t.topic_id) if t.topic_id is not None else None
            if topic is None:
                continue
            for p in t.partitions:
                tp = (topic, int(p.partition_index))
                entry = sent.get(tp)
                if entry is None:
                    continue
                try:
                    self._process(tp, entry, p)
                except KafkaError as exc:
                    log.warning(
                        "[ReplicaFetcher %d->%d] %s-%d: %s", self.rm.node_id, self.leader_id, tp[0], tp[1], exc.message
                    )
                    self._delay(tp)
                except OSError as exc:
                    log.exception("I/O error replicating %s-%d", *tp)
                    self.rm.log_manager.report_io_error(tp, exc)
                    self._delay(tp)

    def _max_wait_ms(self) -> int:
        """replica.fetch.wait.max.ms, or less: the long poll must not outlast the pause of a
        partition left out of it (LEADER_CATCH_UP_S is far shorter than the poll), nor the
        follower throttle's, which would leave a paced rate mostly unused (a kopfka deviation:
        Kafka's fetcher long-polls the other partitions for the whole wait)."""
        now = time.monotonic()
        pauses = [nb for nb in self.partitions.values() if nb > now]
        if self._throttled_out:
            pauses.append(self.manager.follower_quota.free_at())
        soonest = min(pauses, default=None)
        if soonest is None:
            return self.max_wait_ms
        return max(0, min(self.max_wait_ms, int((soonest - now) * 1000) + 1))

    def _delay(self, tp: TopicPartition, seconds: float | None = None) -> None:
        if tp in self.partitions:
            self.partitions[tp] = time.monotonic() + min(self.backoff_s, seconds or self.backoff_s)

    def _process(self, tp: TopicPartition, entry: tuple[Partition, int, int], p: Any) -> None:
        part, sent_offset, sent_epoch = entry
        if (
            self.rm.partitions.get(tp) is not part
            or part.is_leader
            or part.leader_epoch != sent_epoch
            or tp not in self.partitions
        ):
            return  # leadership moved while the fetch was in flight
        ulog = part.log
        err = p.error_code
        if err == ErrorCode.none:
            div = p.diverging_epoch
            if div is not None and (div.epoch >= 0 or div.end_offset >= 0):
                self._truncate_on_divergence(part, int(div.epoch), int(div.end_offset))
                return
            if ulog.log_end_offset != sent_offset:
                return
            records = _whole_batches(p.records) if p.records else b""
            if records:
                info = ulog.append_as_follower(records)
                if TRACE.enabled:
                    TRACE.mark("follower_append", tp[0], tp[1], info.first_offset, info.last_offset + 1, self._received)
                if self.manager.is_follower_throttled(tp):
                    self.manager.follower_quota.record(len(records))
            hw = min(int(p.high_watermark), ulog.log_end_offset)
            if hw >= 0:
                ulog.update_high_watermark(hw)
            leader_start = int(p.log_start_offset)
            if leader_start > ulog.log_start_offset:
                ulog.maybe_increment_log_start_offset(min(leader_start, ulog.high_watermark), "leader offset increment")
        elif err == ErrorCode.offset_out_of_range:
            self._handle_out_of_range(part, sent_offset, int(p.log_start_offset), int(p.high_watermark))
        elif err == ErrorCode.unknown_leader_epoch:
            self._delay(tp, LEADER_CATCH_UP_S)
        elif err in RETRY_LATER:
            self._delay(tp)
        else:
            log.warning("[ReplicaFetcher %d->%d] %s-%d: %s", self.rm.node_id, self.leader_id, tp[0], tp[1], err.name)
            self._delay(tp)

    def _truncate_on_divergence(self, part: Partition, epoch: int, end_offset: int) -> None:
        ulog = part.log
        leo = ulog.log_end_offset
        target = divergence_truncation_offset(ulog, epoch, end_offset)
        log.info(
            "[ReplicaFetcher %d->%d] %s-%d diverges from the leader at epoch %d offset %d: truncating %d -> %d",
            self.rm.node_id,
            self.leader_id,
            part.topic,
            part.partition,
            epoch,
            end_offset,
            leo,
            target,
        )
        self.rm.log_manager.truncate_to(part.tp, target)

    def _handle_out_of_range(self, part: Partition, offset: int, leader_start: int, leader_hw: int) -> None:
        ulog = part.log
        if 0 <= offset < leader_start or (leader_start > ulog.log_end_offset):
            log.info(
                "[ReplicaFetcher %d] %s-%d behind the leader's log start %d: restarting the log there",
                self.rm.node_id,
                part.topic,
                part.partition,
                leader_start,
            )
            self.rm.log_manager.truncate_fully_and_start_at(part.tp, leader_start)
        elif 0 <= leader_hw < ulog.log_end_offset:
            log.info(
                "[ReplicaFetcher %d] %s-%d ahead of the leader: truncating to its HW %d",
                self.rm.node_id,
                part.topic,
                part.partition,
                leader_hw,
            )
            self.rm.log_manager.truncate_to(part.tp, leader_hw)
        else:
            self._delay(part.tp)
