"""Compaction with a real client: many versions of keys plus tombstones; after cleaning the
topic holds exactly the latest value per key, and tombstones disappear only after
delete.retention.ms."""

from __future__ import annotations

import random
import time
from pathlib import Path

from tests.log.helpers import (
    broker,
    checkpoint_entries,
    create_topic,
    produce,
    read_all,
    wait_for,
)

DELETE_RETENTION_MS = 6000


def workload(
    seed: int, keys: int = 400, versions: int = 6, value_size: int = 600
) -> list[tuple[bytes | None, bytes | None]]:
    """Several versions of every key (interleaved), tombstones for every 7th key, then a
    unique-key filler large enough to roll the dirty data out of the active segment."""
    rnd = random.Random(seed)
    recs: list[tuple[bytes | None, bytes | None]] = []
    for v in range(versions):
        order = list(range(keys))
        rnd.shuffle(order)
        for k in order:
            recs.append((b"key-%d" % k, b"v%d-" % v + rnd.randbytes(value_size)))
    for k in range(0, keys, 7):
        recs.append((b"key-%d" % k, None))
    for i in range(1300):
        recs.append((b"filler-%d" % i, rnd.randbytes(1000)))
    return recs


def test_compaction_keeps_latest_and_expires_tombstones(tmp_path: Path) -> None:
    proc = broker(tmp_path / "data").start()
    try:
        topic = "compacted"
        create_topic(
            proc.bootstrap,
            topic,
            **{
                "cleanup.policy": "compact",
                "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": str(DELETE_RETENTION_MS),
                "segment.bytes": str(1024 * 1024),
            },
        )
        recs = workload(1)
        produce(proc.bootstrap, topic, recs)
        produced_at = time.monotonic()
        expected = {}
        for k, v in recs:
            expected[k] = v
        tombstoned = {k for k, v in expected.items() if v is None}
        assert tombstoned

        def compacted() -> list[tuple[int, bytes | None, bytes | None]] | None:
            got = read_all(proc.bootstrap, topic)
            keys = [k for _, k, _ in got]
            # compaction done for the dirty section once no key below the filler repeats
            main = [k for k in keys if k is not None and k.startswith(b"key-")]
            return got if len(main) == len(set(main)) else None

        got = wait_for(compacted, timeout=60, what="compaction")
        # before delete.retention.ms: every key once with its latest value, tombstones included
        assert time.monotonic() - produced_at < DELETE_RETENTION_MS / 1000, "too slow to observe tombstones"
        seen = {k: v for _, k, v in got}
        assert len(seen) == len(got)
        filler_in_active = {k for k in expected if k.startswith(b"filler-")} - set(seen)
        assert not filler_in_active
        assert seen == expected
        offsets = [o for o, _, _ in got]
        assert offsets == sorted(offsets)
        cp = checkpoint_entries(tmp_path / "data" / "cleaner-offset-checkpoint")
        assert cp.get((topic, 0), 0) > 0

        # after delete.retention.ms a later clean removes the tombstones
        def tombstones_gone() -> dict[bytes | None, bytes | None] | None:
            s = {k: v for _, k, v in read_all(proc.bootstrap, topic)}
            return s if not (tombstoned & set(s)) else None

        final = wait_for(tombstones_gone, timeout=60, interval=0.5, what="tombstone expiry")
        assert time.monotonic() - produced_at >= DELETE_RETENTION_MS / 1000
        assert final == {k: v for k, v in expected.items() if v is not None}
        assert "cleaned log compacted-0" in proc.log_text()
    finally:
        proc.kill()
