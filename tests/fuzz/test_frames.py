"""Bad input on the wire: a real `kopfka serve` must answer with an error or close that one
connection, never crash, never wedge, and keep serving everybody else.

Hypothesis generates garbage frames, valid headers with garbage bodies, truncated frames and
mutated record batches inside well-formed Produce v9 requests (built with kio); targeted cases
cover size prefixes (negative, zero, > socket.request.max.bytes) and unknown API keys/versions
(ApiVersions with an unsupported version gets UNSUPPORTED_VERSION with response header v0,
KIP-511). After each group: the process is alive, a fresh connection gets ApiVersions
answered, and at the end a real client produces and consumes and the broker log holds no
unhandled errors.
"""

from __future__ import annotations

import io
import socket
import struct
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.index import load_request_schema
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32
from kopfka_process import KopfkaProcess

T = TypeVar("T")
MAX_REQUEST = 1024 * 1024  # socket.request.max.bytes for this module (default 100 MiB)
TOPIC = "fuzz-produce"
API_VERSIONS = 18
UNSUPPORTED_VERSION = 35
UNKNOWN_SERVER_ERROR = -1

FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ---------------------------------------------------------------- broker and wire helpers


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KopfkaProcess]:
    proc = KopfkaProcess(
        tmp_path_factory.mktemp("fuzz") / "data",
        overrides={"socket.request.max.bytes": str(MAX_REQUEST), "num.partitions": "1"},
    ).start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture(scope="module")
def supported(broker: KopfkaProcess) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) version, from the broker's own ApiVersions answer."""
    with connect(broker) as s:
        corr, body = call(s, ApiVersionsRequest(client_software_name="fuzz", client_software_version="1"), 7)
    resp = read(ApiVersionsResponse, body)
    assert corr == 7 and resp.error_code == 0
    return {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in resp.api_keys}


