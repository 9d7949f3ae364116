"""Crash safety against a real broker: the process exits (os._exit, like a power cut) at each
named step of the cleaner's swap and of retention, or is SIGKILLed at random moments while it
cleans; after a restart the log is valid and holds the same surviving data."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from kopfka.storage.fault_injection import CRASH_EXIT_CODE

from tests.log.helpers import broker, crash_env, create_topic, produce, read_all, wait_for
from tests.log.test_compaction import workload

# The broker may crash under a producer that still holds records: they fail after 15 s instead of
# the producer waiting out flush()'s 60 s (seen: 65 s for one test).
CRASHING = {"message.timeout.ms": 15000}
COMPACT = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.bytes": str(1 << 20)}

SWAP_STEPS = {
    "cleaner-after-cleaned-written": ".cleaned",
    "cleaner-after-swap-rename": ".swap",
    "cleaner-after-first-old-deleted": ".swap",
    "cleaner-after-old-deleted": ".swap",
    "cleaner-after-swap-live": None,
}


def check_compacted_topic(bootstrap: str, topic: str, expected: dict[bytes | None, bytes | None]) -> None:
    got = read_all(bootstrap, topic)
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets))
    assert {k: v for _, k, v in got} == expected


@pytest.mark.parametrize("point", list(SWAP_STEPS))
def test_crash_at_each_swap_step(tmp_path: Path, point: str) -> None:
    data = tmp_path / "data"
    with crash_env(point):
        proc = broker(data).start()
    try:
        create_topic(proc.bootstrap, "c", **COMPACT)
        recs = workload(7, keys=200, versions=4)
        expected = dict(recs)
        try:
            produce(proc.bootstrap, "c", recs, extra=CRASHING)
        except AssertionError:
            pass  # the crash may hit while the last acks are in flight
        assert proc.proc is not None
        assert proc.proc.wait(60) == CRASH_EXIT_CODE
        assert f"crash point {point} reached" in proc.log_text()
        files = [p.name for p in (data / "c-0").iterdir()]
        suffix = SWAP_STEPS[point]
        if suffix is not None:
            assert any(f.endswith(suffix) for f in files), files
        proc.start()  # no crash point armed any more
        check_compacted_topic(proc.bootstrap, "c", expected)
        names = [p.name for p in (data / "c-0").iterdir()]
        assert not [n for n in names if n.endswith((".swap", ".cleaned"))], names
        # and cleaning completes after the restart
        wait_for(
            lambda: "cleaned log c-0" in proc.log_text().split("crash point")[-1], 30, what="a clean after restart"
        )
        check_compacted_topic(proc.bootstrap, "c", expected)
    finally:
        proc.kill()


@pytest.mark.parametrize("point", ["retention-before-delete", "retention-after-delete"])
def test_crash_during_retention(tmp_path: Path, point: str) -> None:
    data = tmp_path / "data"
    with crash_env(point):
        proc = broker(data).start()
    try:
        create_topic(proc.bootstrap, "r", **{"retention.bytes": str(2 << 20), "segment.bytes": str(1 << 20)})
        values = [os.urandom(1000) for _ in range(5000)]
        try:
            produce(proc.bootstrap, "r", [(b"%d" % i, v) for i, v in enumerate(values)], extra=CRASHING)
        except AssertionError:
            pass
        assert proc.proc is not None
        assert proc.proc.wait(60) == CRASH_EXIT_CODE
        proc.start()
        got = read_all(proc.bootstrap, "r")
        assert got, "everything lost"
        first = got[0][0]
        # a contiguous suffix of what was produced, byte for byte
        assert [o for o, _, _ in got] == list(range(first, first + len(got)))
        assert all(v == values[o] and k == b"%d" % o for o, k, v in got)
    finally:
        proc.kill()


def test_sigkill_at_random_points_while_cleaning(tmp_path: Path) -> None:
    rnd = random.Random(11)
    data = tmp_path / "data"
    proc = broker(data, **{"log.cleaner.io.max.bytes.per.second": str(1 << 20)}).start()
    try:
        create_topic(proc.bootstrap, "k", **COMPACT)
        recs = workload(8, keys=300, versions=6)
        expected = dict(recs)
        produce(proc.bootstrap, "k", recs)
        for _ in range(3):
            time.sleep(rnd.uniform(0.3, 2.5))
            proc.kill()
            proc.start()
            check_compacted_topic(proc.bootstrap, "k", expected)
    finally:
        proc.kill()
