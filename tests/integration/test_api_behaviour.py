"""API behaviour real clients rely on, against a real `kopfka serve`.

ListOffsets (earliest / latest / by timestamp / max timestamp) through confluent-kafka and
kafka-python; Fetch long-poll wake-up, KIP-74 (a batch larger than the partition limit is still
returned), OFFSET_OUT_OF_RANGE and auto.offset.reset; topic admin errors (CreateTopics,
DeleteTopics, CreatePartitions); DescribeConfigs sources and synonyms, IncrementalAlterConfigs;
MESSAGE_TOO_LARGE; UNKNOWN_TOPIC_OR_PARTITION with auto topic creation off.
"""

from __future__ import annotations

import io
import socket
import struct
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32
from kopfka_process import KopfkaProcess

# Kafka error codes
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40

SEGMENT_BYTES = 4 * 1024 * 1024  # a static broker override, visible as a topic-config synonym
NOW = (int(time.time() * 1000) // 1000) * 1000 - 10 * 60 * 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KopfkaProcess]:
    proc = KopfkaProcess(
        tmp_path_factory.mktemp("api") / "data",
        overrides={"num.partitions": "1", "log.segment.bytes": str(SEGMENT_BYTES)},
    ).start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture(scope="module")
def admin(broker: KopfkaProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(admin: AdminClient, name: str, partitions: int = 1, **config: str) -> None:
    admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(30)


def error_code(fut: object) -> int:
    """The Kafka error code a confluent admin future failed with (0: it succeeded)."""
    try:
        fut.result(30)  # type: ignore[attr-defined]
    except KafkaException as e:
        return int(e.args[0].code())
    return 0


def produce_each(bootstrap: str, topic: str, items: list[tuple[bytes, int]], partition: int = 0) -> list[int]:
    """One record per batch (flush after each): offsets returned."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    offsets: list[int] = []
    for value, ts in items:
        p.produce(
            topic,
            value,
            partition=partition,
            timestamp=ts,
            on_delivery=lambda err, msg: offsets.append(-1 if err else msg.offset()),
        )
        assert p.flush(30) == 0
    return offsets


def consumer(bootstrap: str, **conf: object) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "api-unused", "enable.auto.commit": False, **conf})


def first_records(bootstrap: str, topic: str, partition: int = 0, **conf: object) -> list[tuple[int, bytes]]:
    """(offset, value) of the first records a consumer gets from the start of the partition."""
    c = consumer(bootstrap, **conf)
    try:
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        msgs: list = []
        deadline = time.monotonic() + 10
        while not msgs and time.monotonic() < deadline:
            msgs = c.consume(10, 0.5)
        return [(m.offset(), m.value()) for m in msgs]
    finally:
        c.close()


# ---------------------------------------------------------------- ListOffsets


TS = [NOW + 100 * i for i in range(10)]
TS[6] = NOW + 50_000  # the max timestamp sits in the middle of the log


@pytest.fixture(scope="module")
def timed_topic(broker: KopfkaProcess, admin: AdminClient) -> str:
    create(admin, "timed")
    assert produce_each(broker.bootstrap, "timed", [(b"v%d" % i, t) for i, t in enumerate(TS)]) == list(range(10))
    return "timed"


def first_at_or_after(q: int) -> int:
    return next((i for i, t in enumerate(TS) if t >= q), -1)


QUERIES = [
    NOW - 1,
    NOW,
    NOW + 1,
    NOW + 250,
    NOW + 500,
    NOW + 501,
    NOW + 899,
    NOW + 900,
    NOW + 901,
    NOW + 50_000,
    NOW + 50_001,
]


@pytest.mark.timeout(60)
def test_list_offsets_confluent(broker: KopfkaProcess, admin: AdminClient, timed_topic: str) -> None:
    tp = TopicPartition(timed_topic, 0)
    c = consumer(broker.bootstrap)
    try:
        assert c.get_watermark_offsets(tp, timeout=10) == (0, 10)
        for q in QUERIES:
            (r,) = c.offsets_for_times([TopicPartition(timed_topic, 0, q)], timeout=10)
            assert r.error is None
            assert r.offset == first_at_or_after(q), f"offsets_for_times({q - NOW:+})"
    finally:
        c.close()
    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "max": OffsetSpec.max_timestamp(),
        "ts": OffsetSpec.for_timestamp(NOW + 250),
    }
    got = {k: admin.list_offsets({tp: spec})[tp].result(30) for k, spec in specs.items()}
    assert got["earliest"].offset == 0
    assert got["latest"].offset == 10
    assert (got["max"].offset, got["max"].timestamp) == (6, NOW + 50_000)
    assert (got["ts"].offset, got["ts"].timestamp) == (3, TS[3])


@pytest.mark.timeout(60)
def test_list_offsets_kafka_python(broker: KopfkaProcess, timed_topic: str) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tp = KTP(timed_topic, 0)
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 10}
        for q in QUERIES:
            r = c.offsets_for_times({tp: q})[tp]
            exp = first_at_or_after(q)
            if exp < 0:
                assert r is None, f"offsets_for_times({q - NOW:+}) = {r}"
            else:
                assert r is not None and (r.offset, r.timestamp) == (exp, TS[exp]), f"offsets_for_times({q - NOW:+})"
    finally:
        c.close()


# ---------------------------------------------------------------- Fetch


@pytest.mark.timeout(60)
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_fetch_long_poll_wakes_on_new_data(client: str, broker: KopfkaProcess, admin: AdminClient) -> None:
    """A consumer blocked in a long poll (max wait 10 s) gets a record produced 1 s later at once."""
    topic = f"longpoll-{client}"
    create(admin, topic)
    produced_at: list[float] = []

    def produce_later() -> None:
        time.sleep(1.0)
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        p.produce(topic, b"wake", partition=0)
        assert p.flush(10) == 0
        produced_at.append(time.monotonic())

    if client == "confluent":
        c = consumer(broker.bootstrap, **{"fetch.wait.max.ms": 10_000, "fetch.min.bytes": 1})
        c.assign([TopicPartition(topic, 0, 0)])
        c.consume(1, 0.5)  # connected and fetching
        t = threading.Thread(target=produce_later)
        t0 = time.monotonic()
        t.start()
        msgs = c.consume(1, 8.0)
        got_at = time.monotonic()
        c.close()
        assert msgs and msgs[0].error() is None and msgs[0].value() == b"wake"
    else:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        kc = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=10_000,
            fetch_min_bytes=1,
            request_timeout_ms=30_000,
        )
        kc.assign([KTP(topic, 0)])
        kc.seek(KTP(topic, 0), 0)
        kc.poll(timeout_ms=500)
        t = threading.Thread(target=produce_later)
        t0 = time.monotonic()
        t.start()
        recs: list = []
        while not recs and time.monotonic() - t0 < 8:
            for batch in kc.poll(timeout_ms=200).values():
                recs.extend(batch)
        got_at = time.monotonic()
        kc.close()
        assert recs and recs[0].value == b"wake"
    t.join(10)
    assert produced_at
    delay = got_at - produced_at[0]
    print(
        f"\n[long-poll {client}] record arrived {delay * 1000:.0f} ms after its ack, "
        f"{got_at - t0:.2f} s after the poll began"
    )
    assert got_at - t0 < 3.0, "the long poll did not return when data arrived"
    assert delay < 1.0


@pytest.mark.timeout(60)
def test_fetch_returns_batch_larger_than_partition_limit(broker: KopfkaProcess, admin: AdminClient) -> None:
    """KIP-74: the first batch is returned even if larger than max.partition.fetch.bytes and
    fetch.max.bytes, so consumers always make progress."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    create(admin, "kip74")
    big = bytes(range(256)) * 800  # 200 KiB, incompressible enough not to matter
    assert produce_each(broker.bootstrap, "kip74", [(big, NOW), (b"small", NOW + 1)]) == [0, 1]
    kc = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        max_partition_fetch_bytes=1024,
        fetch_max_bytes=1024,
    )
    try:
        tp = KTP("kip74", 0)
        kc.assign([tp])
        kc.seek(tp, 0)
        recs: list = []
        deadline = time.monotonic() + 15
        while len(recs) < 2 and time.monotonic() < deadline:
            for batch in kc.poll(timeout_ms=500).values():
                recs.extend(batch)
    finally:
        kc.close()
    assert [(r.offset, r.value) for r in recs] == [(0, big), (1, b"small")]
    # and librdkafka with a tiny partition limit
    c = consumer(
        broker.bootstrap,
        **{"max.partition.fetch.bytes": 1024, "fetch.max.bytes": 1024, "message.max.bytes": 1000},
    )
    try:
        c.assign([TopicPartition("kip74", 0, 0)])
        got: list = []
        deadline = time.monotonic() + 15
        while len(got) < 2 and time.monotonic() < deadline:
            for m in c.consume(2, 0.5):
                assert m.error() is None, m.error()
                got.append((m.offset(), m.value()))
    finally:
        c.close()
    assert got == [(0, big), (1, b"small")]


@pytest.fixture(scope="module")
def ten_records(broker: KopfkaProcess, admin: AdminClient) -> str:
    create(admin, "oor")
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce("oor", b"r%d" % i, partition=0)
    assert p.flush(30) == 0
    return "oor"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("reset", ["earliest", "latest", "error"])
def test_offset_out_of_range_and_auto_offset_reset(reset: str, broker: KopfkaProcess, ten_records: str) -> None:
    c = consumer(broker.bootstrap, **{"auto.offset.reset": reset})
    try:
        c.assign([TopicPartition(ten_records, 0, 1000)])  # beyond the end (10)
        if reset == "latest":
            c.consume(1, 2.0)  # the reset to the end happens first
            p = Producer({"bootstrap.servers": broker.bootstrap})
            p.produce(ten_records, b"new", partition=0)
            assert p.flush(10) == 0
        deadline = time.monotonic() + 15
        first = None
        while first is None and time.monotonic() < deadline:
            for m in c.consume(1, 0.5):
                first = m
        assert first is not None
        if reset == "earliest":
            assert first.error() is None and (first.offset(), first.value()) == (0, b"r0")
        elif reset == "latest":
            assert first.error() is None and (first.offset(), first.value()) == (10, b"new")
        else:
            assert first.error() is not None
            assert first.error().code() == KafkaError._AUTO_OFFSET_RESET, first.error()
            assert "out of range" in first.error().str().lower() or "OFFSET_OUT_OF_RANGE" in first.error().str()
    finally:
        c.close()


@pytest.mark.timeout(60)
def test_offset_out_of_range_kafka_python_raises(broker: KopfkaProcess, ten_records: str) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.errors import OffsetOutOfRangeError

    kc = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="none"
    )
    try:
        tp = KTP(ten_records, 0)
        kc.assign([tp])
        kc.seek(tp, 50)
        with pytest.raises(OffsetOutOfRangeError):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                kc.poll(timeout_ms=500)
    finally:
        kc.close()