def connect(broker: KopfkaProcess, timeout: float = 5.0) -> socket.socket:
    s = socket.create_connection((broker.host, broker.port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def encode(entity: object, corr: int, client_id: str | None = "fuzz") -> bytes:
    """A size-prefixed request frame for a kio request entity (header v1 or v2 as required)."""
    buf = io.BytesIO()
    hdr_cls = type(entity).__header_schema__  # type: ignore[attr-defined]
    hdr = hdr_cls(
        request_api_key=i16(type(entity).__api_key__),  # type: ignore[attr-defined]
        request_api_version=i16(type(entity).__version__),  # type: ignore[attr-defined]
        correlation_id=i32(corr),
        client_id=client_id,
    )
    entity_writer(hdr_cls)(buf, hdr)
    entity_writer(type(entity))(buf, entity)
    payload = buf.getvalue()
    return struct.pack(">i", len(payload)) + payload


def raw_header(api_key: int, version: int, corr: int, flexible: bool, client_id: bytes = b"fuzz") -> bytes:
    h = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id
    return h + (b"\x00" if flexible else b"")


def is_flexible(api_key: int, version: int) -> bool:
    try:
        return bool(load_request_schema(api_key, version).__flexible__)
    except Exception:
        return False


def read(schema: type[T], data: bytes) -> T:
    """Parse a whole response body; trailing bytes would mean a framing mismatch."""
    entity, size = entity_reader(schema)(data, 0)
    assert size == len(data), f"{schema.__name__}: {len(data) - size} trailing bytes"
    return entity


def recv_exact(s: socket.socket, n: int) -> bytes | None:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


@dataclass
class Outcome:
    kind: str  # "closed" | "response" | "timeout"
    corr: int | None = None
    body: bytes = b""


def outcome(s: socket.socket, timeout: float) -> Outcome:
    """What the broker did with what we sent: answered, closed the connection, or neither."""
    s.settimeout(timeout)
    try:
        size_b = recv_exact(s, 4)
        if size_b is None:
            return Outcome("closed")
        (size,) = struct.unpack(">i", size_b)
        assert 4 <= size <= 64 * 1024 * 1024, f"broker sent a frame of size {size}"
        data = recv_exact(s, size)
        if data is None:
            return Outcome("closed")
        return Outcome("response", struct.unpack_from(">i", data)[0], data[4:])
    except (ConnectionResetError, BrokenPipeError):
        return Outcome("closed")
    except TimeoutError:
        return Outcome("timeout")


def call(s: socket.socket, entity: object, corr: int) -> tuple[int, bytes]:
    """Send a request, return (correlation id, body after the response header)."""
    s.sendall(encode(entity, corr))
    o = outcome(s, 10)
    assert o.kind == "response", f"no response to {type(entity).__name__}: {o.kind}"
    assert o.corr is not None
    body = o.body
    flexible_resp = type(entity).__flexible__ and type(entity).__api_key__ != API_VERSIONS  # type: ignore[attr-defined]
    if flexible_resp:
        assert body[0] == 0, "response header v1 with tagged fields"
        body = body[1:]
    return o.corr, body


def assert_serving(broker: KopfkaProcess) -> None:
    assert broker.alive, f"kopfka died:\n{broker.log_text()[-5000:]}"
    with connect(broker) as s:
        corr, body = call(s, ApiVersionsRequest(client_software_name="probe", client_software_version="1"), 99)
    assert corr == 99
    assert read(ApiVersionsResponse, body).error_code == 0


def send_and_judge(broker: KopfkaProcess, frame: bytes, *, wait: float) -> Outcome:
    with connect(broker) as s:
        try:
            s.sendall(frame)
        except (ConnectionResetError, BrokenPipeError):
            return Outcome("closed")
        return outcome(s, wait)


STATS: dict[str, Counter[str]] = {}


def tally(group: str, what: str) -> None:
    STATS.setdefault(group, Counter())[what] += 1


# ---------------------------------------------------------------- targeted cases


@pytest.mark.timeout(60)
def test_api_versions_unsupported_version_gets_v0_error_response(
    broker: KopfkaProcess, supported: dict[int, tuple[int, int]]
) -> None:
    """KIP-511: UNSUPPORTED_VERSION, response header v0 and an ApiVersionsResponse v0 body
    listing at least ApiVersions itself; the connection stays usable."""
    top = supported[API_VERSIONS][1]
    assert top >= 3
    for version in sorted({top + 1, top + 2, 127, 32767}):
        # a future version's body is unknown to the broker: here, two empty compact strings
        payload = raw_header(API_VERSIONS, version, 4242, True) + b"\x01\x01\x00"
        with connect(broker) as s:
            s.sendall(struct.pack(">i", len(payload)) + payload)
            o = outcome(s, 5)
            assert o.kind == "response", f"ApiVersions v{version}: {o.kind}"
            assert o.corr == 4242
            resp = read(ApiVersionsResponseV0, o.body)
            assert resp.error_code == UNSUPPORTED_VERSION, resp
            keys = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in resp.api_keys}
            assert API_VERSIONS in keys and keys[API_VERSIONS][0] == 0, keys
            # the same connection then negotiates normally
            corr, body = call(s, ApiVersionsRequest(client_software_name="fuzz", client_software_version="1"), 5)
            assert corr == 5
            assert read(ApiVersionsResponse, body).error_code == 0
    assert_serving(broker)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("api_key", "version"), [(3, 99), (0, 2), (1, 3), (9999, 0), (-1, 0), (300, 1), (32767, 32767)]
)
def test_unknown_api_key_or_version_closes_connection(api_key: int, version: int, broker: KopfkaProcess) -> None:
    """Kafka closes the connection on a request it cannot parse (unknown key, or a version
    outside what it supports; Produce v0-2 / Fetch v0-3 are gone in Kafka 4)."""
    frame_body = raw_header(api_key, version, 1, False) + b"\x00" * 16
    o = send_and_judge(broker, struct.pack(">i", len(frame_body)) + frame_body, wait=5)
    assert o.kind == "closed", o
    assert_serving(broker)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("size", [-1, -(2**31), MAX_REQUEST + 1, 100 * 1024 * 1024 + 1, 2**31 - 1])
