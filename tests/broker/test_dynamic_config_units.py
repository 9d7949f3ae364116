"""Which broker configs are dynamic and how a running broker applies them (pure parts and the
publisher, in-process): Kafka 4.3's key groups and wording, the effective value (per broker,
then cluster default, then server.properties), stored keys that are no longer valid ignored, a
published change a component refuses left unapplied, and every log-config synonym reaching every
existing log."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path

import pytest
from kopfka.config import dynamic_broker_config as dyn
from kopfka.config.dynamic_broker_config import DynamicConfigError, effective_values, validate_keys
from kopfka.config.log_config import BROKER_SYNONYMS, TOPIC_CONFIG
from kopfka.config.server_config import SERVER_CONFIG, KafkaConfig
from kopfka.log.log_manager import LogManager
from kopfka.metadata.loader import MetadataLoader
from kopfka.server.broker_services import make_config_for
from kopfka.server.dynamic_config import DynamicBrokerConfig, Reconfigurable, thread_count_problem
from kopfka.server.scheduler import KafkaScheduler


def config(**props: str) -> KafkaConfig:
    base = {
        "node.id": "1",
        "process.roles": "broker,controller",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": "1@127.0.0.1:9093",
    }
    return KafkaConfig.from_properties({**base, **{k.replace("_", "."): v for k, v in props.items()}})


def refusal(props: dict[str, str], per_broker: bool = False) -> str:
    with pytest.raises(DynamicConfigError) as info:
        validate_keys(props, per_broker)
    return str(info.value)


def test_kafkas_groups_and_wording() -> None:
    # every key the operator applies live is one of Kafka's dynamic keys and defined here
    for key in dyn.LOG_CONFIGS | dyn.CLEANER_CONFIGS | dyn.THREAD_POOL_CONFIGS | dyn.SOCKET_SERVER_CONFIGS:
        assert key in SERVER_CONFIG, key
    # DynamicLogConfig's keys are the first (most specific) broker synonym of each topic config
    assert dyn.LOG_CONFIGS - {syns[0] for syns in BROKER_SYNONYMS.values()} == {"cordoned.log.dirs"}
    assert {syns[0] for syns in BROKER_SYNONYMS.values()} <= dyn.LOG_CONFIGS
    assert not dyn.is_dynamic("log.retention.hours") and dyn.is_dynamic("log.retention.ms")
    assert refusal({"num.partitions": "3", "log.retention.hours": "1"}) == (
        "Cannot update these configs dynamically: [log.retention.hours, num.partitions]"
    )
    assert refusal({"ssl.keystore.location": "/x"}, per_broker=True).startswith(
        "These security configs can be dynamically updated only per-listener using the listener prefix"
    )
    assert refusal({"listener.name.external.ssl.keystore.location": "/x"}) == (
        "Cannot update these configs at default cluster level, broker id must be specified: "
        "[listener.name.external.ssl.keystore.location]"
    )
    assert "kopfka applies these configs only at startup" in refusal(
        {"listener.name.external.ssl.keystore.location": "/x"}, per_broker=True
    )
    assert refusal({"no.such.key": "1"}) == "Unknown broker configs: [no.such.key]"
    assert "log.cleaner.threads" in refusal({"log.cleaner.threads": "many"})
    validate_keys({"log.cleaner.threads": "2", "log.retention.ms": "1000", "num.io.threads": "12"}, False)


def test_effective_values_precedence_and_stale_keys(caplog: pytest.LogCaptureFixture) -> None:
    static = config(log_retention_ms="5000", num_io_threads="4").values
    with caplog.at_level(logging.ERROR):
        values = effective_values(
            static,
            {"log.retention.ms": "6000", "log.cleaner.threads": "2", "num.partitions": "9"},
            {"log.retention.ms": "7000"},
        )
    assert values["log.retention.ms"] == 7000  # per broker over cluster default over static
    assert values["log.cleaner.threads"] == 2 and values["num.io.threads"] == 4
    assert values["num.partitions"] == 1, "a stored static key must be ignored"
    assert "ignored: [num.partitions]" in caplog.text


def test_thread_count_bounds() -> None:
    assert thread_count_problem("num.io.threads", 8, 16) is None
    assert thread_count_problem("num.io.threads", 8, 17) == (
        "Dynamic thread count update validation failed for num.io.threads=17, "
        "value should not be greater than double the current value 8"
    )
    assert thread_count_problem("num.io.threads", 8, 3).endswith("value should be at least half the current value 8")
    assert thread_count_problem("num.io.threads", 8, 0).endswith("value should be at least 1")


def test_a_change_a_component_refuses_is_not_applied(caplog: pytest.LogCaptureFixture) -> None:
    """A cluster default checked on one broker can be too big a step for another: that broker
    logs it and keeps its config, as Kafka does."""
    cfg = config()
    dc = DynamicBrokerConfig(cfg)
    applied: list[int] = []
    dc.add(
        Reconfigurable(
            "pool",
            frozenset({"num.io.threads"}),
            lambda old, new: applied.append(new["num.io.threads"]),
            lambda old, new: thread_count_problem("num.io.threads", old["num.io.threads"], new["num.io.threads"]),
        )
    )
    dc.update({"num.io.threads": "16"}, {})
    assert applied == [16] and cfg["num.io.threads"] == 16
    with caplog.at_level(logging.ERROR):
        dc.update({"num.io.threads": "40"}, {})
    assert applied == [16] and cfg["num.io.threads"] == 16
    assert "Failed to update broker configuration" in caplog.text
    with pytest.raises(DynamicConfigError, match="double the current value 16"):
        dc.validate({"num.io.threads": "40"}, per_broker=False)
    dc.validate({"num.io.threads": "30"}, per_broker=True)  # 30 <= 2 * 16


def test_every_log_config_synonym_reaches_existing_logs(tmp_path: Path) -> None:
    """DynamicLogConfig: each broker-level topic default, set at the cluster default and then per
    broker, becomes the value of its topic key in every existing log without an override."""
    cfg = config()
    loader = MetadataLoader("broker")
    lm = LogManager([tmp_path / "logs"], make_config_for(cfg, loader), server_config=cfg.values, halt=lambda: None)
    lm.lock_dirs()
    logs = [lm.get_or_create_log((t, 0), None) for t in ("a", "b")]
    dc = DynamicBrokerConfig(cfg)
    dc.add(Reconfigurable("DynamicLogConfig", dyn.LOG_CONFIGS, lambda old, new: lm.reconfigure_log_configs()))
    values = {
        "compression.type": ("gzip", "lz4"),
        "compression.gzip.level": ("5", "6"),
        "compression.lz4.level": ("10", "11"),
        "compression.zstd.level": ("7", "8"),
        "log.cleaner.delete.retention.ms": ("1001", "1002"),
        "log.cleaner.max.compaction.lag.ms": ("2001", "2002"),
        "log.cleaner.min.cleanable.ratio": ("0.25", "0.75"),
        "log.cleaner.min.compaction.lag.ms": ("3001", "3002"),
        "log.cleanup.policy": ("compact", "compact,delete"),
        "log.flush.interval.messages": ("4001", "4002"),
        "log.flush.interval.ms": ("5001", "5002"),
        "log.index.interval.bytes": ("6001", "6002"),
        "log.index.size.max.bytes": ("7001", "7002"),
        "log.local.retention.bytes": ("8001", "8002"),
        "log.local.retention.ms": ("9001", "9002"),
        "log.message.timestamp.after.max.ms": ("10001", "10002"),
        "log.message.timestamp.before.max.ms": ("11001", "11002"),
        "log.message.timestamp.type": ("LogAppendTime", "CreateTime"),
        "log.preallocate": ("true", "false"),
        "log.retention.bytes": ("12001", "12002"),
        "log.retention.ms": ("13001", "13002"),
        "log.roll.jitter.ms": ("14001", "14002"),
        "log.roll.ms": ("15001", "15002"),
        "log.segment.bytes": ("2000000", "3000000"),
        "log.segment.delete.delay.ms": ("16001", "16002"),
        "message.max.bytes": ("17001", "17002"),
        "min.insync.replicas": ("2", "3"),
        "unclean.leader.election.enable": ("true", "false"),
    }
    assert set(values) == dyn.LOG_CONFIGS - {"cordoned.log.dirs"}
    topic_key = {syns[0]: key for key, syns in BROKER_SYNONYMS.items()}
    for level in (0, 1):
        default = {k: v[0] for k, v in values.items()}
        broker = {k: v[1] for k, v in values.items()} if level else {}
        dc.update(default, broker)
        for broker_key, pair in values.items():
            key = topic_key[broker_key]
            want = TOPIC_CONFIG.keys[key].parse(pair[level])
            for ulog in logs:
                assert ulog.config[key] == want, (broker_key, level, ulog.config[key])
    dc.update({}, {})  # deleted at both levels: back to the topic defaults
    for ulog in logs:
        assert ulog.config["retention.ms"] == TOPIC_CONFIG.keys["retention.ms"].default
        assert ulog.config["max.message.bytes"] == TOPIC_CONFIG.keys["max.message.bytes"].default
    for ulog in logs:
        ulog.close()


def test_scheduler_resize_runs_new_tasks_on_the_new_pool() -> None:
    """background.threads: after a resize from 1 to 4 workers, four tasks run at once."""
    lock = threading.Lock()
    running = peak = 0

    def task() -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.2)
        with lock:
            running -= 1

    async def scenario() -> None:
        sched = KafkaScheduler(1)
        sched.bind(asyncio.get_running_loop())
        sched.resize(4)
        for i in range(4):
            sched(f"t{i}", 0, task)
        await asyncio.sleep(0.1)
        await sched.shutdown()

    asyncio.run(scenario())
    assert peak == 4
