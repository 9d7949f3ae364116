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
        buf[:n] = data[pos:pos + n]
        pos += n
        i += 1
        out.extend(bytes(f) for f in rx.buffer_updated(n))
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=3000) | st.integers(16_000, 200_000).map(lambda n: bytes([n % 251]) * n), max_size=8),
       st.lists(st.integers(1, 70_000), min_size=1, max_size=10))
def test_receiver_reassembles_any_split(payloads: list[bytes], cuts: list[int]) -> None:
    data = b"".join(frame(p) for p in payloads)
    assert feed_receiver(FrameReceiver(1 << 20), data, cuts) == payloads
    assert FrameDecoder(1 << 20).feed(data) == payloads


def test_limits() -> None:
    with pytest.raises(FrameTooLarge):
        feed_receiver(FrameReceiver(100), frame(b"x" * 101), [1000])
    with pytest.raises(FrameError):
        feed_receiver(FrameReceiver(100), struct.pack(">i", -5), [1000])
