"""Batch and streaming writers: one idempotent producer per Spark task.

Each task produces its rows, flushes, and only then returns its commit message, so a task that
Spark counts as committed has every record acknowledged by the broker (acks=all). The first
delivery failure fails the task with the broker's error instead of being logged and dropped.
Like Spark's Kafka sink this is at-least-once across task retries; idempotence removes the
duplicates librdkafka's own retries would otherwise create within a task.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Message, Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from kopfka.spark.options import KopfkaOptionError, SinkOptions
from kopfka.spark.reader import HEADERS_TYPE


class KopfkaWriteError(RuntimeError):
    """A record was not acknowledged by the broker; carries the broker's error."""


@dataclass
class KopfkaCommitMessage(WriterCommitMessage):
    records: int


@dataclass(frozen=True)
class SinkLayout:
    """Which input columns feed which parts of a Kafka record (validated on the driver)."""

    topic_column: bool
    key: bool
    partition: bool
    headers: bool
    timestamp: bool


def sink_layout(schema: StructType, opts: SinkOptions) -> SinkLayout:
    """Check the input columns as Spark's Kafka sink does; extra columns are ignored."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}

    def check(name: str, ok: tuple[type[DataType], ...], what: str) -> bool:
        if name not in fields:
            return False
        dt = fields[name]
        if not isinstance(dt, ok):
            raise KopfkaOptionError(
                f"{name} attribute type must be {what}, got {dt.simpleString()}"
            )
        return True

    if not check("value", (StringType, BinaryType), "a string or binary"):
        raise KopfkaOptionError("required attribute 'value' not found in the DataFrame")
    topic_col = check("topic", (StringType,), "a string")
    if not topic_col and opts.topic is None:
        raise KopfkaOptionError(
            "topic option required when no 'topic' attribute is present; use the topic option "
            "for setting a topic"
        )
    headers = "headers" in fields
    if headers and fields["headers"].simpleString() != HEADERS_TYPE.simpleString():
        raise KopfkaOptionError(
            "headers attribute type must be array<struct<key:string,value:binary>>, got "
            f"{fields['headers'].simpleString()}"
        )
    return SinkLayout(
        topic_column=topic_col and opts.topic is None,
        key=check("key", (StringType, BinaryType), "a string or binary"),
        partition=check("partition", (IntegerType,), "an int"),
        headers=headers,
        timestamp=check("timestamp", (TimestampType, TimestampNTZType), "a timestamp"),
    )


def produce_batches(opts: SinkOptions, layout: SinkLayout,
                    batches: Iterator[pa.RecordBatch]) -> KopfkaCommitMessage:
    """Produce every row, flush, and raise the first delivery error (if any)."""
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None and len(errors) < 5:
            errors.append(f"{msg.topic()}[{msg.partition()}]: {err.str()} ({err.name()})")

    conf: dict[str, Any] = {**opts.producer_conf(), "on_delivery": on_delivery}
    producer = Producer(conf)
    count = 0

    def fail_if_errors() -> None:
        if errors:
            producer.purge()
            producer.flush(5)
            raise KopfkaWriteError(
                f"kopfka sink: delivery failed for {len(errors)}+ record(s); first: {errors[0]}"
                + "".join(f"; {e}" for e in errors[1:])
            )

    for batch in batches:
        n = batch.num_rows
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}

        def column(name: str, n: int = n, names: dict[str, int] = names,
                   batch: pa.RecordBatch = batch) -> list[Any]:
            return batch.column(names[name]).to_pylist()

        values = column("value")
        keys = column("key") if layout.key else [None] * n
        topics = column("topic") if layout.topic_column else [opts.topic] * n
        partitions = column("partition") if layout.partition else [None] * n
        headers = column("headers") if layout.headers else [None] * n
        if layout.timestamp:
            ts_col = batch.column(names["timestamp"])
            unit = ts_col.type.unit
            div = {"s": 1 / 1000, "ms": 1, "us": 1000, "ns": 1_000_000}[unit]
            raw = ts_col.cast(pa.int64()).to_pylist()
            timestamps = [0 if t is None else int(t // div) for t in raw]
        else:
            timestamps = [0] * n
        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise KopfkaWriteError(
                    "null topic present in the data; use the topic option for setting a topic"
                )
            h = headers[i]
            kwargs: dict[str, Any] = {"key": keys[i]}
            if h:
                kwargs["headers"] = [(x["key"], x["value"]) for x in h]
            if partitions[i] is not None:
                kwargs["partition"] = partitions[i]
            if timestamps[i]:
                kwargs["timestamp"] = timestamps[i]
            while True:
                try:
                    producer.produce(topic, values[i], **kwargs)
                    break
                except BufferError:  # local queue full: let deliveries drain
                    producer.poll(0.05)
            count += 1
        producer.poll(0)
        fail_if_errors()
    remaining = producer.flush(120)
    fail_if_errors()
    if remaining:
        raise KopfkaWriteError(f"kopfka sink: {remaining} record(s) not acknowledged within 120 s")
    return KopfkaCommitMessage(records=count)


class KopfkaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("kopfka")``: append-only, like Spark's Kafka sink."""

    def __init__(self, opts: SinkOptions, layout: SinkLayout) -> None:
        self.opts = opts
        self.layout = layout

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_batches(self.opts, self.layout, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records are already acknowledged per task; Kafka has no job-level commit."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Acknowledged records cannot be taken back (same as Spark's Kafka sink)."""


class KopfkaStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("kopfka")``: at-least-once per micro-batch."""

    def __init__(self, opts: SinkOptions, layout: SinkLayout) -> None:
        self.opts = opts
        self.layout = layout

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_batches(self.opts, self.layout, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to finalise: every task flushed before reporting success."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Acknowledged records stay; Spark re-runs the batch (at-least-once)."""