def test_bad_size_prefix_closes_connection_at_once(size: int, broker: KopfkaProcess) -> None:
    """Negative or > socket.request.max.bytes: closed without waiting for (or buffering) a body."""
    t0 = time.monotonic()
    o = send_and_judge(broker, struct.pack(">i", size) + b"\x00" * 64, wait=5)
    assert o.kind == "closed", o
    assert time.monotonic() - t0 < 3
    assert_serving(broker)


@pytest.mark.timeout(60)
def test_size_at_limit_is_read_not_rejected(broker: KopfkaProcess) -> None:
    """A frame of exactly socket.request.max.bytes is within the limit: it is read and parsed
    (here: garbage after a Metadata header, so it is answered or closed - but not as too big)."""
    body = raw_header(3, 12, 77, True)
    body += b"\xff" * (MAX_REQUEST - len(body))
    before = broker.log_text().count("exceeds socket.request.max.bytes")
    o = send_and_judge(broker, struct.pack(">i", len(body)) + body, wait=10)
    assert o.kind in ("closed", "response"), o
    assert broker.log_text().count("exceeds socket.request.max.bytes") == before
    assert_serving(broker)


@pytest.mark.timeout(60)
def test_zero_size_and_tiny_frames_close(broker: KopfkaProcess) -> None:
    for body in (b"", b"\x00", b"\x00\x12", b"\x00\x12\x00\x03", b"\x00\x12\x00\x03\x00\x00\x00"):
        o = send_and_judge(broker, struct.pack(">i", len(body)) + body, wait=5)
        assert o.kind == "closed", (body, o)
    assert_serving(broker)


@pytest.mark.timeout(60)
def test_pipelined_requests_answered_in_order(broker: KopfkaProcess) -> None:
    """Many requests written at once come back in order (correlation ids)."""
    frames = b"".join(
        encode(ApiVersionsRequest(client_software_name="p", client_software_version="1"), i)
        if i % 2
        else encode(
            MetadataRequest(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False), i
        )
        for i in range(50)
    )
    with connect(broker) as s:
        s.sendall(frames)
        corrs = []
        for _ in range(50):
            o = outcome(s, 10)
            assert o.kind == "response", o
            corrs.append(o.corr)
    assert corrs == list(range(50))


# ---------------------------------------------------------------- hypothesis: frames


@pytest.mark.timeout(300)
@FUZZ
@given(body=st.binary(min_size=0, max_size=300))
def test_fuzz_garbage_frames(broker: KopfkaProcess, body: bytes) -> None:
    """Random bytes in a correct size prefix: answered or closed, process alive."""
    o = send_and_judge(broker, struct.pack(">i", len(body)) + body, wait=1.0)
    tally("garbage", o.kind)
    assert broker.alive, broker.log_text()[-5000:]
    if o.kind == "response" and len(body) >= 8:
        assert o.corr == struct.unpack_from(">i", body, 4)[0]


@pytest.mark.timeout(300)
@FUZZ
@given(data=st.data())
def test_fuzz_valid_header_garbage_body(
    broker: KopfkaProcess, supported: dict[int, tuple[int, int]], data: st.DataObject
) -> None:
    """A well-formed header for a supported API/version, then random bytes."""
    api_key = data.draw(st.sampled_from(sorted(supported)), label="api_key")
    lo, hi = supported[api_key]
    version = data.draw(st.integers(lo, hi), label="version")
    body = data.draw(st.binary(max_size=200), label="body")
    corr = data.draw(st.integers(0, 2**31 - 1), label="corr")
    frame = raw_header(api_key, version, corr, is_flexible(api_key, version)) + body
    o = send_and_judge(broker, struct.pack(">i", len(frame)) + frame, wait=1.5)
    tally("garbage-body", o.kind)
    assert broker.alive, broker.log_text()[-5000:]
    if o.kind == "response":
        assert o.corr == corr


