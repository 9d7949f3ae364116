"""Batch write and read through format("kopfka") against a real `kopfka serve`."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from spark_testlib import consume_all, create_topic, produce, unique_topic

pytestmark = pytest.mark.spark


def _source(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("kopfka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_write_then_read_round_trips_keys_headers_timestamps(spark: Any, bootstrap: str
                                                                   ) -> None:
    from pyspark.sql import Row
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    # the records carry 2024 timestamps: without retention.ms=-1 the shared broker's first
    # retention check (5 min after its start) deletes them, as Kafka's would
    topic = create_topic(bootstrap, unique_topic("roundtrip"), partitions=3, config={"retention.ms": "-1"})
    base = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC)
    header_t = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))
    schema = StructType([
        StructField("key", BinaryType()), StructField("value", BinaryType()),
        StructField("partition", IntegerType()), StructField("headers", header_t),
        StructField("timestamp", TimestampType()),
    ])
    rows = []
    for i in range(300):
        rows.append(Row(
            key=None if i % 10 == 0 else f"k{i}".encode(),
            value=b"\x00\xff" + i.to_bytes(4, "big") + b"x" * (i % 7),
            partition=i % 3,
            headers=None if i % 4 == 0 else [Row(key="i", value=str(i).encode()),
                                              Row(key="dup", value=None),
                                              Row(key="dup", value=b"2")],
            timestamp=base + dt.timedelta(milliseconds=i * 37),
        ))
    df = spark.createDataFrame(rows, schema).repartition(4)
    df.write.format("kopfka").mode("append").option("kafka.bootstrap.servers", bootstrap) \
        .option("topic", topic).save()

    out = _source(spark, bootstrap, subscribe=topic, includeHeaders="true").collect()
    assert len(out) == 300
    got = {}
    for r in out:
        got[(r.partition, bytes(r.value))] = r
        assert r.topic == topic and r.timestampType == 0
    for i, src in enumerate(rows):
        r = got[(src.partition, src.value)]
        assert (bytes(r.key) if r.key is not None else None) == src.key
        expected_headers = None if src.headers is None else [
            ("i", str(i).encode()), ("dup", None), ("dup", b"2")]
        actual_headers = None if r.headers is None else [
            (h.key, bytes(h.value) if h.value is not None else None) for h in r.headers]
        assert actual_headers == expected_headers
        # Spark returns session-local naive datetimes; compare epoch millis.
        assert int(r.timestamp.timestamp() * 1000) == int(src.timestamp.timestamp() * 1000)
    # Offsets are dense per partition and agree with a plain consumer.
    ref = consume_all(bootstrap, topic, [0, 1, 2])
    assert sorted((m.partition(), m.offset(), m.value()) for m in ref) == sorted(
        (r.partition, r.offset, bytes(r.value)) for r in out)
    # Without includeHeaders the schema is Spark's 7 Kafka columns.
    assert _source(spark, bootstrap, subscribe=topic).columns == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def test_offsets_json_assign_and_split_ranges(spark: Any, bootstrap: str) -> None:
    topic = create_topic(bootstrap, unique_topic("ranges"), partitions=2)
    produce(bootstrap, topic, ({"value": f"{p}-{i}".encode(), "partition": p}
                               for p in (0, 1) for i in range(50)))
    df = _source(spark, bootstrap, assign=json.dumps({topic: [0, 1]}),
                 startingOffsets=json.dumps({topic: {"0": 10, "1": -2}}),
                 endingOffsets=json.dumps({topic: {"0": 20, "1": -1}}),
                 maxRecordsPerPartition="7")
    # [10,20) of p0 -> 2 pieces; [0,50) of p1 -> 8 pieces of at most 7 records.
    assert df.rdd.getNumPartitions() == 10
    got = sorted((r.partition, r.offset) for r in df.collect())
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(50)]
    by_ts = _source(spark, bootstrap, subscribe=topic, startingTimestamp="0").count()
    assert by_ts == 100


def test_sink_delivery_failure_fails_task_with_broker_error(spark: Any, bootstrap: str) -> None:
    topic = create_topic(bootstrap, unique_topic("toolarge"), config={"max.message.bytes": "2000"})
    df = spark.createDataFrame([("x" * 50_000,)], "value string")
    with pytest.raises(Exception, match=r"(?s)delivery failed.*MSG_SIZE_TOO_LARGE"):
        df.write.format("kopfka").mode("append").option("kafka.bootstrap.servers", bootstrap) \
            .option("topic", topic).save()


def test_subscribe_pattern(spark: Any, bootstrap: str) -> None:
    stem = unique_topic("pat")
    a, b = create_topic(bootstrap, f"{stem}-a"), create_topic(bootstrap, f"{stem}-b")
    other = create_topic(bootstrap, f"x{stem}-c")
    for t in (a, b, other):
        produce(bootstrap, t, ({"value": t.encode()} for _ in range(3)))
    rows = _source(spark, bootstrap, subscribePattern=f"{stem}-.*",
                   **{"fetchOffset.numRetries": "0"}).collect()
    assert sorted(r.topic for r in rows) == [a] * 3 + [b] * 3
