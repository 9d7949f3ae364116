"""Spark's own Kafka source (spark-sql-kafka-0-10 from Maven Central, for the installed Spark)
against kopfka: batch write and read, a streaming read that resumes from its checkpoint, and the
same query through format("kopfka") and format("kafka") giving identical rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_testlib import consume_all, create_topic, produce, unique_topic

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
        df = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
        )
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