def _valid_frames() -> list[bytes]:
    produce = ProduceRequest(
        transactional_id=None,
        acks=i16(1),
        timeout=timedelta(seconds=5),
        topic_data=(
            TopicProduceData(
                name=TopicName(TOPIC), partition_data=(PartitionProduceData(index=i32(0), records=make_batch(0, 3)),)
            ),
        ),
    )
    return [
        encode(ApiVersionsRequest(client_software_name="fuzz", client_software_version="1"), 1),
        encode(
            MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=TopicName(TOPIC)),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            ),
            2,
        ),
        encode(produce, 3),
    ]


@pytest.mark.timeout(300)
@FUZZ
@given(which=st.integers(0, 2), cut=st.floats(0.0, 0.999), how=st.sampled_from(["fix-size", "eof"]))
def test_fuzz_truncated_frames(broker: KopfkaProcess, which: int, cut: float, how: str) -> None:
    """A valid request cut short. fix-size: the size prefix says the short length (a complete
    frame with a truncated body) -> closed or an error answer, promptly. eof: the original size
    prefix, then the client half-closes -> the broker closes."""
    frame = _valid_frames()[which]
    payload = frame[4:]
    n = int(len(payload) * cut)
    with connect(broker) as s:
        if how == "fix-size":
            s.sendall(struct.pack(">i", n) + payload[:n])
        else:
            s.sendall(frame[: 4 + n])
            s.shutdown(socket.SHUT_WR)
        o = outcome(s, 5)
    tally(f"truncated-{how}", o.kind)
    assert o.kind != "timeout", f"broker neither answered nor closed ({how}, {n} of {len(payload)})"
    if how == "eof":
        assert o.kind == "closed"
    assert broker.alive, broker.log_text()[-5000:]


# ---------------------------------------------------------------- hypothesis: record batches


CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def make_batch(base_offset: int, n: int, codec: int = 0, *, seed: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    now = int(time.time() * 1000)
    for i in range(n):
        b.append(
            base_offset + i,
            timestamp=now + i,
            key=b"k%d" % (seed + i),
            value=b"value-%d-" % (seed + i) * (1 + i % 7),
            headers=[("h", b"%d" % i)],
        )
    return bytes(b.build())


def recrc(batch: bytearray) -> None:
    if len(batch) >= 21:
        struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))


# Offsets of the v2 batch header fields: (offset, struct format)
FIELDS = {
    "batchLength": (8, ">i"),
    "partitionLeaderEpoch": (12, ">i"),
    "magic": (16, ">b"),
    "attributes": (21, ">h"),
    "lastOffsetDelta": (23, ">i"),
    "baseTimestamp": (27, ">q"),
    "maxTimestamp": (35, ">q"),
    "producerId": (43, ">q"),
    "producerEpoch": (51, ">h"),
    "baseSequence": (53, ">i"),
    "recordsCount": (57, ">i"),
}
INTERESTING = [0, 1, -1, 2, 7, 8, 0x20, 0x10, 0x7F, 0xFF, 0x7FFF, -0x8000, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)]