# ---------------------------------------------------------------- topic admin


@pytest.mark.timeout(60)
def test_create_topics_errors(broker: KopfkaProcess, admin: AdminClient) -> None:
    create(admin, "dup")
    cases = {
        "dup": (NewTopic("dup", 1, 1), TOPIC_ALREADY_EXISTS),
        "bad name": (NewTopic("bad name!", 1, 1), INVALID_TOPIC_EXCEPTION),
        "dot": (NewTopic("..", 1, 1), INVALID_TOPIC_EXCEPTION),
        "too long": (NewTopic("x" * 250, 1, 1), INVALID_TOPIC_EXCEPTION),
        "rf": (NewTopic("rf-too-big", 1, 3), INVALID_REPLICATION_FACTOR),
        "zero partitions": (NewTopic("zero-parts", 0, 1), INVALID_PARTITIONS),
        "bad config": (NewTopic("bad-config", 1, 1, config={"retention.ms": "soon"}), INVALID_CONFIG),
    }
    for label, (nt, code) in cases.items():
        fut = admin.create_topics([nt])[nt.topic]
        assert error_code(fut) == code, label
    listed = admin.list_topics(timeout=10).topics
    assert not {"rf-too-big", "zero-parts", "bad-config"} & set(listed)


@pytest.mark.timeout(60)
def test_create_topics_validate_only_creates_nothing(broker: KopfkaProcess, admin: AdminClient) -> None:
    fut = admin.create_topics([NewTopic("validate-only", 3, 1)], validate_only=True)["validate-only"]
    assert error_code(fut) == 0
    fut = admin.create_topics([NewTopic("validate-only-rf", 1, 3)], validate_only=True)["validate-only-rf"]
    assert error_code(fut) == INVALID_REPLICATION_FACTOR
    time.sleep(0.5)
    assert "validate-only" not in admin.list_topics(timeout=10).topics
    assert not (broker.data_dir / "validate-only-0").exists()
    # a real create afterwards still works
    create(admin, "validate-only", 3)
    assert len(admin.list_topics("validate-only", timeout=10).topics["validate-only"].partitions) == 3


