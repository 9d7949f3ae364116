"""Crash tests against a real `kopfka serve`: SIGKILL, torn tails, lost and corrupt indexes.

- SIGKILL while a producer streams (acks=1 and acks=-1): after the restart every record the
  producer saw acknowledged is readable at its acknowledged offset, and the offsets are dense.
- A torn tail (the active `.log` truncated mid-batch) or garbage after the last batch (random
  bytes, zeros, a batch with a bad CRC), made while the broker is down after a SIGKILL: the
  broker starts, truncates the segment to the last valid batch, serves every complete batch, and
  appends continue at the next offset.
- Deleted or corrupted (random bytes) `.index` / `.timeindex` files: the broker starts, rebuilds
  them, and reads by offset (seeks to arbitrary offsets) and by timestamp (offsets_for_times)
  are right.
"""

from __future__ import annotations

import bisect
import hashlib
import random
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kopfka_process import KopfkaProcess

SEGMENT_BYTES = 1024 * 1024  # the smallest Kafka accepts: several segments per test
BASE_TS = (int(time.time() * 1000) // 1000) * 1000 - 10 * 60 * 1000
BATCH_HEADER = 61


def _digest(value: bytes | None) -> bytes:
    return hashlib.blake2b(value or b"", digest_size=16).digest()


# A restarted combined node re-registers its broker; a short session keeps restarts quick
# (see test_clean_restart_reregisters_at_once for the default-config behaviour).
FAST_SESSION = {"broker.session.timeout.ms": "2000", "broker.heartbeat.interval.ms": "300"}


def start(data_dir: Path, **extra: str) -> KopfkaProcess:
    overrides = {
        "num.partitions": "1",
        "log.segment.bytes": str(SEGMENT_BYTES),
        **FAST_SESSION,
        **extra,
    }
    return KopfkaProcess(data_dir, overrides=overrides).start()


def produce_all(
    bootstrap: str, topic: str, values: list[bytes], *, ts: list[int] | None = None, batch: int = 50
) -> list[int]:
    """Produce in order with acks=all; returns the acknowledged offsets."""
    acked: dict[int, int] = {}
    errors: list[str] = []

    def cb(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[int(msg.key())] = msg.offset()  # type: ignore[attr-defined]

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.num.messages": batch,
            "enable.idempotence": True,
        }
    )
    for i, v in enumerate(values):
        for _ in range(1000):
            try:
                p.produce(
                    topic,
                    v,
                    key=b"%d" % i,
                    partition=0,
                    on_delivery=cb,
                    timestamp=ts[i] if ts else 0,
                )
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:5]
    return [acked[i] for i in range(len(values))]


