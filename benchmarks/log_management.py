"""Log management benchmark (issue 4), in-process on the real storage engine:

  (1) compaction MB/s: a log of --compact-mb (default 1024) MiB of 1 KiB records whose keys
      take --distinct (default 10%) distinct values, cleaned once by the LogCleaner (both
      passes and the swap) with the default 128 MiB dedupe buffer
  (2) recovery MB/s: --recover-mb (default 2048) MiB of segments loaded by LogManager after an
      unclean shutdown with no recovery-point checkpoint, so every batch is CRC-checked and
      every index rebuilt (num.recovery.threads.per.data.dir=2)

Logs are built with append_as_follower from pre-encoded batches, so building is not measured.
Usage: python benchmarks/log_management.py [--compact-mb 1024] [--recover-mb 2048] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import tempfile
import time
from pathlib import Path

from kopfka.config.log_config import LogConfig
from kopfka.log.log_cleaner import CleanerConfig, LogCleaner
from kopfka.log.log_manager import LogManager
from kopfka.protocol.record_codec import Record, encode_batch
from kopfka.protocol.records import iter_batches, set_base_offset
from kopfka.storage.unified_log import UnifiedLog

RECORD = 1024
PER_BATCH = 16  # 16 KiB batches: the default producer batch.size


def config(**kw: object) -> LogConfig:
    values = dict(LogConfig.defaults().values)
    values.update({"segment.bytes": 128 << 20, "cleanup.policy": ["compact"], "min.cleanable.dirty.ratio": 0.0})
    values.update(kw)
    return LogConfig(values)


def build(ulog: UnifiedLog, mb: int, distinct: float, seed: int = 1) -> int:
    """Append `mb` MiB of keyed records; returns the number of records."""
    rnd = random.Random(seed)
    n = (mb << 20) // RECORD
    keys = max(1, int(n * distinct))
    value = rnd.randbytes(RECORD - 40)
    ts = int(time.time() * 1000)
    offset = 0
    while offset < n:
        count = min(PER_BATCH, n - offset)
        recs = [Record(i, ts, b"key-%09d" % rnd.randrange(keys), value) for i in range(count)]
        buf = bytearray(encode_batch(recs))
        for h in iter_batches(buf):
            set_base_offset(buf, h, offset)
        ulog.append_as_follower(bytes(buf))
        offset += count
    ulog.update_high_watermark(ulog.log_end_offset)
    ulog.roll()
    ulog.flush()
    return n


def bench_compaction(root: Path, mb: int, distinct: float) -> None:
    d = root / "compact" / "bench-0"
    ulog = UnifiedLog.load(d, config(), had_clean_shutdown=True)
    t0 = time.monotonic()
    n = build(ulog, mb, distinct)
    size = ulog.size_in_bytes
    print(
        f"built {size / 2**20:.0f} MiB, {n} records, {int(n * distinct)} distinct keys in {time.monotonic() - t0:.1f} s"
    )

    async def clean() -> LogCleaner:
        lc = LogCleaner(CleanerConfig({}), [d.parent], lambda: {("bench", 0): ulog})
        lc.startup(start_tasks=False)
        rounds = 0
        while await lc.try_clean_filthiest_log(0):
            rounds += 1
            cp = lc.manager.all_cleaner_checkpoints().get(("bench", 0), 0)
            if cp >= ulog.active_segment.base_offset:
                break
        await lc.shutdown()
        return lc

    t0 = time.monotonic()
    asyncio.run(clean())
    secs = time.monotonic() - t0
    print(
        f"compaction: {size / 2**20:.0f} MiB -> {ulog.size_in_bytes / 2**20:.1f} MiB in {secs:.1f} s = "
        f"{size / 2**20 / secs:.1f} MB/s"
    )
    ulog.close()


def bench_recovery(root: Path, mb: int) -> None:
    d = root / "recover"
    ulog = UnifiedLog.load(d / "bench-0", config(**{"cleanup.policy": ["delete"]}), had_clean_shutdown=True)
    t0 = time.monotonic()
    build(ulog, mb, 1.0)
    size = ulog.size_in_bytes
    ulog.close()
    print(f"built {size / 2**20:.0f} MiB for recovery in {time.monotonic() - t0:.1f} s")
    # an unclean shutdown with nothing checkpointed: every segment is above the recovery point
    for f in d.glob("*checkpoint*"):
        f.unlink()
    for f in (d / "bench-0").glob("*.snapshot"):
        f.unlink()
    lm = LogManager(
        [d], lambda _t: config(**{"cleanup.policy": ["delete"]}), server_config={"num.recovery.threads.per.data.dir": 2}
    )
    lm.lock_dirs()
    t0 = time.monotonic()
    lm.load_logs()
    secs = time.monotonic() - t0
    print(f"recovery: {size / 2**20:.0f} MiB in {secs:.1f} s = {size / 2**20 / secs:.1f} MB/s")
    lm.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--compact-mb", type=int, default=1024)
    ap.add_argument("--distinct", type=float, default=0.10)
    ap.add_argument("--recover-mb", type=int, default=2048)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kopfka-logbench-", dir=args.dir))
    try:
        bench_compaction(root, args.compact_mb, args.distinct)
        bench_recovery(root, args.recover_mb)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