def _wait(cond: object, timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


@pytest.mark.timeout(90)
def test_delete_topic_then_recreate(broker: KopfkaProcess, admin: AdminClient) -> None:
    create(admin, "phoenix")
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        p.produce("phoenix", b"old-%d" % i, partition=0)
    assert p.flush(10) == 0
    assert error_code(admin.delete_topics(["phoenix"])["phoenix"]) == 0
    assert _wait(lambda: "phoenix" not in admin.list_topics(timeout=10).topics)
    assert error_code(admin.delete_topics(["phoenix"])["phoenix"]) == UNKNOWN_TOPIC_OR_PARTITION
    create(admin, "phoenix")
    c = consumer(broker.bootstrap)
    try:
        assert c.get_watermark_offsets(TopicPartition("phoenix", 0), timeout=10) == (0, 0)
    finally:
        c.close()
    p.produce("phoenix", b"new", partition=0)
    assert p.flush(10) == 0
    assert first_records(broker.bootstrap, "phoenix") == [(0, b"new")]


@pytest.mark.timeout(60)
def test_create_partitions(broker: KopfkaProcess, admin: AdminClient) -> None:
    create(admin, "grow")
    assert error_code(admin.create_partitions([NewPartitions("grow", 3)])["grow"]) == 0
    assert _wait(lambda: len(admin.list_topics("grow", timeout=10).topics["grow"].partitions) == 3)
    assert produce_each(broker.bootstrap, "grow", [(b"p2", NOW)], partition=2) == [0]
    assert error_code(admin.create_partitions([NewPartitions("grow", 2)])["grow"]) == INVALID_PARTITIONS
    assert error_code(admin.create_partitions([NewPartitions("grow", 3)])["grow"]) == INVALID_PARTITIONS
    assert error_code(admin.create_partitions([NewPartitions("no-such-topic", 3)])["no-such-topic"]) == (
        UNKNOWN_TOPIC_OR_PARTITION
    )
    fut = admin.create_partitions([NewPartitions("grow", 5)], validate_only=True)["grow"]
    assert error_code(fut) == 0
    time.sleep(0.5)
    assert len(admin.list_topics("grow", timeout=10).topics["grow"].partitions) == 3


# ---------------------------------------------------------------- configs


def describe(admin: AdminClient, rtype: str, name: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(rtype, name)
    return admin.describe_configs([res])[res].result(30)  # type: ignore[no-any-return]


@pytest.mark.timeout(60)
def test_describe_configs_sources_and_synonyms(broker: KopfkaProcess, admin: AdminClient) -> None:
    create(admin, "described", **{"cleanup.policy": "compact", "min.insync.replicas": "1"})
    cfg = describe(admin, "topic", "described")
    # set on the topic
    assert cfg["cleanup.policy"].value == "compact"
    assert cfg["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # from a static broker override: log.segment.bytes
    seg = cfg["segment.bytes"]
    assert seg.value == str(SEGMENT_BYTES)
    assert seg.source == ConfigSource.STATIC_BROKER_CONFIG.value
    # Kafka lists the broker key's static value, then its default, both named log.segment.bytes
    # (confluent-kafka keeps one synonym per name: the last); the topic key itself is not a synonym
    assert set(seg.synonyms) == {"log.segment.bytes"}, seg.synonyms
    # a default: retention.ms is 7 days, from log.retention.hours
    ret = cfg["retention.ms"]
    assert ret.value == "604800000"
    assert ret.source == ConfigSource.DEFAULT_CONFIG.value
    assert ret.is_default
    # broker resource
    b = describe(admin, "broker", "1")
    assert b["log.segment.bytes"].value == str(SEGMENT_BYTES)
    assert b["log.segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert b["num.partitions"].value == "1"
    assert b["message.max.bytes"].value == "1048588"


@pytest.mark.timeout(60)
def test_incremental_alter_configs(broker: KopfkaProcess, admin: AdminClient) -> None:
    create(admin, "altered")

    def alter(*entries: ConfigEntry, validate_only: bool = False) -> int:
        res = ConfigResource("topic", "altered", incremental_configs=list(entries))
        return error_code(admin.incremental_alter_configs([res], validate_only=validate_only)[res])

    assert alter(ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)) == 0
    e = describe(admin, "topic", "altered")["retention.ms"]
    assert (e.value, e.source) == ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert alter(ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET), validate_only=True) == 0
    assert describe(admin, "topic", "altered")["retention.ms"].value == "3600000"
    assert alter(ConfigEntry("retention.ms", "an hour", incremental_operation=AlterConfigOpType.SET)) == (
        INVALID_CONFIG
    )
    assert alter(ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)) == (INVALID_CONFIG)
    assert alter(ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)) == 0
    e = describe(admin, "topic", "altered")["retention.ms"]
    assert (e.value, e.source) == ("604800000", ConfigSource.DEFAULT_CONFIG.value)


