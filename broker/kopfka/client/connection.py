"""A minimal asyncio Kafka client connection for kopfka's own tools (CLI, operator) and the
broker's own clients (replica fetcher, node-to-controller channel, raft).

It reuses the sans-IO protocol layer: requests are kio entities built from dicts, framed with
the right header version; responses are parsed with kio's readers. With a ClientSecurity it
speaks TLS and/or authenticates with SASL (SaslHandshake v1 + SaslAuthenticate v2), and
re-authenticates before the server's session lifetime runs out (KIP-368).
"""

from __future__ import annotations

import asyncio
import io
import random
import struct
import time
from collections.abc import Callable
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from kopfka.protocol.entity_builder import build
from kopfka.protocol.errors import ErrorCode
from kopfka.protocol.schemas import load_request_schema, load_response_schema
from kopfka.security import plain, scram
from kopfka.security.client import AuthenticationError, ClientSecurity
from kopfka.timeouts import within

CLIENT_ID = "kopfka-cli"
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


class KafkaConnection:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, security: ClientSecurity | None = None
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.security = security
        self._correlation = 0
        self._lock = asyncio.Lock()
        self._reauth_at: float | None = None  # monotonic; re-authenticate before the session ends

    @classmethod
    async def open(
        cls, bootstrap: str, timeout: float = 10.0, security: ClientSecurity | None = None, limit: int = 2**16
    ) -> KafkaConnection:
        """`limit`: the read buffer's size (asyncio pauses the socket at twice that while a
        larger response arrives)."""
        host, _, port = bootstrap.strip().rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        tls = security.ssl_context if security is not None and security.tls else None
        reader, writer = await within(
            timeout,
            asyncio.open_connection(host, int(port), ssl=tls, server_hostname=host if tls else None, limit=limit),
        )
        conn = cls(reader, writer, security)
        if security is not None and security.mechanism:
            try:
                async with conn._lock:
                    await within(timeout, conn._authenticate())
            except BaseException:
                await conn.close()
                raise
        return conn

    async def _authenticate(self) -> None:
        """SaslHandshake v1 then SaslAuthenticate v2 rounds (caller holds the lock)."""
        sec = self.security
        assert sec is not None and sec.mechanism
        hs = await self._roundtrip(SASL_HANDSHAKE, 1, {"mechanism": sec.mechanism}, 30.0)
        if ErrorCode(int(hs.error_code)) != ErrorCode.none:
            raise AuthenticationError(
                f"SASL mechanism {sec.mechanism} refused ({ErrorCode(int(hs.error_code)).name}); "
                f"the server enables {', '.join(hs.mechanisms or ())}"
            )

        async def step(token: bytes) -> Any:
            resp = await self._roundtrip(SASL_AUTHENTICATE, 2, {"auth_bytes": token}, 30.0)
            if ErrorCode(int(resp.error_code)) != ErrorCode.none:
                raise AuthenticationError(resp.error_message or ErrorCode(int(resp.error_code)).name)
            return resp

        if sec.mechanism == "PLAIN":
            last = await step(plain.client_token(sec.username, sec.password))
        else:
            client = scram.ScramClient(sec.mechanism, sec.username, sec.password)
            first = await step(client.first())
            last = await step(client.final(bytes(first.auth_bytes)))
            try:
                client.verify(bytes(last.auth_bytes))
            except scram.ScramError as exc:
                raise AuthenticationError(str(exc)) from None
        lifetime_ms = last.session_lifetime.total_seconds() * 1000 if last.session_lifetime else 0
        # as Kafka's clients: re-authenticate at a random 85-95% of the session lifetime
        self._reauth_at = None
        if lifetime_ms > 0:
            self._reauth_at = time.monotonic() + lifetime_ms / 1000 * random.uniform(0.85, 0.95)

    async def request(self, api_key: int, version: int, body: dict[str, Any], timeout: float = 30.0) -> Any:
        frame = await self.request_frame(api_key, version, body, timeout)
        return self._parse(api_key, version, frame)

    async def request_frame(self, api_key: int, version: int, body: dict[str, Any], timeout: float = 30.0) -> bytes:
        """The raw response frame (correlation id first): for the few responses kio cannot read,
        e.g. a -1 timestamp where Kafka's schema has no null (DescribeTransactions)."""
        async with self._lock:
            if self._reauth_at is not None and time.monotonic() >= self._reauth_at:
                await within(timeout, self._authenticate())
            return await self._roundtrip_frame(api_key, version, body, timeout)

    async def request_encoded(
        self, api_key: int, version: int, encode: Callable[[int], bytes], timeout: float = 30.0
    ) -> Any:
        """As `request`, for a hot request with a hand-written encoder: `encode(correlation_id)`
        returns the whole frame (see kopfka.protocol.fetch_request)."""
        async with self._lock:
            if self._reauth_at is not None and time.monotonic() >= self._reauth_at:
                await within(timeout, self._authenticate())
            self._correlation += 1
            return self._parse(api_key, version, await self._exchange(encode(self._correlation), timeout))

    @staticmethod
    def _parse(api_key: int, version: int, frame: bytes) -> Any:
        resp_schema = load_response_schema(api_key, version)
        offset = 5 if (resp_schema.__flexible__ and api_key != 18) else 4
        body_obj, _ = entity_reader(resp_schema)(frame, offset)
        return body_obj

    async def _roundtrip(self, api_key: int, version: int, body: dict[str, Any], timeout: float) -> Any:
        """One request and its parsed answer (the caller holds the lock)."""
        return self._parse(api_key, version, await self._roundtrip_frame(api_key, version, body, timeout))

    async def _roundtrip_frame(self, api_key: int, version: int, body: dict[str, Any], timeout: float) -> bytes:
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
        return await self._exchange(bytes(data), timeout)

    async def _exchange(self, request: bytes, timeout: float) -> bytes:
        """Send one framed request (its correlation id is ours, the last assigned) and read its
        response frame (correlation id first), all within one timeout."""
        corr = self._correlation
        self.writer.write(request)
        async with asyncio.timeout(timeout):
            await self.writer.drain()
            size = struct.unpack(">i", await self.reader.readexactly(4))[0]
            frame = await self.reader.readexactly(size)
        (got,) = struct.unpack_from(">i", frame, 0)
        if got != corr:
            raise ConnectionError(f"correlation id mismatch: sent {corr}, got {got}")
        return frame

    @property
    def peer_closed(self) -> bool:
        """The peer closed the connection or the transport is gone (a pooled connection to a
        broker that restarted meanwhile): the next request on it could only fail."""
        return self.writer.is_closing() or self.reader.at_eof()

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except OSError:  # ConnectionError, or an SSL error while closing a TLS stream
            pass
