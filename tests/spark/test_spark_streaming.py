"""Streaming reads: availableNow + maxOffsetsPerTrigger, checkpoint restarts, new partitions."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from spark_testlib import create_topic, produce, unique_topic

pytestmark = pytest.mark.spark


def _stream(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.readStream.format("kopfka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _to_parquet(df: Any, out: Path, checkpoint: Path) -> Any:
    return (df.selectExpr("CAST(value AS STRING) AS value", "topic", "partition", "offset")
            .writeStream.format("parquet").option("path", str(out))
            .option("checkpointLocation", str(checkpoint)))


def _batch_sizes(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_available_now_with_max_offsets_per_trigger_and_new_partitions(
        spark: Any, bootstrap: str, tmp_path: Path) -> None:
    topic = create_topic(bootstrap, unique_topic("micro"), partitions=3)
    # 40 / 30 / 30 records: limit 30 per trigger -> 30, 30, 30, 10.
    produce(bootstrap, topic, ({"value": f"a{p}-{i}".encode(), "partition": p}
                               for p, n in ((0, 40), (1, 30), (2, 30)) for i in range(n)))
    df = _stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                 maxOffsetsPerTrigger="30")
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    q = _to_parquet(df, out, ckpt).trigger(availableNow=True).start()
    assert q.awaitTermination(180)
    assert q.exception() is None
    assert _batch_sizes(q) == [30, 30, 30, 10]
    assert spark.read.parquet(str(out)).count() == 100

    # Two new partitions and more data; the restarted query picks them up from earliest.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_partitions([NewPartitions(topic, 5)]).values():
        fut.result(30)
    time.sleep(1)
    produce(bootstrap, topic, ({"value": f"b{p}-{i}".encode(), "partition": p}
                               for p in range(5) for i in range(4)))
    q = _to_parquet(df, out, ckpt).trigger(availableNow=True).start()
    assert q.awaitTermination(180)
    assert q.exception() is None
    assert _batch_sizes(q) == [20]
    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == 120
    assert {r.partition for r in rows if r.value.startswith("b")} == {0, 1, 2, 3, 4}


def test_restart_from_checkpoint_while_producing_is_exactly_once(
        spark: Any, bootstrap: str, tmp_path: Path) -> None:
    topic = create_topic(bootstrap, unique_topic("restart"), partitions=2)
    total = 1500
    produced = threading.Event()
    errors: list[BaseException] = []

    def producer() -> None:
        try:
            for chunk in range(0, total, 50):
                produce(bootstrap, topic, ({"value": str(i).encode(), "key": str(i).encode()}
                                           for i in range(chunk, chunk + 50)))
                time.sleep(0.15)
        except BaseException as e:  # surfaced by the assertion below
            errors.append(e)
        finally:
            produced.set()

    thread = threading.Thread(target=producer, daemon=True)
    thread.start()
    df = _stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                 maxOffsetsPerTrigger="200")
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    # First run: stop while records keep arriving (possibly mid-batch).
    q = _to_parquet(df, out, ckpt).trigger(processingTime="200 milliseconds").start()
    deadline = time.monotonic() + 120
    while (q.lastProgress is None or q.lastProgress["batchId"] < 2) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert q.exception() is None
    q.stop()
    assert not produced.is_set(), "producer finished before the restart: make it slower"

    # Second run from the same checkpoint, still while producing.
    q = _to_parquet(df, out, ckpt).trigger(processingTime="200 milliseconds").start()
    thread.join(120)
    assert not errors, errors
    q.processAllAvailable()
    q.stop()
    assert q.exception() is None

    values = [int(r.value) for r in spark.read.parquet(str(out)).select("value").collect()]
    assert len(values) == total, f"{len(values)} rows for {total} records"
    assert sorted(values) == list(range(total))


def test_stream_topic_to_topic(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    """Streaming write: every record of the source topic lands in the target, with its key."""
    from spark_testlib import consume_all

    src = create_topic(bootstrap, unique_topic("s2t-in"), partitions=2)
    dst = create_topic(bootstrap, unique_topic("s2t-out"), partitions=3)
    produce(bootstrap, src, ({"value": f"v{i}".encode(), "key": f"k{i}".encode(),
                              "headers": [("n", str(i).encode())]} for i in range(120)))
    q = (_stream(spark, bootstrap, subscribe=src, startingOffsets="earliest",
                 includeHeaders="true", maxOffsetsPerTrigger="50")
         .selectExpr("key", "upper(CAST(value AS STRING)) AS value", "headers")
         .writeStream.format("kopfka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", dst).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(180)
    assert q.exception() is None
    out = consume_all(bootstrap, dst, [0, 1, 2])
    assert sorted((m.key(), m.value(), tuple(m.headers() or ())) for m in out) == sorted(
        (f"k{i}".encode(), f"V{i}".encode(), (("n", str(i).encode()),)) for i in range(120))