@pytest.mark.timeout(60)
def test_incremental_alter_configs_append_starts_from_default(admin: AdminClient) -> None:
    create(admin, "appended")
    op = ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)
    res = ConfigResource("topic", "appended", incremental_configs=[op])
    assert error_code(admin.incremental_alter_configs([res])[res]) == 0
    value = describe(admin, "topic", "appended")["cleanup.policy"].value
    assert value is not None and set(value.split(",")) == {"delete", "compact"}, value


@pytest.mark.timeout(60)
def test_message_too_large_for_topic_max_message_bytes(broker: KopfkaProcess, admin: AdminClient) -> None:
    create(admin, "small-msgs", **{"max.message.bytes": "10000"})
    errors: list[int] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "compression.type": "none", "retries": 0})
    p.produce(
        "small-msgs",
        bytes(range(256)) * 80,
        partition=0,  # 20 KB: over the topic's limit
        on_delivery=lambda err, msg: errors.append(err.code() if err else 0),
    )
    p.flush(15)
    p.produce("small-msgs", b"fits", partition=0, on_delivery=lambda err, msg: errors.append(err.code() if err else 0))
    p.flush(15)
    assert errors == [KafkaError.MSG_SIZE_TOO_LARGE, 0]


# ---------------------------------------------------------------- auto.create.topics.enable=false