@st.composite
def mutated_batch(draw: st.DrawFn) -> tuple[str, bytes]:
    codec = draw(st.sampled_from(sorted(CODECS)), label="codec")
    n = draw(st.integers(1, 6), label="records")
    batch = bytearray(make_batch(0, n, CODECS[codec], seed=draw(st.integers(0, 1000))))
    kind = draw(
        st.sampled_from(["flip", "flip-recrc", "field", "payload", "truncate", "extend", "two-batches"]), label="kind"
    )
    if kind in ("flip", "flip-recrc"):
        lo = 0 if kind == "flip" else 21
        for _ in range(draw(st.integers(1, 4))):
            pos = draw(st.integers(lo, len(batch) - 1))
            batch[pos] ^= draw(st.integers(1, 255))
        if kind == "flip-recrc":
            recrc(batch)
    elif kind == "field":
        name = draw(st.sampled_from(sorted(FIELDS)), label="field")
        off, fmt = FIELDS[name]
        size = struct.calcsize(fmt)
        bits = size * 8
        value = draw(st.one_of(st.sampled_from(INTERESTING), st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)))
        value = (value + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)
        struct.pack_into(fmt, batch, off, value)
        if draw(st.booleans(), label="recrc"):
            recrc(batch)
    elif kind == "payload":  # valid header, random records section (decompression/parsing)
        payload = draw(st.binary(max_size=400), label="payload")
        batch = batch[:61] + bytearray(payload)
        struct.pack_into(">i", batch, 8, len(batch) - 12)
        recrc(batch)
    elif kind == "truncate":
        cut = draw(st.integers(0, len(batch) - 1))
        batch = batch[:cut]
        if draw(st.booleans(), label="fix-length") and cut >= 12:
            struct.pack_into(">i", batch, 8, cut - 12)
            recrc(batch)
    elif kind == "extend":
        batch += draw(st.binary(min_size=1, max_size=100))
    else:  # a valid batch followed by a mutated copy
        second = bytearray(batch)
        pos = draw(st.integers(0, len(second) - 1))
        second[pos] ^= 0x5A
        if draw(st.booleans()):
            recrc(second)
        batch += second
    return f"{codec}/{kind}", bytes(batch)


@pytest.fixture(scope="module")
def produce_topic(broker: KopfkaProcess) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    # a valid raw Produce works before the fuzzing starts
    with connect(broker) as s:
        err = produce_raw(s, make_batch(0, 3), 1)
    assert err == 0
    return TOPIC


def produce_raw(s: socket.socket, records: bytes, corr: int) -> int:
    req = ProduceRequest(
        transactional_id=None,
        acks=i16(1),
        timeout=timedelta(seconds=5),
        topic_data=(
            TopicProduceData(
                name=TopicName(TOPIC), partition_data=(PartitionProduceData(index=i32(0), records=records),)
            ),
        ),
    )
    got_corr, body = call(s, req, corr)
    assert got_corr == corr
    resp = read(ProduceResponse, body)
    (topic,) = resp.responses
    (part,) = topic.partition_responses
    return int(part.error_code)


@pytest.mark.timeout(300)
@FUZZ
@given(case=mutated_batch())
def test_fuzz_record_batches_in_produce(broker: KopfkaProcess, produce_topic: str, case: tuple[str, bytes]) -> None:
    """Mutated v2 batches (bit flips with and without a fixed CRC, header fields, random
    compressed payloads, truncation, trailing bytes) in a well-formed Produce v9: an error code
    for the partition (never UNKNOWN_SERVER_ERROR) or a closed connection, or success when the
    mutation left a valid batch."""
    label, records = case
    frame_ok = True
    with connect(broker) as s:
        req = ProduceRequest(
            transactional_id=None,
            acks=i16(1),
            timeout=timedelta(seconds=5),
            topic_data=(
                TopicProduceData(
                    name=TopicName(produce_topic), partition_data=(PartitionProduceData(index=i32(0), records=records),)
                ),
            ),
        )
        s.sendall(encode(req, 11))
        o = outcome(s, 10)
        assert o.kind != "timeout", f"{label}: no answer to an acks=1 Produce"
        if o.kind == "response":
            assert o.corr == 11 and o.body[0] == 0
            resp = read(ProduceResponse, o.body[1:])
            err = int(resp.responses[0].partition_responses[0].error_code)
            tally("batches", f"{label.split('/')[1]}: error {err}")
            assert err != UNKNOWN_SERVER_ERROR, f"{label}: UNKNOWN_SERVER_ERROR (unhandled exception)"
        else:
            frame_ok = False
            tally("batches", f"{label.split('/')[1]}: closed")
    assert frame_ok or broker.alive
    assert broker.alive, broker.log_text()[-5000:]


# ---------------------------------------------------------------- malformed records, valid CRC


def zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        if not n:
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def record(
    offset_delta: int, key: bytes, value: bytes, *, value_len: int | None = None, n_headers: int = 0, extra: bytes = b""
) -> bytes:
    body = (
        b"\x00"
        + zigzag(0)
        + zigzag(offset_delta)
        + zigzag(len(key))
        + key
        + zigzag(len(value) if value_len is None else value_len)
        + value
        + zigzag(n_headers)
        + extra
    )
    return zigzag(len(body)) + body


def batch_of(records: list[bytes], codec: str) -> bytes:
    """A v2 batch around hand-made records, with a correct CRC and batch length."""
    import gzip

    import zstandard

    payload = b"".join(records)
    if codec == "gzip":
        payload = gzip.compress(payload)
    elif codec == "zstd":
        payload = zstandard.ZstdCompressor().compress(payload)
    ts = int(time.time() * 1000)
    after_crc = struct.pack(">hiqqqhii", CODECS[codec], len(records) - 1, ts, ts, -1, -1, -1, len(records)) + payload
    rest = struct.pack(">ibI", 0, 2, crc32c.crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(rest)) + rest


MALFORMED = {
    "negative-value-length": [record(0, b"k", b"value", value_len=-29)],
    "value-length-beyond-record": [record(0, b"k", b"v", value_len=40)],
    "headers-missing": [record(0, b"k", b"v", n_headers=5)],
    "trailing-bytes-in-record": [record(0, b"k", b"v", extra=b"\x00\x00\x00")],
    "second-record-cut": [record(0, b"k", b"v"), record(1, b"k", b"v")[:-3]],
}
CORRUPT_MESSAGE, INVALID_RECORD = 2, 87


@pytest.mark.timeout(60)
@pytest.mark.parametrize("codec", ["none", "gzip", "zstd"])
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_batch_with_unparseable_records_is_rejected(
    case: str, codec: str, broker: KopfkaProcess, produce_topic: str
) -> None:
    with connect(broker) as s:
        assert produce_raw(s, batch_of([record(0, b"k", b"v")], codec), 1) == 0  # control
        err = produce_raw(s, batch_of(MALFORMED[case], codec), 2)
    assert err in (CORRUPT_MESSAGE, INVALID_RECORD), f"{case}/{codec}: error code {err}"


# ---------------------------------------------------------------- afterwards


def _consume(bootstrap: str, topic: str, hi: int) -> tuple[int, int]:
    """Read [0, hi) with librdkafka: (records, last offset)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "after-fuzz-unused",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    n, last = 0, -1
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 15
        while last < hi - 1 and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                assert m.error() is None, f"{topic}: {m.error()}"
                assert m.offset() > last
                last = m.offset()
                n += 1
    finally:
        c.close()
    return n, last


def _high(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "after-fuzz-unused"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        c.close()


@pytest.mark.timeout(120)
def test_after_fuzzing_real_clients_work_and_log_is_clean(broker: KopfkaProcess) -> None:
    from confluent_kafka import Producer

    assert_serving(broker)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(100):
        p.produce("after-fuzz", b"v%d" % i, key=b"k%d" % i, partition=0)
    assert p.flush(30) == 0
    assert _consume(broker.bootstrap, "after-fuzz", 100) == (100, 99)
    for group, counts in sorted(STATS.items()):
        print(f"\n[fuzz {group}] " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    log = broker.log_text()
    bad = [line for line in log.splitlines() if "Unexpected error" in line or "Traceback" in line]
    assert not bad, "unhandled errors in the broker log:\n" + "\n".join(bad[:10]) + "\n" + log[-6000:]


@pytest.mark.timeout(120)
def test_everything_accepted_from_fuzzed_batches_is_readable(broker: KopfkaProcess, produce_topic: str) -> None:
    hi = _high(broker.bootstrap, produce_topic)
    n, last = _consume(broker.bootstrap, produce_topic, hi)
    print(f"\n[fuzz] {n} records accepted from fuzzed batches; read up to offset {last} of {hi}")
    assert last == hi - 1, f"consumer stalled at offset {last + 1} (high watermark {hi})"
