"""Batch and streaming readers.

The driver plans per-partition offset ranges from ListOffsets; each Spark task reads one range
with its own consumer (assign + seek, no consumer group, no commits), stopping at the range's
end offset, and hands Spark Arrow record batches (no per-row conversion in Spark's worker).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as KafkaTP
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kopfka.spark.metadata import BrokerMetadata, KopfkaDataLossError, data_loss_message
from kopfka.spark.offsets import (
    OffsetRange,
    PartitionOffsets,
    from_json,
    ranges_between,
    rate_limit,
    split_ranges,
    to_json,
)
from kopfka.spark.options import SourceOptions

log = logging.getLogger(__name__)

# Without maxRecordsPerPartition, a range is still split into pieces of at most this many
# records, so one busy Kafka partition does not become one straggler Spark task.
DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000
ARROW_BATCH_ROWS = 8192
CONSUME_BATCH = 4096

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def kafka_schema(include_headers: bool) -> StructType:
    """The output schema of Spark's Kafka source (built without a SparkContext: executors)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


@cache
def _arrow_schema(include_headers: bool) -> pa.Schema:
    # Spark checks returned batches for exact equality with its own Arrow mapping; use it.
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(kafka_schema(include_headers), timezone="UTC")


@dataclass
class KafkaInputPartition(InputPartition):
    """One Spark task's work: offsets [start, end) of one topic partition. Must pickle."""

    topic: str
    partition: int
    start: int
    end: int
    consumer_conf: dict[str, Any]
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int


def plan_partitions(opts: SourceOptions, ranges: Sequence[OffsetRange]
                    ) -> list[KafkaInputPartition]:
    pieces = split_ranges(
        ranges,
        min_partitions=opts.min_partitions,
        max_records=opts.max_records_per_partition or DEFAULT_MAX_RECORDS_PER_PARTITION,
    )
    conf = opts.consumer_conf()
    return [
        KafkaInputPartition(r.topic, r.partition, r.start, r.end, conf, opts.include_headers,
                            opts.fail_on_data_loss, opts.poll_timeout_ms)
        for r in pieces
    ]


def check_data_loss(opts: SourceOptions, start: PartitionOffsets, log_start: PartitionOffsets,
                    log_end: PartitionOffsets | None = None) -> PartitionOffsets:
    """Starting offsets that exist: fail on deleted ones, or skip ahead (failOnDataLoss=false)."""
    out = dict(start)
    for tp, off in start.items():
        low = log_start.get(tp)
        if low is not None and off < low:
            if opts.fail_on_data_loss:
                raise KopfkaDataLossError(data_loss_message(tp[0], tp[1], off, low))
            log.warning("skipping deleted offsets %d..%d of %s-%d", off, low - 1, *tp)
            out[tp] = low
        high = None if log_end is None else log_end.get(tp)
        if high is not None and off > high:
            msg = (f"{tp[0]}-{tp[1]}: offset {off} is beyond the log end offset {high} (the "
                   "partition was truncated or the topic re-created)")
            if opts.fail_on_data_loss:
                raise KopfkaDataLossError(msg + "; set failOnDataLoss=false to restart from the "
                                          "log start offset")
            log.warning("%s; restarting from the log start offset", msg)
            out[tp] = low if low is not None else 0
    return out


