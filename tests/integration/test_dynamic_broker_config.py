"""Dynamic broker configs on a running `kopfka serve`, set and deleted with `kopfka configs`
(kafka-configs' syntax) at the cluster default (--entity-default) and per broker (--entity-name
1), each group with an effect a client can see: the log cleaner compacts with the new threads and
backoff, a producer id expires at the new expiration, a transactional produce skips verification,
topic defaults (message.max.bytes, compression.type, timestamps, roll and retention) change for
existing topics, recovery uses the new thread count after a crash, and the keys Kafka cannot
change at runtime are refused with its wording. min.insync.replicas needs replicas to show:
tests/replication/test_dynamic_configs_cluster.py."""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kopfka.client.connection import KafkaConnection
from kopfka.protocol.errors import ErrorCode
from kopfka.protocol.record_codec import Record, encode_batch
from kopfka.protocol.records import iter_batches
from kopfka_process import KopfkaProcess
from request_bodies import consumer_fetch_body

from tests.log.helpers import create_topic, raw_request, read_all, wait_for

pytestmark = pytest.mark.timeout(180)

STATIC = {
    "log.initial.task.delay.ms": "0",
    "log.retention.check.interval.ms": "200",
    "log.segment.delete.delay.ms": "100",
    "log.cleaner.backoff.ms": "600000",  # an idle cleaner task sleeps 10 minutes
    "producer.id.expiration.check.interval.ms": "200",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def k(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KopfkaProcess]:
    proc = KopfkaProcess(tmp_path_factory.mktemp("dynconf") / "data", overrides=STATIC).start()
    try:
        yield proc
    finally:
        proc.kill()


def configs(k: KopfkaProcess, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [sys.executable, "-m", "kopfka.cli.main", "configs", "--bootstrap-server", k.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check:
        assert res.returncode == 0, res.stdout + res.stderr
    return res


DEFAULT = ("--entity-type", "brokers", "--entity-default")
BROKER_1 = ("--entity-type", "brokers", "--entity-name", "1")


def alter(k: KopfkaProcess, entity: tuple[str, ...], **kv: Any) -> None:
    text = ",".join(f"{key.replace('_', '.')}={v}" for key, v in kv.items())
    configs(k, *entity, "--alter", "--add-config", text)


def delete(k: KopfkaProcess, entity: tuple[str, ...], *keys: str) -> None:
    configs(k, *entity, "--alter", "--delete-config", ",".join(keys))


def refused(k: KopfkaProcess, entity: tuple[str, ...], text: str) -> str:
    res = configs(k, *entity, "--alter", "--add-config", text, check=False)
    assert res.returncode != 0, res.stdout
    return res.stderr.strip()


def produce_raw(bootstrap: str, topic: str, value: bytes, acks: int = -1) -> tuple[ErrorCode, int]:
    batch = encode_batch([Record(0, int(time.time() * 1000) - 5000, b"key", value)])
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    r = raw_request(bootstrap, 0, 9, body).responses[0].partition_responses[0]
    return ErrorCode(int(r.error_code)), int(r.base_offset)


def fetch_batch_attributes(k: KopfkaProcess, topic: str, offset: int) -> tuple[int, int]:
    """(attributes, max timestamp) of the batch holding `offset`, as stored by the broker."""
    md = raw_request(
        k.bootstrap,
        3,
        12,
        {
            "topics": [{"name": topic, "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    tid = md.topics[0].topic_id
    body = consumer_fetch_body(topic_id=tid, offset=offset)
    records = raw_request(k.bootstrap, 1, 13, body).responses[0].partitions[0].records
    for h in iter_batches(records):
        if h.base_offset <= offset <= h.last_offset:
            return h.attributes, h.max_timestamp
    raise AssertionError(f"no batch holds offset {offset}")


# --- log.cleaner.* -----------------------------------------------------------------------


def test_cleaner_restarts_with_new_backoff_and_threads(k: KopfkaProcess) -> None:
    topic = "dyn-compact"
    create_topic(
        k.bootstrap, topic, **{"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"}
    )
    producer = Producer({"bootstrap.servers": k.bootstrap, "linger.ms": 0})
    for rnd in range(5):  # five segments of the same 20 keys
        for key in range(20):
            producer.produce(topic, b"v%d" % rnd, key=b"k%d" % key)
        assert producer.flush(30) == 0
        time.sleep(0.15)
    producer.produce(topic, b"tail", key=b"tail")  # rolls the last full segment away from the active one
    assert producer.flush(30) == 0
    time.sleep(1.0)
    assert len(read_all(k.bootstrap, topic)) == 101, "compacted although the cleaner sleeps its 10 min backoff"

    alter(k, DEFAULT, log_cleaner_backoff_ms=100, log_cleaner_threads=2)
    try:
        wait_for(lambda: len(read_all(k.bootstrap, topic)) <= 41, 20, what="the restarted cleaner to compact")
        latest = {key: value for _, key, value in read_all(k.bootstrap, topic)}
        assert latest == {**{b"k%d" % i: b"v4" for i in range(20)}, b"tail": b"tail"}
        assert "Started 2 log cleaner task(s)" in k.log_text()
        # the per-broker value wins over the cluster default
        alter(k, BROKER_1, log_cleaner_threads=1)
        wait_for(lambda: k.log_text().count("Started 1 log cleaner task(s)") >= 2, 10, what="a restart with 1 task")
    finally:
        delete(k, BROKER_1, "log.cleaner.threads")
        delete(k, DEFAULT, "log.cleaner.backoff.ms", "log.cleaner.threads")


def test_cleaner_thread_count_is_bounded_as_in_kafka(k: KopfkaProcess) -> None:
    assert refused(k, DEFAULT, "log.cleaner.threads=3").endswith(
        "INVALID_REQUEST: Log cleaner threads cannot be increased to more than double the current value 1"
    )
    assert "Log cleaner threads should be at least 1" in refused(k, BROKER_1, "log.cleaner.threads=0")


# --- producer state ------------------------------------------------------------------------


def _producers(bootstrap: str, topic: str) -> list[Any]:
    r = raw_request(bootstrap, 61, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
    return list(r.topics[0].partitions[0].active_producers)


def test_producer_ids_expire_at_the_new_expiration(k: KopfkaProcess) -> None:
    create_topic(k.bootstrap, "dyn-pid")
    p = Producer({"bootstrap.servers": k.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    p.produce("dyn-pid", b"x", partition=0)
    assert p.flush(30) == 0
    time.sleep(1.5)
    assert len(_producers(k.bootstrap, "dyn-pid")) == 1, "expired at the default of 1 day"
    alter(k, DEFAULT, producer_id_expiration_ms=1000)
    try:
        wait_for(lambda: not _producers(k.bootstrap, "dyn-pid"), 10, what="the producer id to expire")
        # a log created after the change expires its producers at the new value too
        create_topic(k.bootstrap, "dyn-pid-new")
        p.produce("dyn-pid-new", b"x", partition=0)
        assert p.flush(30) == 0
        assert _producers(k.bootstrap, "dyn-pid-new")
        wait_for(lambda: not _producers(k.bootstrap, "dyn-pid-new"), 10, what="expiry on a new log")
    finally:
        delete(k, DEFAULT, "producer.id.expiration.ms")


def test_transaction_verification_can_be_switched_off(k: KopfkaProcess) -> None:
    from transactions.helpers import wait_for_coordinator
    from transactions.test_txn_protocol import Txn

    create_topic(k.bootstrap, "dyn-txn")

    async def produce_unadded(tid: str) -> ErrorCode:
        conn = await KafkaConnection.open(k.bootstrap)
        try:
            await wait_for_coordinator(conn, tid)
            t = Txn(conn)
            r = await t.init(tid)
            code, _ = await t.produce(tid, r.producer_id, r.producer_epoch, 0, ("dyn-txn", 0), b"x")
            return ErrorCode(code)
        finally:
            await conn.close()

    assert asyncio.run(produce_unadded("dyn-t1")) == ErrorCode.invalid_txn_state
    alter(k, BROKER_1, transaction_partition_verification_enable="false")
    try:
        assert asyncio.run(produce_unadded("dyn-t2")) == ErrorCode.none, "still verified"
    finally:
        delete(k, BROKER_1, "transaction.partition.verification.enable")
    assert asyncio.run(produce_unadded("dyn-t3")) == ErrorCode.invalid_txn_state


# --- the log-config synonyms (topic defaults) -----------------------------------------------


def test_topic_defaults_change_for_existing_topics(k: KopfkaProcess) -> None:
    create_topic(k.bootstrap, "dyn-defaults")
    assert produce_raw(k.bootstrap, "dyn-defaults", b"x" * 5000)[0] == ErrorCode.none
    alter(k, DEFAULT, message_max_bytes=2000)
    try:
        assert produce_raw(k.bootstrap, "dyn-defaults", b"x" * 5000)[0] == ErrorCode.message_too_large
        alter(k, BROKER_1, message_max_bytes=10000)  # this broker's own value wins
        assert produce_raw(k.bootstrap, "dyn-defaults", b"x" * 5000)[0] == ErrorCode.none
    finally:
        delete(k, BROKER_1, "message.max.bytes")
        delete(k, DEFAULT, "message.max.bytes")
    assert produce_raw(k.bootstrap, "dyn-defaults", b"x" * 5000)[0] == ErrorCode.none

    code, plain = produce_raw(k.bootstrap, "dyn-defaults", b"plain")
    attrs, ts = fetch_batch_attributes(k, "dyn-defaults", plain)
    assert code == ErrorCode.none and attrs & 0x07 == 0 and not attrs & 0x08
    alter(k, DEFAULT, compression_type="gzip", log_message_timestamp_type="LogAppendTime")
    try:
        before = int(time.time() * 1000)
        code, offset = produce_raw(k.bootstrap, "dyn-defaults", b"compressed by the broker" * 10)
        attrs, ts = fetch_batch_attributes(k, "dyn-defaults", offset)
        assert code == ErrorCode.none
        assert attrs & 0x07 == 1, "not recompressed with gzip"
        assert attrs & 0x08 and ts >= before, "not stamped with LogAppendTime"
    finally:
        delete(k, DEFAULT, "compression.type", "log.message.timestamp.type")


def test_roll_and_retention_defaults_apply_to_existing_logs(k: KopfkaProcess) -> None:
    create_topic(k.bootstrap, "dyn-retention")
    part = next((k.data_dir).rglob("dyn-retention-0"))
    for _ in range(3):
        assert produce_raw(k.bootstrap, "dyn-retention", b"x")[0] == ErrorCode.none
    assert len(list(part.glob("*.log"))) == 1
    alter(k, DEFAULT, log_roll_ms=100)
    try:
        for _ in range(3):
            time.sleep(0.15)
            assert produce_raw(k.bootstrap, "dyn-retention", b"x")[0] == ErrorCode.none
        assert len(list(part.glob("*.log"))) >= 3, "log.roll.ms did not roll the existing log"
        alter(k, DEFAULT, log_retention_ms=300)

        def log_start() -> int:
            r = raw_request(
                k.bootstrap,
                2,
                7,
                {
                    "replica_id": -1,
                    "isolation_level": 0,
                    "topics": [{"name": "dyn-retention", "partitions": [{"partition_index": 0, "timestamp": -2}]}],
                },
            )
            return int(r.topics[0].partitions[0].offset)

        wait_for(lambda: log_start() >= 5, 10, what="log.retention.ms to delete the old segments")
    finally:
        delete(k, DEFAULT, "log.roll.ms", "log.retention.ms")


# --- what Kafka refuses, and what DescribeConfigs says -----------------------------------


def test_static_keys_are_refused_with_kafkas_wording(k: KopfkaProcess) -> None:
    assert refused(k, DEFAULT, "num.partitions=3,log.retention.hours=1").endswith(
        "INVALID_REQUEST: Cannot update these configs dynamically: [log.retention.hours, num.partitions]"
    )
    assert refused(k, DEFAULT, "ssl.keystore.location=/x").endswith(
        "These security configs can be dynamically updated only per-listener using the listener prefix: "
        "[ssl.keystore.location]"
    )
    assert refused(k, DEFAULT, "log.cleaner.threads=x").endswith(
        "Invalid value 'x' for configuration log.cleaner.threads: Expected value of type int"
    )
    assert refused(k, DEFAULT, "max.connections=0").endswith("INVALID_REQUEST: Invalid max.connections 0")
    assert refused(k, DEFAULT, "max.connections.per.ip=0").endswith(
        "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set."
    )
    # dynamic in Kafka, but kopfka would not apply it: refused rather than stored and ignored
    assert "kopfka applies these configs only at startup" in refused(
        k, BROKER_1, "listener.name.plaintext.ssl.keystore.location=/x"
    )
    res = configs(k, "--entity-type", "brokers", "--entity-name", "7", "--alter", "--add-config", "a=b", check=False)
    assert res.returncode != 0 and "broker 7 is not in the cluster metadata" in res.stderr


def test_describe_configs_sources_and_read_only(k: KopfkaProcess) -> None:
    dynamic_broker, dynamic_default, default_config = 2, 3, 5

    def describe(name: str) -> dict[str, Any]:
        body = {
            "resources": [{"resource_type": 4, "resource_name": name, "configuration_keys": None}],
            "include_synonyms": True,
            "include_documentation": False,
        }
        (res,) = raw_request(k.bootstrap, 32, 4, body).results
        assert res.error_code == 0, res.error_message
        return {c.name: c for c in res.configs}

    alter(k, DEFAULT, log_retention_ms=123456, log_cleaner_io_max_bytes_per_second=1e9)
    alter(k, BROKER_1, log_retention_ms=654321)
    try:
        mine = describe("1")
        entry = mine["log.retention.ms"]
        assert (entry.value, entry.config_source, entry.read_only) == ("654321", dynamic_broker, False)
        assert [(y.source, y.value) for y in entry.synonyms][:2] == [
            (dynamic_broker, "654321"),
            (dynamic_default, "123456"),
        ]
        assert mine["log.cleaner.io.max.bytes.per.second"].config_source == dynamic_default
        for key in ("log.cleaner.threads", "num.io.threads", "max.connections", "message.max.bytes", "listeners"):
            assert not mine[key].read_only, key  # Kafka's dynamic keys (listeners: per broker)
        for key in ("num.partitions", "log.dirs", "log.retention.hours", "log.cleaner.enable", "node.id"):
            assert mine[key].read_only, key
        assert mine["num.partitions"].config_source == default_config
        default = describe("")
        # (with ELR on, the format also wrote the cluster-level min.insync.replicas, as Kafka's does)
        assert set(default) - {"min.insync.replicas"} == {"log.retention.ms", "log.cleaner.io.max.bytes.per.second"}
        assert default["log.retention.ms"].config_source == dynamic_default
        assert [(y.source, y.value) for y in default["log.retention.ms"].synonyms] == [(dynamic_default, "123456")]
    finally:
        delete(k, BROKER_1, "log.retention.ms")
        delete(k, DEFAULT, "log.retention.ms", "log.cleaner.io.max.bytes.per.second")


# --- thread pools -----------------------------------------------------------------------------


def test_thread_pool_sizes(k: KopfkaProcess) -> None:
    assert refused(k, DEFAULT, "num.io.threads=100").endswith(
        "Dynamic thread count update validation failed for num.io.threads=100, "
        "value should not be greater than double the current value 8"
    )
    assert "value should not be greater than double the current value 3" in refused(k, DEFAULT, "num.network.threads=7")
    alter(k, DEFAULT, num_io_threads=16, num_network_threads=6, background_threads=20)
    try:
        wait_for(
            lambda: "Resizing the background thread pool from 10 to 20" in k.log_text(), 10, what="the scheduler resize"
        )
        out = configs(k, *BROKER_1, "--describe").stdout
        assert "num.io.threads=16 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:num.io.threads=16" in out
    finally:
        delete(k, DEFAULT, "num.io.threads", "num.network.threads", "background.threads")


def test_recovery_threads_apply_at_the_next_recovery(tmp_path: Path) -> None:
    proc = KopfkaProcess(tmp_path / "data", overrides=STATIC).start()
    try:
        create_topic(proc.bootstrap, "dyn-recovery")
        assert produce_raw(proc.bootstrap, "dyn-recovery", b"x")[0] == ErrorCode.none
        alter(proc, DEFAULT, num_recovery_threads_per_data_dir=4)
        proc.kill()  # an unclean shutdown: the next start recovers
        proc.start()
        wait_for(lambda: "unclean shutdown with 4 recovery threads" in proc.log_text(), 30, what="the recovery")
        assert produce_raw(proc.bootstrap, "dyn-recovery", b"y")[0] == ErrorCode.none
    finally:
        proc.kill()


# --- connection limits ------------------------------------------------------------------------


def _api_versions_ok(sock: socket.socket) -> bool:
    """One ApiVersions v0 round trip; False if the broker closed the connection."""
    request = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    try:
        sock.sendall(struct.pack(">i", len(request)) + request)
        head = sock.recv(4)
        return len(head) == 4
    except OSError:
        return False


def test_connection_limits_take_the_new_values(tmp_path: Path) -> None:
    """Connections from 127.0.0.2 against the limits; the tool itself connects from 127.0.0.1."""
    proc = KopfkaProcess(tmp_path / "data").start()
    socks: list[socket.socket] = []

    def connect() -> socket.socket:
        s = socket.create_connection((proc.host, proc.port), timeout=5, source_address=("127.0.0.2", 0))
        socks.append(s)
        return s

    try:
        alter(proc, DEFAULT, max_connections_per_ip=3)
        held = [connect() for _ in range(3)]
        assert all(_api_versions_ok(s) for s in held)
        assert not _api_versions_ok(connect()), "a 4th connection from 127.0.0.2 was served"
        alter(proc, BROKER_1, max_connections_per_ip_overrides="127.0.0.2:5")
        assert _api_versions_ok(connect()) and _api_versions_ok(connect())
        assert not _api_versions_ok(connect()), "a 6th connection was served"
        delete(proc, BROKER_1, "max.connections.per.ip.overrides")
        delete(proc, DEFAULT, "max.connections.per.ip")
        assert _api_versions_ok(connect())
    finally:
        for s in socks:
            s.close()
        proc.kill()