def read_range(
    bootstrap: str,
    topic: str,
    start_offset: int | None = None,
    limit: int | None = None,
    timeout: float = 60,
) -> list[tuple[int, bytes, int]]:
    """(offset, value, timestamp) from start (default: beginning) to the end offset."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "crash-unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    out: list[tuple[int, bytes, int]] = []
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        begin = OFFSET_BEGINNING if start_offset is None else start_offset
        c.assign([TopicPartition(topic, 0, begin)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (out and out[-1][0] >= high - 1) or (limit is not None and len(out) >= limit):
                break
            for m in c.consume(1000, 0.5):
                if m.error() is not None:
                    if m.error().code() == -191:  # _PARTITION_EOF
                        if not out or out[-1][0] >= high - 1 or high == 0:
                            return out
                        continue
                    raise AssertionError(m.error())
                out.append((m.offset(), m.value(), m.timestamp()[1]))
        return out
    finally:
        c.close()


def end_offset(bootstrap: str, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-unused"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


@dataclass
class Batch:
    pos: int
    base_offset: int
    size: int  # whole batch incl. the 12-byte offset+length prefix
    last_offset: int


def parse_batches(path: Path) -> list[Batch]:
    data = path.read_bytes()
    out: list[Batch] = []
    pos = 0
    while pos + BATCH_HEADER <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if length <= 0 or pos + 12 + length > len(data):
            break
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append(Batch(pos, base, 12 + length, base + last_delta))
        pos += 12 + length
    assert pos == len(data), f"{path}: {len(data) - pos} unparsed bytes at the tail before the test"
    return out


def partition_dir(k: KopfkaProcess, topic: str) -> Path:
    d = k.data_dir / f"{topic}-0"
    assert d.is_dir(), sorted(p.name for p in k.data_dir.iterdir())
    return d


def segments(d: Path) -> list[Path]:
    return sorted(d.glob("*.log"))


def assert_no_tracebacks(k: KopfkaProcess) -> None:
    log = k.log_text()
    assert "Traceback" not in log, log[-5000:]


# ---------------------------------------------------------------- restart latency


@pytest.mark.timeout(60)
def test_clean_restart_reregisters_at_once(tmp_path: Path) -> None:
    k = KopfkaProcess(tmp_path / "data").start()  # default broker.session.timeout.ms = 9000
    try:
        time.sleep(1.0)
        assert k.stop() == 0
        t0 = time.monotonic()
        k.start()
        took = time.monotonic() - t0
        assert "Broker registration failed" not in k.log_text()
        assert took < 5.0, f"clean restart took {took:.1f} s"
    finally:
        k.kill()


# ---------------------------------------------------------------- SIGKILL during produce


def stream_then_kill(k: KopfkaProcess, acks: str, seed: str, acked: dict[int, bytes]) -> int:
    """Produce mixed-size records for 2.5 s, SIGKILL the broker mid-stream; note the acked."""
    rnd = random.Random(seed)
    pool = rnd.randbytes(1 << 18)
    lock = threading.Lock()
    dup_acks: list[int] = []

    def cb(err: object, msg: object) -> None:
        if err is None:
            d = _digest(msg.value())  # type: ignore[attr-defined]
            with lock:
                if msg.offset() in acked:  # type: ignore[attr-defined]
                    dup_acks.append(msg.offset())  # type: ignore[attr-defined]
                acked[msg.offset()] = d  # type: ignore[attr-defined]

    p = Producer(
        {
            "bootstrap.servers": k.bootstrap,
            "acks": acks,
            "linger.ms": 2,
            "batch.num.messages": 100,
            "enable.idempotence": False,
            "message.timeout.ms": 5000,
        }
    )
    stop = threading.Event()
    sent = 0

    def loop() -> None:
        nonlocal sent
        while not stop.is_set():
            size = rnd.choice((10, 100, 1000, 5000, 20_000))
            off = rnd.randint(0, len(pool) - size)
            try:
                p.produce("crash", pool[off : off + size], partition=0, on_delivery=cb)
                sent += 1
            except BufferError:
                p.poll(0.005)
            if sent % 50 == 0:
                p.poll(0)
                time.sleep(0.001)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    time.sleep(2.5)
    k.kill()  # mid-stream: batches in flight, partially written, unflushed
    stop.set()
    t.join(10)
    p.purge()
    p.flush(10)
    assert not dup_acks, f"two records acknowledged at the same offsets {dup_acks[:5]}"
    return sent


@pytest.mark.timeout(120)
@pytest.mark.parametrize("acks", ["1", "-1"])
def test_sigkill_during_produce_keeps_every_acked_record(acks: str, tmp_path: Path) -> None:
    k = start(tmp_path / "data")
    acked: dict[int, bytes] = {}  # offset -> digest of the acknowledged value
    rounds = 2
    try:
        for rnd_no in range(rounds):
            before = len(acked)
            sent = stream_then_kill(k, acks, f"sigkill/{acks}/{rnd_no}", acked)
            assert len(acked) - before > 1000, (len(acked), before, sent)
            assert not (k.data_dir / ".kafka_cleanshutdown").exists()
            k.start()
        # every acknowledged record is there, at its offset; offsets dense from 0
        got = read_range(k.bootstrap, "crash")
        assert [o for o, _, _ in got] == list(range(len(got))), "offsets not dense"
        by_offset = {o: _digest(v) for o, v, _ in got}
        missing = [o for o in acked if o not in by_offset]
        assert not missing, f"{len(missing)} acked records lost, e.g. offsets {sorted(missing)[:5]}"
        wrong = [o for o, d in acked.items() if by_offset[o] != d]
        assert not wrong, f"{len(wrong)} acked offsets hold other data, e.g. {sorted(wrong)[:5]}"
        print(
            f"\n[sigkill acks={acks}] {len(acked)} acked records over {rounds} kills, "
            f"{len(got)} in the log after recovery"
        )
        assert_no_tracebacks(k)
    finally:
        k.kill()


# ---------------------------------------------------------------- torn tails


@pytest.fixture
def filled(tmp_path: Path) -> Iterator[tuple[KopfkaProcess, list[bytes]]]:
    """A broker SIGKILLed after 3,000 acked records (~1.6 MB, 2 segments) in topic 'torn'."""
    rnd = random.Random("torn")
    values = [rnd.randbytes(rnd.randint(50, 1000)) for _ in range(3000)]
    k = start(tmp_path / "data")
    try:
        assert produce_all(k.bootstrap, "torn", values, batch=10) == list(range(len(values)))
        k.kill()
        yield k, values
    finally:
        k.kill()


TORN_MODES = [
    "cut-mid-last-batch",
    "cut-in-header",
    "cut-three-batches-back",
    "garbage-random",
    "garbage-zeros",
    "garbage-bad-crc-batch",
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", TORN_MODES)
def test_torn_tail_truncated_to_last_valid_batch(mode: str, filled: tuple[KopfkaProcess, list[bytes]]) -> None:
    k, values = filled
    d = partition_dir(k, "torn")
    segs = segments(d)
    assert len(segs) >= 2, "expected the data to span several segments"
    active = segs[-1]
    batches = parse_batches(active)
    assert len(batches) >= 5
    assert batches[-1].last_offset == len(values) - 1
    raw = active.read_bytes()
    rnd = random.Random(mode)
    if mode.startswith("cut"):
        victim = {"cut-mid-last-batch": -1, "cut-in-header": -1, "cut-three-batches-back": -3}[mode]
        b = batches[victim]
        cut = b.pos + (30 if mode == "cut-in-header" else b.size // 2)
        with open(active, "r+b") as f:
            f.truncate(cut)
        valid_end = b.pos
        next_offset = b.base_offset
    else:
        if mode == "garbage-random":
            tail = rnd.randbytes(4096)
        elif mode == "garbage-zeros":
            tail = bytes(8192)
        else:  # a copy of the last batch as the next one, one payload byte flipped: CRC mismatch
            last = bytearray(raw[batches[-1].pos :])
            struct.pack_into(">q", last, 0, len(values))
            last[BATCH_HEADER + 5] ^= 0xFF
            tail = bytes(last)
        with open(active, "ab") as f:
            f.write(tail)
        valid_end = len(raw)
        next_offset = len(values)

    k.start()
    assert k.alive
    low, high = end_offset(k.bootstrap, "torn")
    assert (low, high) == (0, next_offset), "log end offset is not the end of the last valid batch"
    assert active.stat().st_size == valid_end, "segment not truncated to its last valid batch"
    got = read_range(k.bootstrap, "torn")
    assert [o for o, _, _ in got] == list(range(next_offset))
    assert [v for _, v, _ in got] == values[:next_offset]

    # appends continue at the right offset, and survive a clean restart
    more = [b"after-recovery-%d" % i for i in range(10)]
    assert produce_all(k.bootstrap, "torn", more) == list(range(next_offset, next_offset + 10))
    assert k.stop() == 0
    k.start()
    got = read_range(k.bootstrap, "torn")
    assert [v for _, v, _ in got] == values[:next_offset] + more
    assert [o for o, _, _ in got] == list(range(next_offset + 10))
    assert_no_tracebacks(k)


# ---------------------------------------------------------------- lost / corrupt indexes


N_IDX = 6000


@pytest.fixture
def indexed(tmp_path: Path) -> Iterator[tuple[KopfkaProcess, list[bytes], list[int]]]:
    """~4.5 MB in topic 'idx' over 4-5 segments, timestamps BASE_TS + 10*i (+0..4 jitter)."""
    rnd = random.Random("idx")
    values = [rnd.randbytes(rnd.randint(200, 1300)) for _ in range(N_IDX)]
    ts = [BASE_TS + 10 * i + rnd.randint(0, 4) for i in range(N_IDX)]
    k = start(tmp_path / "data")
    try:
        assert produce_all(k.bootstrap, "idx", values, ts=ts) == list(range(N_IDX))
        yield k, values, ts
    finally:
        k.kill()


def check_reads(k: KopfkaProcess, values: list[bytes], ts: list[int]) -> None:
    rnd = random.Random("seeks")
    d = partition_dir(k, "idx")
    bases = [int(p.stem) for p in segments(d)]
    targets = sorted(
        {
            0,
            N_IDX - 1,
            *bases,
            *(b - 1 for b in bases if b),
            *(rnd.randrange(N_IDX) for _ in range(40)),
        }
    )
    c = Consumer(
        {
            "bootstrap.servers": k.bootstrap,
            "group.id": "idx-unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5,  # re-assigning waits for the in-flight fetch: keep it short
        }
    )
    try:
        for off in targets:
            c.assign([TopicPartition("idx", 0, off)])
            msgs: list = []
            deadline = time.monotonic() + 10
            while not msgs and time.monotonic() < deadline:
                msgs = [m for m in c.consume(1, 0.5) if m.error() is None]
            assert msgs, f"nothing read at offset {off}"
            assert msgs[0].offset() == off and msgs[0].value() == values[off], f"seek to {off}"
        c.unassign()  # requests queue behind a long-poll Fetch on the same connection
        # by timestamp: the first offset whose timestamp >= the query
        queries = [
            ts[0] - 1000,
            *(ts[i] for i in targets),
            *(ts[i] - 1 for i in targets),
            ts[-1] + 1,
        ]
        for q in queries:
            tps = c.offsets_for_times([TopicPartition("idx", 0, q)], timeout=10)
            expected = bisect.bisect_left(ts, q)
            expected = -1 if expected == len(ts) else expected
            assert tps[0].error is None, tps[0].error
            assert tps[0].offset == expected, f"offsets_for_times({q}): {tps[0].offset} != {expected}"
    finally:
        c.close()


# (damage, shutdown). A random .timeindex left by a *clean* shutdown is not here: like Kafka's,
# the broker's cheap sanity check (length, first/last entry) cannot tell every random file from
# a valid one, and a clean shutdown skips recovery; the torn-timeindex case covers what it can.
INDEX_DAMAGE = [
    ("delete-index", "sigkill"),
    ("delete-index", "clean"),
    ("random-index", "sigkill"),
    ("random-index", "clean"),
    ("delete-timeindex", "sigkill"),
    ("delete-timeindex", "clean"),
    ("random-timeindex", "sigkill"),
    ("torn-timeindex", "clean"),
    ("random-both", "sigkill"),
    ("random-both", "clean"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("damage", "shutdown"), INDEX_DAMAGE)
def test_lost_or_corrupt_index_rebuilt(
    damage: str, shutdown: str, indexed: tuple[KopfkaProcess, list[bytes], list[int]]
) -> None:
    k, values, ts = indexed
    check_reads(k, values, ts)  # sanity: right before the damage
    if shutdown == "sigkill":
        k.kill()
    else:
        assert k.stop() == 0
    d = partition_dir(k, "idx")
    assert len(segments(d)) >= 4
    rnd = random.Random(f"{damage}/{shutdown}")
    what, _, which = damage.partition("-")
    suffixes = {"index": [".index"], "timeindex": [".timeindex"], "both": [".index", ".timeindex"]}
    for seg in segments(d):
        for suffix in suffixes[which]:
            f = seg.with_suffix(suffix)
            if what == "delete":
                f.unlink()
            elif what == "torn":  # a partial last entry
                with open(f, "r+b") as fh:
                    fh.truncate(max(f.stat().st_size - 5, 7))
            else:
                size = f.stat().st_size if f.exists() else 0
                f.write_bytes(rnd.randbytes(max(size, 240)))
    k.start()
    assert k.alive
    assert end_offset(k.bootstrap, "idx") == (0, N_IDX)
    check_reads(k, values, ts)
    for seg in segments(d)[:-1]:  # rebuilt indexes of the full segments hold entries again
        assert seg.with_suffix(".index").stat().st_size > 0
        assert seg.with_suffix(".timeindex").stat().st_size > 0
    # appends keep working after the rebuild
    assert produce_all(k.bootstrap, "idx", [b"x"], ts=[ts[-1] + 10]) == [N_IDX]
    assert_no_tracebacks(k)
