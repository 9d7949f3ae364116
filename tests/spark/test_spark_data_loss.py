"""Offsets below the log start offset (deleted by DeleteRecords, as retention would)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from spark_testlib import create_topic, delete_records, produce, unique_topic, watermarks

pytestmark = pytest.mark.spark


def _read(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("kopfka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_below_log_start(spark: Any, bootstrap: str) -> None:
    topic = create_topic(bootstrap, unique_topic("loss-batch"))
    produce(bootstrap, topic, ({"value": str(i).encode()} for i in range(100)))
    delete_records(bootstrap, topic, 0, 40)
    assert watermarks(bootstrap, topic, 0) == (40, 100)
    start = json.dumps({topic: {"0": 10}})

    with pytest.raises(Exception, match=rf"Data loss on {topic}-0: offsets 10\.\.39 were deleted"):
        _read(spark, bootstrap, subscribe=topic, startingOffsets=start).collect()

    rows = _read(spark, bootstrap, subscribe=topic, startingOffsets=start,
                 failOnDataLoss="false").collect()
    assert sorted(r.offset for r in rows) == list(range(40, 100))
    # A range entirely below the log start offset is empty when skipping ahead.
    assert _read(spark, bootstrap, subscribe=topic, startingOffsets=start, failOnDataLoss="false",
                 endingOffsets=json.dumps({topic: {"0": 20}})).count() == 0
    # "earliest" is the log start offset: not data loss.
    assert _read(spark, bootstrap, subscribe=topic).count() == 60


def test_stream_restart_after_deletion(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    topic = create_topic(bootstrap, unique_topic("loss-stream"), partitions=2)
    produce(bootstrap, topic, ({"value": f"a{i}".encode(), "partition": i % 2} for i in range(40)))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def run(fail_on_data_loss: str) -> Any:
        df = (spark.readStream.format("kopfka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("failOnDataLoss", fail_on_data_loss).load())
        q = (df.selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        try:
            q.awaitTermination(180)
        except Exception:
            pass
        return q

    q = run("true")
    assert q.exception() is None
    # 20 more per partition, then partition 1 loses everything the query has not read yet
    # plus 5 of the new records: offsets 20..24 are gone.
    produce(bootstrap, topic, ({"value": f"b{i}".encode(), "partition": i % 2} for i in range(40)))
    delete_records(bootstrap, topic, 1, 25)

    q = run("true")
    assert q.exception() is not None
    assert f"Data loss on {topic}-1: offsets 20..24 were deleted" in str(q.exception())

    q = run("false")
    assert q.exception() is None
    rows = spark.read.parquet(str(out)).collect()
    got = sorted((r.partition, r.offset) for r in rows)
    assert got == sorted([(0, o) for o in range(40)] + [(1, o) for o in range(20)]
                         + [(1, o) for o in range(25, 40)])
