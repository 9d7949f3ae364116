"""Real clients round-trip ~100 MB each through `kopfka serve`, with every codec.

kafka-python, aiokafka, confluent-kafka and kcat each produce 100k records of mixed sizes
(mostly 10 B - 4 KiB, ~0.1% of them 64 - 512 KiB; ~97 MB per client) to five topics, one per
compression codec, with keys, headers and explicit create timestamps, then read them back with
`assign` (no consumer group). Every record is compared by a digest of (key, value, headers,
timestamp) against the deterministic (seeded) source, and offsets must be 0, 1, 2, ... in order.
Then a cross-client ring: records produced by one client are read identically by another.

Idempotent producing with confluent-kafka across a broker restart (forced reconnect) must yield
each sequence number exactly once, in order.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import math
import random
import shutil
import struct
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kopfka_process import KopfkaProcess

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
N_PER_CLIENT = 100_000
N_PER_TOPIC = N_PER_CLIENT // len(CODECS)
LARGE_P = 0.001
LARGE_MIN, LARGE_MAX = 64 * 1024, 512 * 1024
SMALL_MIN, SMALL_MAX = 10, 4 * 1024
POOL_HALF = 1 << 19
# Explicit create times: recent enough for the default retention and timestamp-skew rules.
BASE_TS = (int(time.time() * 1000) // 1000) * 1000 - 15 * 60 * 1000
CLIENTS = ("kafka-python", "aiokafka", "confluent", "kcat")

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")


# ---------------------------------------------------------------- deterministic data


@dataclass(frozen=True, slots=True)
class Rec:
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    ts: int


def _pool(rnd: random.Random, text_only: bool) -> bytes:
    """1 MiB: half incompressible, half compressible text; text_only: base64 + words (kcat)."""
    if text_only:
        noise = base64.b64encode(rnd.randbytes(POOL_HALF * 3 // 4))[:POOL_HALF]
    else:
        noise = rnd.randbytes(POOL_HALF)
    words = [bytes(rnd.choices(b"abcdefghijklmnopqrstuvwxyz", k=rnd.randint(2, 9))) for _ in range(64)]
    text = bytearray()
    while len(text) < POOL_HALF:
        text += b" ".join(rnd.choices(words, k=256)) + b". "
    return noise + bytes(text[:POOL_HALF])


def gen_records(client: str, codec: str, *, text_only: bool = False) -> Iterator[Rec]:
    """The N_PER_TOPIC records of one (client, codec) topic; pure function of its arguments."""
    rnd = random.Random(f"kopfka-roundtrip/{client}/{codec}")
    pool = _pool(rnd, text_only)
    log_min, log_max = math.log(SMALL_MIN), math.log(SMALL_MAX)
    for i in range(N_PER_TOPIC):
        if rnd.random() < LARGE_P:
            size = rnd.randint(LARGE_MIN, LARGE_MAX)
        elif i % 997 == 5:
            size = 0
        else:
            size = int(math.exp(rnd.uniform(log_min, log_max)))
        start = rnd.randint(0, len(pool) - size)
        value = pool[start : start + size]
        key = None if (i % 10 == 3 and not text_only) else b"k-%d" % i
        if text_only:
            headers: tuple[tuple[str, bytes], ...] = (("src", b"kcat"), ("codec", codec.encode()))
        else:
            headers = tuple((f"h{j}", rnd.randbytes(rnd.randint(0, 16))) for j in range(i % 4))
        ts = BASE_TS + 2 * i + rnd.randint(0, 3)  # non-monotonic create times now and then
        yield Rec(key, value, headers, ts)


def full_digest(
    key: bytes | None, value: bytes | None, headers: tuple[tuple[str, bytes], ...] | list, ts: int
) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    h.update(struct.pack(">qi", ts, -1 if key is None else len(key)))
    h.update(key or b"")
    h.update(struct.pack(">i", -1 if value is None else len(value)))
    h.update(value or b"")
    h.update(struct.pack(">i", len(headers)))
    for name, hv in headers:
        nb = name.encode() if isinstance(name, str) else name
        h.update(struct.pack(">i", len(nb)) + nb + struct.pack(">i", -1 if hv is None else len(hv)))
        h.update(hv or b"")
    return h.digest()


def kv_digest(key: bytes | None, value: bytes | None, ts: int) -> bytes:
    """Without headers (for readers that cannot carry binary headers)."""
    return full_digest(key, value, (), ts)


@dataclass
class Expected:
    """What one topic must contain: per record, the full digest and the key/value digest."""

    full: list[bytes] = field(default_factory=list)
    kv: list[bytes] = field(default_factory=list)
    nbytes: int = 0
    ts_range: tuple[int, int] | None = None  # kcat cannot set create times: [t0, t1] instead


EXPECTED: dict[str, Expected] = {}  # topic -> expected, filled by the producing tests


def topic_name(client: str, codec: str) -> str:
    return f"rt-{client}-{codec}"


@dataclass
class Checker:
    topic: str
    exp: Expected
    use_headers: bool = True
    count: int = 0
    nbytes: int = 0
    last_ts: int = -1

    def __call__(self, offset: int, key: bytes | None, value: bytes | None, headers: list, ts: int) -> None:
        j = self.count
        assert offset == j, f"{self.topic}: record #{j} came back at offset {offset}"
        assert j < len(self.exp.full), f"{self.topic}: extra record at offset {offset}"
        if self.exp.ts_range is not None:
            lo, hi = self.exp.ts_range
            assert lo <= ts <= hi, f"{self.topic}@{offset}: timestamp {ts} outside [{lo}, {hi}]"
            assert ts >= self.last_ts, f"{self.topic}@{offset}: timestamp went back {self.last_ts}->{ts}"
            self.last_ts = ts
            ts_for_digest = 0
        else:
            ts_for_digest = ts
        if self.use_headers:
            got = full_digest(key, value, headers, ts_for_digest)
            assert got == self.exp.full[j], (
                f"{self.topic}@{offset}: record differs (key={key[:20] if key else key!r}, "
                f"value len={None if value is None else len(value)}, "
                f"headers={len(headers)}, ts={ts})"
            )
        else:
            got = kv_digest(key, value, ts_for_digest)
            assert got == self.exp.kv[j], f"{self.topic}@{offset}: key/value/timestamp differ (ts={ts})"
        self.count += 1
        self.nbytes += len(value or b"")

    def done(self) -> None:
        assert self.count == len(self.exp.full), f"{self.topic}: read {self.count} of {len(self.exp.full)}"


def _expect(client: str, codec: str, *, text_only: bool = False) -> tuple[list[Rec], Expected]:
    """The records (materialised: slices of a 1 MiB pool are cheap) and their digests."""
    recs = list(gen_records(client, codec, text_only=text_only))
    exp = Expected()
    for r in recs:
        exp.full.append(full_digest(r.key, r.value, r.headers, 0 if text_only else r.ts))
        exp.kv.append(kv_digest(r.key, r.value, 0 if text_only else r.ts))
        exp.nbytes += len(r.value)
    return recs, exp


# ---------------------------------------------------------------- broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KopfkaProcess]:
    proc = KopfkaProcess(
        tmp_path_factory.mktemp("rt") / "data",
        overrides={"num.partitions": "1", "auto.create.topics.enable": "true"},
    ).start()
    try:
        yield proc
    finally:
        log = proc.log_text()
        proc.kill()
        assert "Traceback" not in log, log[-6000:]


# ---------------------------------------------------------------- per-client produce / consume


def confluent_produce(bootstrap: str, topic: str, codec: str, recs: list[Rec]) -> None:
    from confluent_kafka import Producer

    errors: list[str] = []
    offsets: list[int] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            offsets.append(msg.offset())  # type: ignore[attr-defined]

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "acks": "all",
            "enable.idempotence": True,
            "queue.buffering.max.kbytes": 64 * 1024,
        }
    )
    for r in recs:
        for _ in range(10_000):
            try:
                p.produce(
                    topic,
                    r.value,
                    key=r.key,
                    headers=list(r.headers),
                    timestamp=r.ts,
                    partition=0,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                p.poll(0.01)
        else:
            raise AssertionError("producer queue stayed full")
        p.poll(0)
    assert p.flush(120) == 0, "confluent producer did not drain"
    assert not errors, errors[:5]
    assert offsets == list(range(len(recs))), "delivery offsets not 0..n-1 in order"


def confluent_consume(bootstrap: str, topic: str, check: Callable[..., None], n: int) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "rt-unused",
            "enable.auto.commit": False,
            "fetch.max.bytes": 16 * 1024 * 1024,
            "max.partition.fetch.bytes": 4 * 1024 * 1024,
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = 0
        deadline = time.monotonic() + 120
        while got < n and time.monotonic() < deadline:
            for m in c.consume(2000, 1.0):
                assert m.error() is None, m.error()
                check(m.offset(), m.key(), m.value(), m.headers() or [], m.timestamp()[1])
                got += 1
    finally:
        c.close()


def kafka_python_produce(bootstrap: str, topic: str, codec: str, recs: list[Rec]) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        batch_size=512 * 1024,
        linger_ms=20,
        max_request_size=1_000_000,
        acks="all",
    )
    try:
        futures = [
            p.send(
                topic,
                value=r.value,
                key=r.key,
                headers=list(r.headers),
                partition=0,
                timestamp_ms=r.ts,
            )
            for r in recs
        ]
        p.flush(timeout=120)
        offsets = [f.get(timeout=30).offset for f in futures]
    finally:
        p.close(timeout=10)
    assert offsets == list(range(len(recs))), "delivery offsets not 0..n-1 in order"


def kafka_python_consume(bootstrap: str, topic: str, check: Callable[..., None], n: int) -> None:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_bytes=16 * 1024 * 1024,
        max_partition_fetch_bytes=4 * 1024 * 1024,
        max_poll_records=5000,
    )
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = 0
        deadline = time.monotonic() + 150
        while got < n and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=1000).values():
                for m in msgs:
                    check(m.offset, m.key, m.value, m.headers, m.timestamp)
                    got += 1
    finally:
        c.close()


def aiokafka_produce(bootstrap: str, topic: str, codec: str, recs: list[Rec]) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> list[int]:
        p = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            max_batch_size=512 * 1024,
            linger_ms=20,
            max_request_size=1_000_000,
            acks="all",
            enable_idempotence=True,
        )
        await p.start()
        try:
            futs = []
            for r in recs:
                futs.append(
                    await p.send(
                        topic,
                        value=r.value,
                        key=r.key,
                        partition=0,
                        timestamp_ms=r.ts,
                        headers=list(r.headers),
                    )
                )
            metas = await asyncio.wait_for(asyncio.gather(*futs), 120)
            return [m.offset for m in metas]
        finally:
            await p.stop()

    offsets = asyncio.run(run())
    assert offsets == list(range(len(recs))), "delivery offsets not 0..n-1 in order"


def aiokafka_consume(bootstrap: str, topic: str, check: Callable[..., None], n: int) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> None:
        c = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_bytes=16 * 1024 * 1024,
            max_partition_fetch_bytes=4 * 1024 * 1024,
        )
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            got = 0
            deadline = time.monotonic() + 150
            while got < n and time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=1000, max_records=5000)).values():
                    for m in msgs:
                        check(m.offset, m.key, m.value, list(m.headers), m.timestamp)
                        got += 1
        finally:
            await c.stop()

    asyncio.run(run())


KCAT_CODEC = {
    "none": ["-z", "none"],
    "gzip": ["-z", "gzip"],
    "snappy": ["-z", "snappy"],
    "lz4": ["-z", "lz4"],
    "zstd": ["-X", "compression.codec=zstd"],
}


def kcat_produce(bootstrap: str, topic: str, codec: str, recs: list[Rec], tmp: Path) -> None:
    src = tmp / f"{topic}.txt"
    with open(src, "wb") as f:
        for r in recs:
            assert r.key is not None and b"\t" not in r.key and b"\n" not in r.value and b"\t" not in r.value
            f.write(r.key + b"\t" + r.value + b"\n")
    hdrs: list[str] = []
    for name, hv in recs[0].headers:
        hdrs += ["-H", f"{name}={hv.decode()}"]
    cmd = [
        "kcat",
        "-P",
        "-b",
        bootstrap,
        "-t",
        topic,
        "-p",
        "0",
        "-K",
        "\t",
        *KCAT_CODEC[codec],
        *hdrs,
        "-X",
        "linger.ms=20",
        "-X",
        "batch.size=1000000",
        "-X",
        "acks=all",
        "-l",
        str(src),
    ]
    res = subprocess.run(cmd, capture_output=True, timeout=120)
    src.unlink()
    assert res.returncode == 0, res.stderr.decode(errors="replace")[-2000:]
    assert b"Delivery failed" not in res.stderr, res.stderr.decode(errors="replace")[-2000:]


def kcat_consume(bootstrap: str, topic: str, check: Callable[..., None], n: int, *, with_headers: bool) -> None:
    """Binary-safe: '%o %T %K %S[ %h]\\n' then exactly K key bytes and S value bytes."""
    fmt = "%o %T %K %S %h\\n%k%s" if with_headers else "%o %T %K %S\\n%k%s"
    res = subprocess.run(
        [
            "kcat",
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            fmt,
            "-X",
            "fetch.max.bytes=16000000",
        ],
        capture_output=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr.decode(errors="replace")[-2000:]
    out = memoryview(res.stdout)
    pos = 0
    while pos < len(out):
        nl = res.stdout.index(b"\n", pos)
        parts = bytes(out[pos:nl]).decode().split(" ", 4)
        offset, ts, klen, vlen = (int(x) for x in parts[:4])
        headers: list[tuple[str, bytes]] = []
        if with_headers and len(parts) > 4 and parts[4]:
            for kv in parts[4].split(","):
                name, _, hv = kv.partition("=")
                headers.append((name, hv.encode()))
        pos = nl + 1
        key = None if klen < 0 else bytes(out[pos : pos + klen])
        pos += max(klen, 0)
        value = None if vlen < 0 else bytes(out[pos : pos + vlen])
        pos += max(vlen, 0)
        check(offset, key, value, headers, ts)


# ---------------------------------------------------------------- the tests


def _consume(client: str, bootstrap: str, topic: str, check: Checker) -> None:
    n = len(check.exp.full)
    if client == "confluent":
        confluent_consume(bootstrap, topic, check, n)
    elif client == "kafka-python":
        kafka_python_consume(bootstrap, topic, check, n)
    elif client == "aiokafka":
        aiokafka_consume(bootstrap, topic, check, n)
    else:
        kcat_consume(bootstrap, topic, check, n, with_headers=check.use_headers)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("client", CLIENTS)
def test_client_roundtrip_all_codecs(
    client: str,
    broker: KopfkaProcess,
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    text_only = client == "kcat"
    total_bytes = 0
    t_prod = t_cons = 0.0
    for codec in CODECS:
        topic = topic_name(client, codec)
        recs, exp = _expect(client, codec, text_only=text_only)
        t0 = time.monotonic()
        if client == "confluent":
            confluent_produce(broker.bootstrap, topic, codec, recs)
        elif client == "kafka-python":
            kafka_python_produce(broker.bootstrap, topic, codec, recs)
        elif client == "aiokafka":
            aiokafka_produce(broker.bootstrap, topic, codec, recs)
        else:
            ts0 = int(time.time() * 1000) - 1
            kcat_produce(broker.bootstrap, topic, codec, recs, tmp_path)
            exp.ts_range = (ts0, int(time.time() * 1000) + 1)
        t1 = time.monotonic()
        del recs
        check = Checker(topic, exp)
        _consume(client, broker.bootstrap, topic, check)
        check.done()
        t2 = time.monotonic()
        EXPECTED[topic] = exp
        total_bytes += exp.nbytes
        t_prod += t1 - t0
        t_cons += t2 - t1
        print(
            f"\n[{client}/{codec}] {N_PER_TOPIC} records, {exp.nbytes / 1e6:.1f} MB: "
            f"produce {exp.nbytes / 1e6 / (t1 - t0):.1f} MB/s, "
            f"consume {exp.nbytes / 1e6 / (t2 - t1):.1f} MB/s"
        )
    mb = total_bytes / 1e6
    print(
        f"\n[{client}] total {N_PER_CLIENT} records, {mb:.1f} MB: produce {mb / t_prod:.1f} MB/s "
        f"({N_PER_CLIENT / t_prod:.0f} rec/s), consume {mb / t_cons:.1f} MB/s "
        f"({N_PER_CLIENT / t_cons:.0f} rec/s)"
    )
    record_property(f"{client}_produce_MBps", round(mb / t_prod, 1))
    record_property(f"{client}_consume_MBps", round(mb / t_cons, 1))
    assert 80e6 < total_bytes < 120e6, f"data set should be ~100 MB, is {mb:.1f} MB"


# reader -> (producer, codecs): every reader reads another client's records, every codec covered.
CROSS = {
    "kafka-python": ("confluent", ("gzip", "zstd")),
    "aiokafka": ("kafka-python", ("snappy", "none")),
    "confluent": ("kcat", ("lz4", "gzip")),
    "kcat": ("aiokafka", ("zstd", "snappy")),
}


@pytest.mark.timeout(200)
@pytest.mark.parametrize("reader", CLIENTS)
def test_cross_client_reads(reader: str, broker: KopfkaProcess) -> None:
    producer, codecs = CROSS[reader]
    for codec in codecs:
        topic = topic_name(producer, codec)
        if topic not in EXPECTED:
            pytest.skip(f"{topic} was not produced (its roundtrip test failed or was deselected)")
        # kcat's text output cannot carry binary headers: it checks offsets, keys and values.
        check = Checker(topic, EXPECTED[topic], use_headers=reader != "kcat")
        _consume(reader, broker.bootstrap, topic, check)
        check.done()


# ---------------------------------------------------------------- idempotence across reconnects


@pytest.mark.timeout(150)
@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_confluent_idempotent_produce_across_broker_restart(how: str, tmp_path: Path) -> None:
    """Produce sequence numbers continuously while the broker is restarted three times.

    librdkafka keeps retrying the in-flight batches on the new connection with the same
    (producerId, epoch, sequence); the broker must recognise them (after SIGKILL: from the
    producer state rebuilt out of the log) and not append them twice.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    overrides = {
        "num.partitions": "1",
        # quick re-registration after a restart (the default 9 s session is not under test here)
        "broker.session.timeout.ms": "2000",
        "broker.heartbeat.interval.ms": "300",
    }
    k = KopfkaProcess(tmp_path / "data", overrides=overrides).start()
    try:
        p = Producer(
            {
                "bootstrap.servers": k.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "batch.num.messages": 200,
                "message.timeout.ms": 90_000,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
                "max.in.flight.requests.per.connection": 5,
            }
        )
        acked: list[int] = []
        errors: list[str] = []

        def on_delivery(err: object, msg: object) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                acked.append(int(msg.value()))  # type: ignore[attr-defined]

        stop = threading.Event()
        sent = 0

        def produce_loop() -> None:  # <= ~20k records/s
            nonlocal sent
            while not stop.is_set() and sent < 1_000_000:
                try:
                    p.produce(
                        "idem",
                        b"%d" % sent,
                        key=b"%d" % (sent % 97),
                        partition=0,
                        on_delivery=on_delivery,
                    )
                    sent += 1
                except BufferError:
                    p.poll(0.005)
                if sent % 100 == 0:
                    p.poll(0)
                    time.sleep(0.005)

        t = threading.Thread(target=produce_loop, daemon=True)
        t.start()
        sent_at_restart: list[int] = []
        for _ in range(3):
            time.sleep(1.0)
            sent_at_restart.append(sent)
            if how == "sigterm":
                assert k.stop() == 0
            else:
                k.kill()
            time.sleep(0.3)
            k.start()
        deadline = time.monotonic() + 30  # until production resumed after the last restart
        while sent < sent_at_restart[-1] + 2000 and time.monotonic() < deadline:
            time.sleep(0.1)
        stop.set()
        t.join(10)
        assert p.flush(90) == 0, "producer did not drain"
        assert not errors, errors[:5]
        assert sent_at_restart[0] > 0 and sent > sent_at_restart[-1], (sent_at_restart, sent)
        assert acked == list(range(sent)), "delivery reports out of order or missing"

        c = Consumer(
            {
                "bootstrap.servers": k.bootstrap,
                "group.id": "idem-unused",
                "enable.auto.commit": False,
            }
        )
        seen: list[int] = []
        offsets: list[int] = []
        try:
            c.assign([TopicPartition("idem", 0, OFFSET_BEGINNING)])
            deadline = time.monotonic() + 60
            while len(seen) < sent and time.monotonic() < deadline:
                for m in c.consume(5000, 1.0):
                    assert m.error() is None, m.error()
                    seen.append(int(m.value()))
                    offsets.append(m.offset())
            for m in c.consume(5000, 1.0):  # duplicates would come after: drain a little more
                assert m.error() is None, m.error()
                seen.append(int(m.value()))
                offsets.append(m.offset())
        finally:
            c.close()
        dups = [s for s, n in Counter(seen).items() if n > 1]
        assert not dups, f"{len(dups)} duplicated sequence numbers, e.g. {dups[:5]}"
        assert seen == list(range(sent)), "records missing or out of order"
        assert offsets == list(range(sent))
        print(f"\n[idempotence/{how}] {sent} records, restarts after {sent_at_restart}: each exactly once, in order")
    finally:
        k.kill()