def _frame(entity: object, corr: int) -> bytes:
    buf = io.BytesIO()
    hdr_cls = type(entity).__header_schema__  # type: ignore[attr-defined]
    entity_writer(hdr_cls)(
        buf,
        hdr_cls(
            request_api_key=i16(type(entity).__api_key__),  # type: ignore[attr-defined]
            request_api_version=i16(type(entity).__version__),  # type: ignore[attr-defined]
            correlation_id=i32(corr),
            client_id="api-test",
        ),
    )
    entity_writer(type(entity))(buf, entity)
    return struct.pack(">i", buf.tell()) + buf.getvalue()


def _call(s: socket.socket, entity: object, schema: type, corr: int) -> object:
    s.sendall(_frame(entity, corr))
    size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    data = s.recv(size, socket.MSG_WAITALL)
    assert struct.unpack_from(">i", data)[0] == corr and data[4] == 0  # header v1, no tags
    resp, n = entity_reader(schema)(data[5:], 0)
    assert n == len(data) - 5
    return resp


@pytest.mark.timeout(60)
def test_unknown_topic_without_auto_create(tmp_path_factory: pytest.TempPathFactory) -> None:
    k = KopfkaProcess(
        tmp_path_factory.mktemp("noauto") / "data", overrides={"auto.create.topics.enable": "false"}
    ).start()
    try:
        from kafka.record.default_records import DefaultRecordBatchBuilder

        b = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=0,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 16,
        )
        b.append(0, timestamp=NOW, key=None, value=b"v", headers=[])
        with socket.create_connection((k.host, k.port), timeout=10) as s:
            md = _call(
                s,
                MetadataRequest(
                    topics=(MetadataRequestTopic(topic_id=None, name=TopicName("nope")),),
                    allow_auto_topic_creation=True,
                    include_topic_authorized_operations=False,
                ),
                MetadataResponse,
                1,
            )
            assert [int(t.error_code) for t in md.topics] == [UNKNOWN_TOPIC_OR_PARTITION]  # type: ignore[attr-defined]
            req = ProduceRequest(
                transactional_id=None,
                acks=i16(-1),
                timeout=timedelta(seconds=5),
                topic_data=(
                    TopicProduceData(
                        name=TopicName("nope"),
                        partition_data=(PartitionProduceData(index=i32(0), records=bytes(b.build())),),
                    ),
                ),
            )
            pr = _call(s, req, ProduceResponse, 2)
            codes = [int(p.error_code) for t in pr.responses for p in t.partition_responses]  # type: ignore[attr-defined]
            assert codes == [UNKNOWN_TOPIC_OR_PARTITION]
        # a real client sees the same: the delivery fails, nothing gets created
        errors: list[int] = []
        p = Producer(
            {"bootstrap.servers": k.bootstrap, "message.timeout.ms": 3000, "topic.metadata.propagation.max.ms": 1000}
        )
        p.produce("nope", b"v", on_delivery=lambda err, msg: errors.append(err.code() if err else 0))
        p.flush(15)
        assert errors and errors[0] in (
            KafkaError.UNKNOWN_TOPIC_OR_PART,
            KafkaError._UNKNOWN_TOPIC,
            KafkaError._MSG_TIMED_OUT,
        ), errors
        a = AdminClient({"bootstrap.servers": k.bootstrap})
        assert "nope" not in a.list_topics(timeout=10).topics
        assert not (k.data_dir / "nope-0").exists()
    finally:
        k.kill()