def read_partition(p: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
    """Read [start, end) of one partition as Arrow batches in the Kafka source schema."""
    schema = _arrow_schema(p.include_headers)
    consumer = Consumer(p.consumer_conf)
    topic, part = p.topic, p.partition
    pos = p.start
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    offsets: list[int] = []
    timestamps: list[int | None] = []
    ts_types: list[int] = []
    headers: list[list[dict[str, Any]] | None] = []

    def flush() -> pa.RecordBatch:
        n = len(offsets)
        cols = [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array([topic] * n, pa.string()),
            pa.array([part] * n, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array(timestamps, pa.int64()).cast(schema.field("timestamp").type),
            pa.array(ts_types, pa.int32()),
        ]
        if p.include_headers:
            cols.append(pa.array(headers, schema.field("headers").type))
        for buf in (keys, values, offsets, timestamps, ts_types, headers):
            buf.clear()
        return pa.RecordBatch.from_arrays(cols, schema=schema)

    def watermarks() -> tuple[int, int]:
        low, high = consumer.get_watermark_offsets(KafkaTP(topic, part), timeout=10, cached=False)
        return int(low), int(high)

    try:
        consumer.assign([KafkaTP(topic, part, pos)])
        last_progress = time.monotonic()
        while pos < p.end:
            msgs = consumer.consume(num_messages=CONSUME_BATCH, timeout=1.0)
            if not msgs:
                if (time.monotonic() - last_progress) * 1000 > p.poll_timeout_ms:
                    raise TimeoutError(
                        f"no records from {topic}-{part} at offset {pos} within "
                        f"{p.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs); range ends at "
                        f"{p.end}"
                    )
                continue
            last_progress = time.monotonic()
            for m in msgs:
                err = m.error()
                if err is not None:
                    pos = _handle_error(p, consumer, err, m.offset() or 0, pos, watermarks)
                    if pos >= p.end:
                        break
                    continue
                off: int = m.offset()  # type: ignore[assignment]  # set on data messages
                if off < pos:
                    continue  # re-delivered after a re-seek
                if off >= p.end:
                    pos = p.end
                    break
                keys.append(m.key())
                values.append(m.value())
                offsets.append(off)
                ts_type, ts = m.timestamp()
                # librdkafka: 0 none, 1 CreateTime, 2 LogAppendTime; Kafka/Spark: -1, 0, 1.
                ts_types.append(ts_type - 1)
                timestamps.append(ts * 1000 if ts_type else None)
                if p.include_headers:
                    h: Any = m.headers()
                    headers.append([{"key": k, "value": v} for k, v in h] if h else None)
                pos = off + 1
            if len(offsets) >= ARROW_BATCH_ROWS:
                yield flush()
        if offsets:
            yield flush()
    finally:
        consumer.close()


def _handle_error(p: KafkaInputPartition, consumer: Consumer, err: KafkaError, at: int, pos: int,
                  watermarks: Any) -> int:
    """React to a consume error; returns the next offset to read (>= p.end means done)."""
    code = err.code()
    tp = (p.topic, p.partition)
    if code == KafkaError._PARTITION_EOF:
        if at >= p.end:
            return p.end  # the range's tail holds no data records (control batches, compaction)
        low, high = watermarks()
        if high >= p.end:
            return pos  # stale EOF; more data arrived
        msg = (f"{tp[0]}-{tp[1]}: the log ends at offset {high} but the query needed offsets up to "
               f"{p.end - 1} (the partition was truncated or the topic re-created)")
        if p.fail_on_data_loss:
            raise KopfkaDataLossError(msg + "; set failOnDataLoss=false to ignore")
        log.warning("%s; skipping", msg)
        return p.end
    if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        low, high = watermarks()
        if pos < low:
            if p.fail_on_data_loss:
                raise KopfkaDataLossError(data_loss_message(tp[0], tp[1], pos, low))
            log.warning("skipping deleted offsets %d..%d of %s-%d", pos, low - 1, *tp)
            pos = low
        elif pos > high:
            msg = f"{tp[0]}-{tp[1]}: offset {pos} is beyond the log end offset {high}"
            if p.fail_on_data_loss:
                raise KopfkaDataLossError(msg + "; set failOnDataLoss=false to ignore")
            return p.end
        if pos < p.end:
            consumer.assign([KafkaTP(tp[0], tp[1], pos)])
        return pos
    if err.fatal() or code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION,
                               KafkaError._UNKNOWN_TOPIC, KafkaError.TOPIC_AUTHORIZATION_FAILED):
        raise RuntimeError(f"reading {tp[0]}-{tp[1]} at offset {pos}: {err.str()} ({err.name()})")
    log.warning("transient error reading %s-%d at %d: %s", tp[0], tp[1], pos, err.str())
    return pos


class KopfkaBatchReader(DataSourceReader):
    """Batch read: startingOffsets..endingOffsets resolved once, at planning."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        meta = BrokerMetadata(self.opts)
        tps = meta.partitions()
        if not tps:
            return []
        start = meta.resolve(self.opts.starting, tps, role="starting")
        end = meta.resolve(self.opts.ending, tps, role="ending")
        backwards = [f"{t}-{p} ({start[(t, p)]} > {end[(t, p)]})" for t, p in tps
                     if start[(t, p)] > end[(t, p)]]
        if backwards:
            raise ValueError(f"starting offset is after ending offset for {', '.join(backwards)}")
        start = check_data_loss(self.opts, start, meta.list_offsets(tps, "earliest"))
        return plan_partitions(self.opts, ranges_between(start, end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        if not isinstance(partition, KafkaInputPartition):
            return iter(())  # Spark runs one placeholder task when planning found nothing
        return read_partition(partition)


class KopfkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch read: offsets per partition in the checkpoint, limits per trigger.

    Offsets use Spark's Kafka checkpoint shape, ``{"topic": {"0": 42}}``. Partitions that
    appear later (new topics matching the subscription, added partitions) start from earliest.
    """

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._meta: BrokerMetadata | None = None
        self._target: PartitionOffsets | None = None  # availableNow: never read past this
        self._latest: PartitionOffsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles the reader to executors; the AdminClient must stay on the driver.
        return {**self.__dict__, "_meta": None}

    @property
    def meta(self) -> BrokerMetadata:
        if self._meta is None:
            self._meta = BrokerMetadata(self.opts)
        return self._meta

    def initialOffset(self) -> dict:
        tps = self.meta.partitions()
        start = self.meta.resolve(self.opts.starting, tps, role="starting")
        return to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.meta.partitions()
        self._target = self.meta.list_offsets(tps, "latest")

    def _current(self, start: PartitionOffsets) -> tuple[PartitionOffsets, PartitionOffsets]:
        """(begin, latest) per partition: begin checked against the log start offset."""
        tps = set(self.meta.partitions())
        gone = sorted(tp for tp in start if tp not in tps)
        if gone and self.opts.fail_on_data_loss:
            raise KopfkaDataLossError(
                f"partitions {', '.join(f'{t}-{p}' for t, p in gone)} no longer exist (topic "
                "deleted?); set failOnDataLoss=false to ignore"
            )
        if self._target is not None:
            tps = {tp for tp in tps if tp in self._target}
        tps_l = sorted(tps)
        log_end = self.meta.list_offsets(tps_l, "latest")
        earliest = self.meta.list_offsets(tps_l, "earliest")
        self._latest = log_end
        latest = log_end
        if self._target is not None:
            latest = {tp: min(off, self._target[tp]) for tp, off in log_end.items()}
        begin = {tp: start.get(tp, earliest[tp]) for tp in tps_l}
        begin = check_data_loss(self.opts, begin, earliest, log_end)
        return begin, latest

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:  # type: ignore[override]
        prev = from_json(start)
        begin, latest = self._current(prev)
        latest = {tp: max(latest[tp], begin[tp]) for tp in latest}
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, latest, limit.max_rows)
        else:
            end = latest
        # A partition that vanished (failOnDataLoss=false) is dropped from the offsets.
        return to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        s, e = from_json(start), from_json(end)
        new = [tp for tp in e if tp not in s]
        if new:
            s.update(self.meta.list_offsets(new, "earliest"))
        in_range = {tp: s[tp] for tp in e}
        earliest = self.meta.list_offsets(list(e), "earliest")
        in_range = check_data_loss(self.opts, in_range, earliest)
        return plan_partitions(self.opts, ranges_between(in_range, e))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        if not isinstance(partition, KafkaInputPartition):
            return iter(())  # Spark runs one placeholder task when planning found nothing
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, not in a consumer group."""

    def stop(self) -> None:
        self._meta = None

