"""Spark's own Kafka source (spark-sql-kafka-0-10 from Maven Central, for the installed Spark)
against kopfka: batch write and read, a streaming read that resumes from its checkpoint, and the
same query through format("kopfka") and format("kafka") giving identical rows."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from spark_testlib import consume_all, create_topic, produce, unique_topic, watermarks

pytestmark = pytest.mark.spark

COLUMNS = ("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "topic", "partition", "offset")


def _read(spark: Any, fmt: str, bootstrap: str, topic: str) -> list[tuple[Any, ...]]:
    df = (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    return sorted(tuple(r) for r in df.selectExpr(*COLUMNS).collect())


def _read_stream(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_write_and_read_match_kopfka_source(kafka_source: Any, spark_broker: Any) -> None:
    spark, bootstrap = kafka_source, spark_broker.bootstrap
    topic = create_topic(bootstrap, unique_topic("skafka"), partitions=3)
    rows = [(f"k{i}", f"v{i}") for i in range(300)]
    (
        spark.createDataFrame(rows, ["key", "value"])
        .write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .save()
    )
    plain = consume_all(bootstrap, topic, [0, 1, 2])
    assert sorted((m.key().decode(), m.value().decode()) for m in plain) == sorted(rows)

    theirs = _read(spark, "kafka", bootstrap, topic)
    ours = _read(spark, "kopfka", bootstrap, topic)
    assert theirs == ours  # same keys, values, partitions and offsets through both sources
    assert sorted((k, v) for k, v, *_ in theirs) == sorted(rows)
    assert {(p, o) for *_, p, o in theirs} == {(m.partition(), m.offset()) for m in plain}


def test_streaming_read_resumes_from_its_checkpoint(kafka_source: Any, spark_broker: Any, tmp_path: Path) -> None:
    spark, bootstrap = kafka_source, spark_broker.bootstrap
    topic = create_topic(bootstrap, unique_topic("skafka-stream"), partitions=2)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def run_once() -> None:
        df = _read_stream(spark, bootstrap, topic)
        q = (
            df.selectExpr(*COLUMNS)
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)
        assert q.exception() is None, q.exception()

    produce(bootstrap, topic, [{"value": f"a{i}".encode(), "key": b"k", "partition": i % 2} for i in range(40)])
    run_once()
    produce(bootstrap, topic, [{"value": f"b{i}".encode(), "key": b"k", "partition": i % 2} for i in range(25)])
    run_once()  # a second run from the checkpoint reads only the new records
    got = sorted(r.value for r in spark.read.parquet(str(out)).collect())
    assert got == sorted([f"a{i}" for i in range(40)] + [f"b{i}" for i in range(25)])


def test_streaming_write_topic_to_topic_survives_a_restart(
    kafka_source: Any, spark_broker: Any, tmp_path: Path
) -> None:
    """Spark's Kafka source and sink in one streaming query, topic to topic as Kafka users run
    them, with a checkpoint: records keep arriving while the query is stopped and restarted from
    its checkpoint, and the output holds every input record with its key, value, headers and
    partition. The sink is at-least-once: duplicates may come only from the batch the stop
    interrupted (rewritten on restart), never a loss or a record that was not input."""
    spark, bootstrap = kafka_source, spark_broker.bootstrap
    src = create_topic(bootstrap, unique_topic("skafka-in"), partitions=2)
    dst = create_topic(bootstrap, unique_topic("skafka-out"), partitions=2)
    n = 1200

    def record(i: int) -> dict[str, Any]:
        headers = [("seq", str(i).encode()), ("origin", b"kopfka")]
        return {"value": f"v{i}".encode(), "key": f"k{i % 17}".encode(), "partition": i % 2, "headers": headers}

    def feed(first: int, last: int) -> None:
        for lo in range(first, last, 50):
            produce(bootstrap, src, [record(i) for i in range(lo, min(lo + 50, last))])
            time.sleep(0.05)

    def start() -> Any:
        df = _read_stream(spark, bootstrap, src, includeHeaders="true", maxOffsetsPerTrigger="150")
        return (
            df.select("key", "value", "headers", "partition")
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", dst)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    def output_ends() -> dict[int, int]:
        return {p: watermarks(bootstrap, dst, p)[1] for p in (0, 1)}

    def output_count() -> int:
        return sum(output_ends().values())

    def wait_for(cond: Any, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            assert time.monotonic() < deadline, what
            time.sleep(0.2)

    feed(0, 300)
    feeders = [threading.Thread(target=feed, args=(300, 800))]  # while the first query runs
    feeders[0].start()
    try:
        q = start()
        wait_for(lambda: output_count() >= 200 or q.exception() is not None, "first output")
        assert q.exception() is None, q.exception()
        q.stop()  # while records keep arriving (and, likely, a batch is being written)
        input_at_stop = sum(watermarks(bootstrap, src, p)[1] for p in (0, 1))
        feed(800, 950)  # while the query is down
        ends_at_stop = output_ends()  # what the stopped query wrote, late sends of its last batch included
        stopped_at = sum(ends_at_stop.values())
        input_at_restart = sum(watermarks(bootstrap, src, p)[1] for p in (0, 1))
        feeders.append(threading.Thread(target=feed, args=(950, n)))  # while the restarted query runs
        feeders[1].start()
        q = start()  # from the checkpoint
        try:
            for f in feeders:
                f.join(120)
            q.processAllAvailable()  # every input record is in a committed batch
            assert output_count() >= n
        finally:
            q.stop()
    finally:
        for f in feeders:
            f.join(120)
    assert input_at_stop < input_at_restart < n, "records arrived while the query was down and after"

    out = consume_all(bootstrap, dst, [0, 1])
    got = [(m.key().decode(), m.value().decode(), tuple(m.headers() or ()), m.partition()) for m in out]
    want = {
        (r["key"].decode(), r["value"].decode(), tuple(r["headers"]), r["partition"]) for r in map(record, range(n))
    }
    assert set(got) == want, "every input record, with its key, value, headers and partition"
    duplicates = len(got) - len(want)
    copies: dict[tuple[Any, ...], list[int]] = {}
    for m, row in zip(out, got, strict=True):
        copies.setdefault(row, []).append(m.offset())
    for row, offsets in copies.items():
        if len(offsets) > 1:  # written before the restart, and again by the restarted query
            assert len(offsets) == 2 and min(offsets) < ends_at_stop[row[3]] <= max(offsets), (row, offsets)
    print(
        f"streaming write: {n} in, {len(got)} out, {duplicates} duplicates; at the stop {stopped_at} out"
        f" of {input_at_stop} in, {input_at_restart} in at the restart"
    )
    assert duplicates <= 150, "only the batch interrupted by the stop (maxOffsetsPerTrigger 150) may repeat"
