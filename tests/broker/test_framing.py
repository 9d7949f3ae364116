"""Sans-IO framing: frames come out whole and in order whatever the receive boundaries."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kopfka.protocol.framing import FrameDecoder, FrameError, FrameReceiver, FrameTooLarge


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def feed_receiver(rx: FrameReceiver, data: bytes, cuts: list[int]) -> list[bytes]:
    out: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(data):
        buf = rx.get_buffer()
        n = min(len(buf), len(data) - pos, max(1, cuts[i % len(cuts)]))
        buf[:n] = data[pos : pos + n]
        pos += n
        i += 1
        out.extend(bytes(f) for f in rx.buffer_updated(n))
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=3000) | st.integers(16_000, 200_000).map(lambda n: bytes([n % 251]) * n), max_size=8),
    st.lists(st.integers(1, 70_000), min_size=1, max_size=10),
)
def test_receiver_reassembles_any_split(payloads: list[bytes], cuts: list[int]) -> None:
    data = b"".join(frame(p) for p in payloads)
    assert feed_receiver(FrameReceiver(1 << 20), data, cuts) == payloads
    assert FrameDecoder(1 << 20).feed(data) == payloads


def test_limits() -> None:
    with pytest.raises(FrameTooLarge):
        feed_receiver(FrameReceiver(100), frame(b"x" * 101), [1000])
    with pytest.raises(FrameError):
        feed_receiver(FrameReceiver(100), struct.pack(">i", -5), [1000])


def test_trailing_bytes_after_the_body_are_tolerated() -> None:
    """librdkafka 2.16's all-topics MetadataRequest v13, captured on the wire: Kafka ignores the
    bytes its schema does not have, so must we (the client's list_topics() depends on it)."""
    from kopfka.protocol.framing import decode_request

    frame = bytes.fromhex("0003000d00000003000772646b61666b610000000000010000")
    req = decode_request(frame)
    assert req.header.api_key == 3 and req.header.api_version == 13 and req.header.client_id == "rdkafka"
    assert req.body is not None and req.body.topics is None


def test_list_topics_with_librdkafka(kopfka) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kopfka.bootstrap})
    md = admin.list_topics(timeout=10)
    assert 1 in md.brokers
