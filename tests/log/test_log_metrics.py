"""Log-management metrics (seed 001 / issue 7): the LogCleaner and LogCleanerManager figures after a
real compaction, uncleanable partitions, LogManager recovery progress (non-zero while loading, 0
once loaded, also after a SIGKILL) and offline log dirs, read from /metrics with
prometheus-client's parser."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kopfka.config.log_config import LogConfig
from kopfka.log import log_manager as log_manager_mod
from kopfka.log.log_manager import LogManager
from kopfka.metrics.broker_metrics import BrokerMetrics
from kopfka.metrics.exposition import export
from kopfka.protocol.record_codec import Record, encode_batch
from kopfka.storage.checkpoint import CleanShutdownFileHandler
from kopfka_process import KopfkaProcess, free_port
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.log.helpers import FAST, create_topic, produce, read_all, wait_for
from tests.log.test_cleaner import TP, clean_once, fill, make_cleaner, open_log
from tests.log.test_compaction import workload
from tests.storage.helpers import BASE_TS, Clock

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    out: Samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def scrape(port: int) -> Samples:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return parse(r.read().decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    key = (name, frozenset(labels.items()))
    assert key in samples, f"{name}{labels} not exported; have {sorted(n for n, _ in samples if 'kafka_log' in n)}"
    return samples[key]


def by_name(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


def collect(lm: LogManager) -> Samples:
    metrics, registry = BrokerMetrics(), CollectorRegistry()
    metrics.bind_log_manager(lm)
    export(metrics, registry)
    return parse(generate_latest(registry).decode())


# --- in-process ------------------------------------------------------------------------------


def test_cleaner_figures_after_a_clean_and_an_uncleanable_partition(tmp_path: Path) -> None:
    clock = Clock()
    ulog = open_log(tmp_path, clock)
    fill(ulog, keys=60, versions=5, seed=3, ts=BASE_TS)
    lc = make_cleaner(ulog, clock)
    try:
        assert lc.max_clean_time_secs == 0 and lc.cleaner_recopy_percent == 0
        assert clean_once(lc)
        # 5 versions of each key shrink to ~1: well under 100% recopied, but something is
        stats = lc.last_stats[TP]
        assert 0 < lc.cleaner_recopy_percent < 60
        assert lc.cleaner_recopy_percent == pytest.approx(100 * stats["bytes_written"] / stats["bytes_read"])
        assert 0 < lc.max_buffer_utilization_percent <= 100
        assert lc.max_clean_time_secs > 0
        assert lc.manager.max_dirty_percent > 50  # the whole cleanable section was dirty
        assert lc.dead_thread_count == 0
        time.sleep(0.02)
        assert lc.manager.time_since_last_run_ms() >= 20
        # nothing left to clean: the next pass sees a clean log
        assert not clean_once(lc)
        assert lc.manager.max_dirty_percent == 0
        assert lc.manager.uncleanable_partitions_count(tmp_path) == 0
    finally:
        asyncio.run(lc.shutdown())

    # a clean that throws marks the partition uncleanable: counted with its stuck bytes
    fill(ulog, keys=60, versions=3, seed=4, ts=BASE_TS)
    lc = make_cleaner(ulog, clock)
    try:

        def boom(*_: Any) -> Any:
            raise RuntimeError("injected cleaning failure")

        lc.cleaners[0].clean_segments = boom  # type: ignore[method-assign]
        assert clean_once(lc)
        assert lc.manager.uncleanable_partitions_count(tmp_path) == 1
        stuck = lc.manager.uncleanable_bytes(tmp_path, {TP: ulog}, clock())
        assert stuck > 0
        assert not clean_once(lc)  # skipped from now on
    finally:
        asyncio.run(lc.shutdown())
    ulog.close()


def _logs_on_disk(dirs: list[Path], partitions: int) -> None:
    lm = LogManager(dirs, lambda _t: LogConfig.defaults(), server_config={}, halt=lambda: None)
    lm.lock_dirs()
    lm.load_logs()
    for p in range(partitions):
        ulog = lm.get_or_create_log(("t", p), None)
        for i in range(3):
            ulog.append_as_leader(encode_batch([Record(0, BASE_TS, b"k%d" % i, b"v" * 20)]), 0)
            ulog.roll()
    lm.shutdown()
    for d in dirs:  # as after a crash: every segment above the recovery point is recovered
        CleanShutdownFileHandler(d).delete()


def test_recovery_gauges_count_down_while_loading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    _logs_on_disk(dirs, partitions=6)
    gate = threading.Event()
    entered = threading.Semaphore(0)
    real_load = log_manager_mod.UnifiedLog.load

    def slow_load(*args: Any, **kw: Any) -> Any:
        entered.release()
        assert gate.wait(20), "test never released the loaders"
        return real_load(*args, **kw)

    monkeypatch.setattr(log_manager_mod.UnifiedLog, "load", slow_load)
    lm = LogManager(
        dirs, lambda _t: LogConfig.defaults(), server_config={"num.recovery.threads.per.data.dir": 2}, halt=lambda: None
    )
    lm.lock_dirs()
    loader = threading.Thread(target=lm.load_logs)
    loader.start()
    try:
        for _ in range(4):  # two threads in each of the two dirs are inside a load
            assert entered.acquire(timeout=20)
        during = collect(lm)
    finally:
        gate.set()
        loader.join(30)
    assert not loader.is_alive()
    logs_left = by_name(during, "kafka_log_logmanager_remaininglogstorecover")
    assert {dict(k)["dir"] for k in logs_left} == {str(d.resolve()) for d in dirs}
    assert all(v == 3 for v in logs_left.values()), logs_left  # 3 logs per dir, none finished yet
    segs = by_name(during, "kafka_log_logmanager_remainingsegmentstorecover")
    assert len(segs) == 4 and all(v > 0 for v in segs.values()), segs
    after = collect(lm)
    assert set(by_name(after, "kafka_log_logmanager_remaininglogstorecover").values()) == {0}
    assert set(by_name(after, "kafka_log_logmanager_remainingsegmentstorecover").values()) == {0}
    assert value(after, "kafka_log_logmanager_offlinelogdirectorycount") == 0
    # a dir that fails while running is counted and flagged
    lm.handle_log_dir_failure(dirs[1].resolve())
    failed = collect(lm)
    assert value(failed, "kafka_log_logmanager_offlinelogdirectorycount") == 1
    assert value(failed, "kafka_log_logmanager_logdirectoryoffline", logdirectory=str(dirs[1].resolve())) == 1
    assert value(failed, "kafka_log_logmanager_logdirectoryoffline", logdirectory=str(dirs[0].resolve())) == 0
    lm.shutdown()


# --- a real broker ---------------------------------------------------------------------------


def metrics_broker(tmp_path: Path, **overrides: str) -> tuple[KopfkaProcess, int]:
    http = free_port()
    proc = KopfkaProcess(
        tmp_path / "data", overrides={**FAST, "kopfka.http.listener": f"127.0.0.1:{http}", **overrides}
    )
    return proc, http


def test_cleaner_metrics_after_compaction(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    proc, http = metrics_broker(tmp_path, **{"log.dirs": str(log_dir)})
    proc.start()
    try:
        before = scrape(http)
        assert value(before, "kafka_log_logcleaner_max_clean_time_secs") == 0
        topic = "compacted"
        create_topic(
            proc.bootstrap,
            topic,
            1,
            # segments large enough for the whole workload (~2.3 MB; the broker's test default is 1 MiB)
            **{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.bytes": str(16 << 20)},
        )
        recs = workload(5, keys=300, versions=5)
        produce(proc.bootstrap, topic, recs)
        # The whole workload is in the active segment; segment.ms then rolls it on the next append,
        # so exactly one clean runs, over all of it. (With 1 MiB segments the workload rolled two
        # segments while it was produced: a clean of the first dropped data, and a later one of
        # segments holding only latest versions and fillers (recopy 100%) became the last clean the
        # gauge shows: `assert 100.0 < 95`, 3 of 30 runs on three workers.)
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        alter = ConfigResource(
            "topic",
            topic,
            incremental_configs=[ConfigEntry("segment.ms", "100", incremental_operation=AlterConfigOpType.SET)],
        )
        admin.incremental_alter_configs([alter])[alter].result(30)
        time.sleep(0.3)
        produce(proc.bootstrap, topic, [(b"roll", b"r")])

        def cleaned() -> Samples | None:
            s = scrape(http)
            return s if value(s, "kafka_log_logcleaner_max_clean_time_secs") > 0 else None

        s = wait_for(cleaned, timeout=60, what="a clean that dropped superseded records, reported on /metrics")
        recopy = value(s, "kafka_log_logcleaner_cleaner_recopy_percent")
        # 5 versions per key plus unique fillers: most of the key section is dropped
        assert 5 < recopy < 95, recopy
        assert 0 < value(s, "kafka_log_logcleaner_max_buffer_utilization_percent") <= 100
        assert value(s, "kafka_log_logcleaner_deadthreadcount") == 0
        assert value(s, "kafka_log_logcleaner_max_compaction_delay_secs") == 0
        d = str(log_dir.resolve())
        assert value(s, "kafka_log_logcleanermanager_uncleanable_partitions_count", logdirectory=d) == 0
        assert value(s, "kafka_log_logcleanermanager_uncleanable_bytes", logdirectory=d) == 0
        # the cleaner runs every log.cleaner.backoff.ms (200 ms): it ran recently
        assert 0 <= value(s, "kafka_log_logcleanermanager_time_since_last_run_ms") < 10_000
        assert 0 <= value(s, "kafka_log_logcleanermanager_max_dirty_percent") <= 100
        assert value(s, "kafka_log_logmanager_offlinelogdirectorycount") == 0
        assert value(s, "kafka_log_logmanager_remaininglogstorecover", dir=d) == 0
        # the figures describe a real compaction
        keys = [k for _, k, _ in read_all(proc.bootstrap, topic) if k is not None and k.startswith(b"key-")]
        assert len(keys) < len([k for k, _ in recs if k is not None and k.startswith(b"key-")])
    finally:
        proc.kill()


def test_recovery_gauges_after_sigkill_and_offline_dir(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    proc, http = metrics_broker(
        tmp_path, **{"log.dirs": ",".join(map(str, dirs)), "num.recovery.threads.per.data.dir": "2"}
    )
    proc.start()
    try:
        for t in ("r1", "r2", "r3"):
            create_topic(proc.bootstrap, t, partitions=2)
            produce(proc.bootstrap, t, [(b"k%d" % i, b"v" * 100) for i in range(50)])
        proc.kill()
        proc.start()
        assert "after an unclean shutdown" in proc.log_text()
        s = wait_for(lambda: scrape(http), timeout=20, what="/metrics")
        logs_left = by_name(s, "kafka_log_logmanager_remaininglogstorecover")
        assert {dict(k)["dir"]: v for k, v in logs_left.items()} == {str(d.resolve()): 0 for d in dirs}
        segs = by_name(s, "kafka_log_logmanager_remainingsegmentstorecover")
        assert {(dict(k)["dir"], dict(k)["threadnum"]) for k in segs} == {
            (str(d.resolve()), n) for d in dirs for n in ("0", "1")
        }
        assert set(segs.values()) == {0}
        assert value(s, "kafka_log_logmanager_offlinelogdirectorycount") == 0
        assert [v for _, _, v in read_all(proc.bootstrap, "r2", partition=0)] == [b"v" * 100] * 50
        # fail dir b: the count follows
        dirs[1].rename(tmp_path / "b-gone")
        dirs[1].write_text("not a directory")

        def offline() -> Samples | None:
            s = scrape(http)
            return s if value(s, "kafka_log_logmanager_offlinelogdirectorycount") == 1 else None

        s = wait_for(offline, timeout=30, what="dir b counted offline")
        assert value(s, "kafka_log_logmanager_logdirectoryoffline", logdirectory=str(dirs[1].resolve())) == 1
        assert value(s, "kafka_log_logmanager_logdirectoryoffline", logdirectory=str(dirs[0].resolve())) == 0
    finally:
        proc.kill()
