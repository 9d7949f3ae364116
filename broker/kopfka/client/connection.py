"""A minimal asyncio Kafka client connection for kopfka's own tools (CLI, operator).

It reuses the sans-IO protocol layer: requests are kio entities built from dicts, framed with
the right header version; responses are parsed with kio's readers.
"""

from __future__ import annotations

import asyncio
import io
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from kopfka.protocol.entity_builder import build

CLIENT_ID = "kopfka-cli"


class KafkaConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._correlation = 0
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, bootstrap: str, timeout: float = 10.0) -> KafkaConnection:
        host, _, port = bootstrap.strip().rpartition(":")
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host.strip("[]") or "127.0.0.1", int(port)), timeout
        )
        return cls(reader, writer)

    async def request(self, api_key: int, version: int, body: dict[str, Any], timeout: float = 30.0) -> Any:
        frame = await self.request_frame(api_key, version, body, timeout)
        resp_schema = load_response_schema(api_key, version)
        offset = 5 if (resp_schema.__flexible__ and api_key != 18) else 4
        body_obj, _ = entity_reader(resp_schema)(frame, offset)
        return body_obj

    async def request_frame(self, api_key: int, version: int, body: dict[str, Any], timeout: float = 30.0) -> bytes:
        """The raw response frame (correlation id first): for the few responses kio cannot read,
        e.g. a -1 timestamp where Kafka's schema has no null (DescribeTransactions)."""
        schema = load_request_schema(api_key, version)
        self._correlation += 1
        corr = self._correlation
        buf = io.BytesIO()
        buf.write(b"\0\0\0\0")
        if schema.__flexible__:
            entity_writer(RequestHeaderV2)(
                buf,
                RequestHeaderV2(
                    request_api_key=i16(api_key),
                    request_api_version=i16(version),
                    correlation_id=i32(corr),
                    client_id=CLIENT_ID,
                ),
            )
        else:
            entity_writer(RequestHeaderV1)(
                buf,
                RequestHeaderV1(
                    request_api_key=i16(api_key),
                    request_api_version=i16(version),
                    correlation_id=i32(corr),
                    client_id=CLIENT_ID,
                ),
            )
        entity_writer(schema)(buf, build(schema, body))
        data = buf.getbuffer()
        struct.pack_into(">i", data, 0, len(data) - 4)
        async with self._lock:
            self.writer.write(bytes(data))
            await self.writer.drain()
            size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), timeout))[0]
            frame = await asyncio.wait_for(self.reader.readexactly(size), timeout)
        (got,) = struct.unpack_from(">i", frame, 0)
        if got != corr:
            raise ConnectionError(f"correlation id mismatch: sent {corr}, got {got}")
        return frame

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass
