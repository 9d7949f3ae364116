"""Sans-IO framing: bytes in, request objects out; response objects in, bytes out.

Like h11, nothing here touches a socket. `FrameDecoder` splits a byte stream into
size-delimited frames and enforces socket.request.max.bytes; `decode_request` reads the
request header and body with kio; `encode_response` frames a response with the right header
version (v0 for ApiVersions always, KIP-511).
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer

from kopfka.protocol.api_versions import API_VERSIONS_KEY, is_supported
from kopfka.protocol.produce_request import decode_produce_request
from kopfka.protocol.request_guard import check_body
from kopfka.protocol.schemas import load_request_schema, load_response_schema

PRODUCE_KEY = 0


class FrameError(Exception):
    """The stream is not a valid sequence of Kafka frames: the connection must close."""


class FrameTooLarge(FrameError):
    pass


class FrameDecoder:
    """Incremental decoder of 4-byte big-endian size-prefixed frames."""

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        frames = []
        while len(self._buf) >= 4:
            (size,) = struct.unpack_from(">i", self._buf, 0)
            if size < 0:
                raise FrameError(f"negative frame size {size}")
            if size > self.max_frame_bytes:
                raise FrameTooLarge(f"frame of {size} bytes exceeds socket.request.max.bytes {self.max_frame_bytes}")
            if len(self._buf) < 4 + size:
                break
            frames.append(bytes(self._buf[4 : 4 + size]))
            del self._buf[: 4 + size]
        return frames


class FrameReceiver:
    """Zero-copy frame assembly for a buffered receiver (asyncio.BufferedProtocol style).

    The socket layer asks `get_buffer()` for where to receive into and reports the byte count
    to `buffer_updated(n)`, which returns the frames completed. Small frames are parsed out of
    a reusable scratch buffer; a large frame gets its own bytearray and the rest of it is
    received straight into it, so a 1 MiB produce request is never copied in user space.
    """

    SCRATCH = 64 * 1024
    LARGE = 16 * 1024

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._scratch = bytearray(self.SCRATCH)
        self._len = 0
        self._frame: bytearray | None = None
        self._filled = 0

    def get_buffer(self) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._filled :]
        return memoryview(self._scratch)[self._len :]

    def buffer_updated(self, nbytes: int) -> list[bytes | bytearray]:
        if self._frame is not None:
            self._filled += nbytes
            if self._filled < len(self._frame):
                return []
            frame, self._frame = self._frame, None
            return [frame]
        self._len += nbytes
        out: list[bytes | bytearray] = []
        buf, pos, end = self._scratch, 0, self._len
        while end - pos >= 4:
            (size,) = struct.unpack_from(">i", buf, pos)
            if size < 0:
                raise FrameError(f"negative frame size {size}")
            if size > self.max_frame_bytes:
                raise FrameTooLarge(f"frame of {size} bytes exceeds socket.request.max.bytes {self.max_frame_bytes}")
            if end - pos - 4 >= size:
                out.append(bytes(buf[pos + 4 : pos + 4 + size]))
                pos += 4 + size
                continue
            if size >= self.LARGE:
                frame = bytearray(size)
                have = end - pos - 4
                frame[:have] = buf[pos + 4 : end]
                self._frame, self._filled = frame, have
                pos = end
            break
        if pos:
            remaining = end - pos
            buf[:remaining] = buf[pos:end]
            self._len = remaining
        return out


@dataclass(frozen=True)
class RequestHeader:
    """The request header fields kopfka uses, and the header's size in the frame."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_size: int


@dataclass
class DecodedRequest:
    """A decoded request frame: header, kio body (None for an unsupported version) and frame size."""

    header: RequestHeader
    body: Any | None  # the kio request entity; None when the version is unsupported
    frame_size: int


_SHORT_HEADER = struct.Struct(">hhi")


def peek_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    if len(frame) < _SHORT_HEADER.size:
        raise FrameError("request shorter than its header")
    api_key, api_version, correlation_id = _SHORT_HEADER.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def decode_request(frame: bytes | bytearray | memoryview) -> DecodedRequest:
    """Decode header and body. Unsupported (api_key, version) gives body=None, not an error.

    Raises FrameError when the bytes do not parse: Kafka closes the connection then.
    """
    api_key, api_version, correlation_id = peek_header(frame)
    if not is_supported(api_key, api_version):
        # Only the v1 header fields are trusted here; enough to answer UNSUPPORTED_VERSION.
        client_id = None
        try:
            hdr1, size = entity_reader(RequestHeaderV1)(frame, 0)
            client_id = hdr1.client_id
        except Exception:
            size = _SHORT_HEADER.size
        return DecodedRequest(RequestHeader(api_key, api_version, correlation_id, client_id, size), None, len(frame))
    schema = load_request_schema(api_key, api_version)
    header_cls: type[Any] = RequestHeaderV2 if schema.__flexible__ else RequestHeaderV1
    # kio's Rust reader only takes read-only buffers; the writable frame stays for Produce
    readonly = memoryview(frame).toreadonly() if isinstance(frame, bytearray) else frame
    try:
        hdr, hsize = entity_reader(header_cls)(readonly, 0)
        if api_key == PRODUCE_KEY:
            # hot path: records stay views into the frame (writable when the frame is ours)
            body: Any = decode_produce_request(memoryview(frame), hsize, api_version)
        else:
            check_body(schema, readonly, hsize)  # kio pre-allocates declared counts: never let it abort us
            body, _ = entity_reader(schema)(readonly, hsize)
    except Exception as exc:  # kio raises assorted errors on malformed input
        raise FrameError(f"cannot parse {schema.__name__} v{api_version}: {exc}") from exc
    # Trailing bytes after the body are ignored, as Kafka's parser does: librdkafka, for one,
    # sends Metadata v13 with a field the schema dropped, and real brokers accept it.
    header = RequestHeader(api_key, api_version, correlation_id, hdr.client_id, hsize)
    return DecodedRequest(header, body, len(frame))


def response_header_bytes(api_key: int, api_version: int, correlation_id: int) -> bytes:
    """Header v1 (with empty tagged fields) for flexible responses, v0 otherwise."""
    if api_key != API_VERSIONS_KEY and load_response_schema(api_key, api_version).__flexible__:
        return struct.pack(">ib", correlation_id, 0)
    return struct.pack(">i", correlation_id)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """Frame a kio response entity: size prefix + header + body."""
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    buf.write(response_header_bytes(api_key, api_version, correlation_id))
    entity_writer(type(body))(buf, body)
    out = buf.getbuffer()
    struct.pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)


__all__ = [
    "DecodedRequest",
    "FrameDecoder",
    "FrameError",
    "FrameReceiver",
    "FrameTooLarge",
    "RequestHeader",
    "ResponseHeaderV0",
    "ResponseHeaderV1",
    "decode_request",
    "encode_response",
    "peek_header",
]