# ---------------------------------------------------------------- transactional records, no transactional id

TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


@pytest.mark.timeout(60)
def test_transactional_batch_without_transactional_id_is_refused(broker: KopfkaProcess, admin: AdminClient) -> None:
    """As Kafka: the whole request fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Accepted, the
    batch would open a transaction nothing can end and pin the last stable offset for good."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    create(admin, "txn-bit", partitions=2)
    batches = []
    for transactional in (1, 0):  # partition 0 carries the transactional batch, partition 1 a plain one
        b = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=transactional,
            producer_id=4242,
            producer_epoch=0,
            base_sequence=0,
            batch_size=1 << 16,
        )
        b.append(0, timestamp=NOW, key=None, value=b"dangling", headers=[])
        batches.append(bytes(b.build()))
    req = ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=timedelta(seconds=5),
        topic_data=(
            TopicProduceData(
                name=TopicName("txn-bit"),
                partition_data=tuple(
                    PartitionProduceData(index=i32(i), records=batch) for i, batch in enumerate(batches)
                ),
            ),
        ),
    )
    with socket.create_connection((broker.host, broker.port), timeout=10) as s:
        pr = _call(s, req, ProduceResponse, 1)
    codes = [int(p.error_code) for t in pr.responses for p in t.partition_responses]  # type: ignore[attr-defined]
    assert codes == [TRANSACTIONAL_ID_AUTHORIZATION_FAILED] * 2
    # nothing was appended, and read_committed consumers are not held back by a dangling transaction
    assert produce_each(broker.bootstrap, "txn-bit", [(b"after", NOW)]) == [0]
    assert first_records(broker.bootstrap, "txn-bit", **{"isolation.level": "read_committed"}) == [(0, b"after")]


# ---------------------------------------------------------------- Produce v0 advertised, as Kafka 4.x


@pytest.mark.parametrize(("codec", "code"), [("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)])
def test_kcat_compresses_against_kopfka(codec: str, code: int, broker: KopfkaProcess, admin: AdminClient) -> None:
    """Kafka 4.x lists Produce from v0 in ApiVersions though it serves v3+ only (KAFKA-18659): kcat's
    librdkafka 2.0 otherwise decides the broker cannot take compressed batches and sends them plain."""
    import subprocess

    topic = f"kcat-{codec}"
    create(admin, topic)
    res = subprocess.run(
        ["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-z", codec],
        input=b"compress me " * 50 + b"\n",
        capture_output=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    segment = broker.data_dir / f"{topic}-0" / "00000000000000000000.log"
    assert _wait(lambda: segment.stat().st_size > 61)
    assert segment.read_bytes()[22] & 0x07 == code  # the batch's compression attribute


# ---------------------------------------------------------------- ListOffsets for a partition that does not exist


@pytest.mark.timeout(120)
def test_list_offsets_for_a_missing_partition_fails_within_the_client_timeout(
    broker: KopfkaProcess, admin: AdminClient, java_admin: Any
) -> None:
    """As against Kafka 4.3.1 (measured with the same calls): librdkafka fails at once (unknown
    partition), kafka-python, aiokafka and the Java admin client retry until their timeout and
    then raise; none may wait longer."""
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.errors import KafkaTimeoutError as AioTimeout
    from aiokafka.structs import TopicPartition as AioTP
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTP
    from kafka.errors import KafkaTimeoutError

    create(admin, "lo-missing")
    missing = TopicPartition("lo-missing", 7)

    def within(seconds: float, fn: Any) -> Exception:
        t0 = time.monotonic()
        try:
            fn()
        except Exception as exc:
            assert time.monotonic() - t0 < seconds, f"{exc!r} after {time.monotonic() - t0:.1f}s"
            return exc
        raise AssertionError("no error for a partition that does not exist")

    exc = within(5, lambda: admin.list_offsets({missing: OffsetSpec.latest()}, request_timeout=2)[missing].result(30))
    assert isinstance(exc, KafkaException)
    c = consumer(broker.bootstrap)
    try:
        exc = within(5, lambda: c.get_watermark_offsets(missing, timeout=2))
        assert exc.args[0].code() == KafkaError._UNKNOWN_PARTITION  # type: ignore[attr-defined]
    finally:
        c.close()
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=2000, fetch_max_wait_ms=200)
    try:
        assert isinstance(within(6, lambda: kc.end_offsets([KpTP("lo-missing", 7)])), KafkaTimeoutError)
        assert isinstance(within(6, lambda: kc.offsets_for_times({KpTP("lo-missing", 7): 0})), KafkaTimeoutError)
    finally:
        kc.close()

    async def aio() -> None:
        ac = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=2000)
        await ac.start()
        try:
            await ac.end_offsets([AioTP("lo-missing", 7)])
        finally:
            await ac.stop()

    assert isinstance(within(8, lambda: asyncio.run(aio())), AioTimeout)
    (res,) = java_admin.run(broker.bootstrap, ["list-offsets", "lo-missing", "7"], timeout_ms=5000)
    assert res["error"] == "TimeoutException" and res["elapsed_ms"] < 8000
