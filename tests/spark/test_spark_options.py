"""Option validation (before any task runs), offset planning, and the executor read path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kopfka.spark.offsets import OffsetRange, rate_limit, split_ranges
from kopfka.spark.options import KopfkaOptionError, parse_options
from spark_testlib import create_topic, delete_records, produce, unique_topic

pytestmark = pytest.mark.spark

BS = {"kafka.bootstrap.servers": "127.0.0.1:9"}


@pytest.mark.parametrize(("options", "mode", "message"), [
    ({"subscribe": "t", "assign": '{"t":[0]}'}, "batch",
     "exactly one of subscribe, subscribePattern or assign"),
    ({}, "batch", "exactly one of subscribe, subscribePattern or assign must be set .got none"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":1}'}, "batch",
     "startingOffsets is not valid JSON"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"x":1}}'}, "batch", "'x' is not a partition"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":-5}}'}, "batch", "-2 for earliest"),
    ({"subscribe": "t", "startingOffsets": "newest"}, "batch", "must be 'earliest', 'latest'"),
    ({"subscribe": "t", "startingOffsets": "latest"}, "batch", "can't be latest"),
    ({"subscribe": "t", "endingOffsets": "earliest"}, "batch", "can't be earliest"),
    ({"subscribe": "t", "endingOffsets": "latest"}, "stream", "not valid in streaming"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "0"}, "stream", "must be positive"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "10"}, "batch", "only applies to streaming"),
    ({"subscribe": "t", "failOnDataLoss": "yes"}, "batch", "must be true or false"),
    ({"assign": '{"t":["0"]}'}, "batch", "list of partition numbers"),
    ({"assign": '{"t":[0]}', "startingOffsets": '{"u":{"0":1}}'}, "batch", "not assigned: u-0"),
    ({"subscribePattern": "t[", "startingOffsets": "earliest"}, "stream", "not a valid regex"),
    ({"subscribe": "t", "topic": "t"}, "batch", "only applies to writes"),
])
def test_invalid_source_options(options: dict[str, str], mode: Any, message: str) -> None:
    with pytest.raises(KopfkaOptionError, match=message):
        parse_options({**BS, **options}).source(mode)


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "t", "subscibe": "t"}, "unknown option.*subscibe"),
    ({"subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "use startingOffsets"),
    ({"subscribe": "t", "minOffsetsPerTrigger": "5"}, "not supported"),
    ({"subscribe": "t", "kafka.bootstrap.servers": " "}, "kafka.bootstrap.servers is required"),
])
def test_invalid_options_any_mode(options: dict[str, str], message: str) -> None:
    with pytest.raises(KopfkaOptionError, match=message):
        parse_options({**BS, **options})


def test_valid_options_are_case_insensitive_and_pass_kafka_options_through() -> None:
    opts = parse_options({**BS, "SUBSCRIBE": "a, b", "StartingOffsets": '{"a":{"0":-2}}',
                          "kafka.client.id": "me", "includeHeaders": "TRUE"}).source("stream")
    assert opts.subscription.topics == ("a", "b")
    assert opts.starting.per_partition == {("a", 0): -2}
    assert opts.include_headers
    conf = opts.consumer_conf()
    assert conf["client.id"] == "me" and conf["enable.auto.commit"] is False
    assert conf["auto.offset.reset"] == "error"
    sink = parse_options({**BS, "topic": "x", "kafka.linger.ms": "50"}).sink()
    assert sink.producer_conf()["enable.idempotence"] is True
    assert sink.producer_conf()["linger.ms"] == "50"
    with pytest.raises(KopfkaOptionError, match="only apply to reads"):
        parse_options({**BS, "topic": "x", "subscribe": "x"}).sink()


def test_split_and_rate_limit() -> None:
    r = OffsetRange("t", 0, 0, 10)
    assert [(p.start, p.end) for p in split_ranges([r], max_records=4)] == [(0, 4), (4, 7), (7, 10)]
    pieces = split_ranges([r, OffsetRange("t", 1, 5, 7)], min_partitions=6)
    assert sum(p.size for p in pieces) == 12 and len(pieces) >= 6
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 10}
    latest = {("t", 0): 40, ("t", 1): 30, ("t", 2): 40}
    end = rate_limit(start, latest, 30)
    assert sum(end[tp] - start[tp] for tp in start) == 30
    assert rate_limit(start, latest, 1000) == latest


def _df_error(fn: Any) -> str:
    with pytest.raises(Exception) as info:
        fn()
    return str(info.value)


def test_spark_reports_option_errors_before_the_query_starts(
        spark: Any, bootstrap: str, tmp_path: Path) -> None:
    def reader() -> Any:
        return spark.read.format("kopfka").option("kafka.bootstrap.servers", bootstrap)

    # Raised by load(), i.e. while the query is defined.
    msg = _df_error(lambda: reader().option("subscribe", "a").option("assign", '{"a":[0]}').load())
    assert "exactly one of subscribe, subscribePattern or assign" in msg
    msg = _df_error(lambda: reader().option("subscribe", "a").option("startingOfsets", "x").load())
    assert "unknown option(s) startingofsets" in msg
    msg = _df_error(lambda: reader().option("subscribe", "a")
                    .option("startingOffsets", "{not json").load().collect())
    assert "startingOffsets is not valid JSON" in msg
    msg = _df_error(lambda: reader().option("subscribe", "a").schema("value string").load()
                    .collect())
    assert "fixed schema" in msg
    # Sink: no topic column and no topic option.
    msg = _df_error(lambda: spark.createDataFrame([("v",)], "value string").write
                    .format("kopfka").mode("append")
                    .option("kafka.bootstrap.servers", bootstrap).save())
    assert "topic option required" in msg
    # A streaming query with an ending offset fails at start, naming the option.
    q = (spark.readStream.format("kopfka").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", "a").option("endingOffsets", "latest").load()
         .writeStream.format("parquet").option("path", str(tmp_path / "o"))
         .option("checkpointLocation", str(tmp_path / "c")))
    msg = _df_error(lambda: q.start().awaitTermination(60))
    assert "endingOffsets is not valid in streaming queries" in msg


def test_executor_read_handles_deletion_after_planning(bootstrap: str) -> None:
    """The task itself re-checks: records deleted between planning and reading."""
    from kopfka.spark.metadata import KopfkaDataLossError
    from kopfka.spark.reader import KafkaInputPartition, read_partition

    topic = create_topic(bootstrap, unique_topic("loss-exec"))
    produce(bootstrap, topic, ({"value": str(i).encode()} for i in range(50)))
    delete_records(bootstrap, topic, 0, 30)
    opts = parse_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}).source("batch")

    def part(fail: bool) -> KafkaInputPartition:
        return KafkaInputPartition(topic, 0, 5, 45, opts.consumer_conf(), False, fail, 30_000)

    with pytest.raises(KopfkaDataLossError, match=rf"{topic}-0: offsets 5\.\.29 were deleted"):
        list(read_partition(part(True)))
    batches = list(read_partition(part(False)))
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets == list(range(30, 45))
    assert json.loads(json.dumps(batches[0].schema.names))[:2] == ["key", "value"]
