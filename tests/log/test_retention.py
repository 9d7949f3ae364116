"""Retention with a real client: by time (segment largest timestamp), by size, and by
DeleteRecords; a consumer reading from offset 0 gets OFFSET_OUT_OF_RANGE and resets to the
new log start; on disk segments go `.deleted` first and are unlinked after
file.delete.delay.ms, and the log-start-offset checkpoint records the new start."""

from __future__ import annotations

import os
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.log.helpers import broker, checkpoint_entries, create_topic, produce, read_all, wait_for, watermarks


def values(n: int) -> list[tuple[bytes | None, bytes | None]]:
    """Incompressible values, so sizes on disk are what the test expects."""
    return [(None, os.urandom(1000)) for _ in range(n)]


def segments(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".log"))


def out_of_range_then_reset(bootstrap: str, topic: str, low: int) -> None:
    """auto.offset.reset=error surfaces OFFSET_OUT_OF_RANGE for offset 0; earliest resets."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "ret", "auto.offset.reset": "error", "enable.auto.commit": False}
    )
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        err = None
        deadline = time.monotonic() + 20
        while err is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is not None:
                err = m.error()
        assert err is not None and err.code() == KafkaError._AUTO_OFFSET_RESET, err
        assert "out of range" in err.str().lower() or "OFFSET_OUT_OF_RANGE" in err.str(), err.str()
    finally:
        c.close()
    got = read_all(bootstrap, topic, start=0)
    assert got[0][0] == low


def test_retention_by_time_size_and_delete_records(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = broker(data, **{"log.segment.delete.delay.ms": "1500"}).start()
    try:
        now = int(time.time() * 1000)
        # --- time: old records expire by their segment's largest timestamp --------------
        create_topic(proc.bootstrap, "by-time", **{"retention.ms": "600000", "segment.bytes": str(1 << 20)})
        produce(proc.bootstrap, "by-time", values(3000), timestamps=[now - 3_600_000] * 3000)
        produce(proc.bootstrap, "by-time", values(200), timestamps=[now] * 200)
        d = data / "by-time-0"
        wait_for(lambda: watermarks(proc.bootstrap, "by-time")[0] or None, 30, what="time retention")

        def settled() -> int | None:
            # retention may take the old segments over more than one pass while the produce
            # rolls them: wait until the log start and the first segment agree, nothing pending
            low = watermarks(proc.bootstrap, "by-time")[0]
            pending = list(d.glob("*.deleted"))
            return low if not pending and segments(d) and int(segments(d)[0][:20]) == low else None

        # the life cycle: renamed .deleted, unlinked after file.delete.delay.ms
        low = wait_for(settled, 30, what=".deleted files unlinked, log start on the first segment")
        assert 0 < low <= 3000
        wait_for(lambda: checkpoint_entries(data / "log-start-offset-checkpoint").get(("by-time", 0)) == low, 10)
        out_of_range_then_reset(proc.bootstrap, "by-time", low)

        # --- size: the log is trimmed to retention.bytes, oldest segments first ----------
        create_topic(proc.bootstrap, "by-size", **{"retention.bytes": str(2 << 20), "segment.bytes": str(1 << 20)})
        produce(proc.bootstrap, "by-size", values(6000))
        ds = data / "by-size-0"
        wait_for(lambda: watermarks(proc.bootstrap, "by-size")[0] > 0, 30, what="size retention")
        wait_for(lambda: sum(p.stat().st_size for p in ds.glob("*.log")) <= 3 << 20, 20)
        low = watermarks(proc.bootstrap, "by-size")[0]
        got = read_all(proc.bootstrap, "by-size")
        assert got[0][0] == low and got[-1][0] == 5999 and len(got) == 6000 - low

        # --- DeleteRecords raises the log start; retention then drops the segments -------
        create_topic(proc.bootstrap, "by-delete", **{"segment.bytes": str(1 << 20)})
        produce(proc.bootstrap, "by-delete", values(4000))
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        fut = admin.delete_records([TopicPartition("by-delete", 0, 2500)])
        [res] = list(fut.values())
        assert res.result(30).low_watermark == 2500
        assert watermarks(proc.bootstrap, "by-delete")[0] == 2500
        dd = data / "by-delete-0"
        wait_for(lambda: int(segments(dd)[0][:20]) > 0, 20, what="segments below the start deleted")
        assert int(segments(dd)[0][:20]) <= 2500
        out_of_range_then_reset(proc.bootstrap, "by-delete", 2500)
        # the start offset survives a crash
        wait_for(lambda: checkpoint_entries(data / "log-start-offset-checkpoint").get(("by-delete", 0)) == 2500, 10)
        proc.kill()
        proc.start()
        assert watermarks(proc.bootstrap, "by-delete")[0] == 2500
        assert read_all(proc.bootstrap, "by-delete")[0][0] == 2500
    finally:
        proc.kill()
