"""The asyncio socket server: frames in, handler, responses out, per connection in order.

Each connection processes one request at a time, like Kafka's muted channels, so responses
come back in request order while clients may pipeline. Record data in fetch responses is
sent with sendfile. A malformed or oversized frame closes only that connection (with a log
line); an unexpected handler failure likewise never reaches the server loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from kio.index import load_response_schema

from kopfka.protocol.api_versions import API_VERSIONS_KEY
from kopfka.protocol.entity_builder import build
from kopfka.protocol.framing import FrameDecoder, FrameError, decode_request, encode_response
from kopfka.quota.throttling import admit_connection, finish_request, release_connection
from kopfka.server.apis import load_all
from kopfka.server.apis.api_versions import unsupported_version_response
from kopfka.server.apis.produce import CloseConnection
from kopfka.server.apis.registry import HANDLERS, RawResponse
from kopfka.server.request_context import RequestContext

log = logging.getLogger(__name__)
load_all()

SENDFILE_THRESHOLD = 64 * 1024


class _SendfileSource:
    """File-object adapter for loop.sendfile over a FileSlice (positional; seek is a no-op)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, *_: Any) -> int:
        return 0


class Connection:
    def __init__(self, server: KafkaNetworkServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 listener_name: str) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.listener_name = listener_name
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = peer[0] if peer else ""

    async def run(self) -> None:
        decoder = FrameDecoder(self.server.max_request_bytes)
        if not await admit_connection(self.server.services, self.listener_name, self.client_host):
            self.writer.close()  # connection quotas: per-IP count or rate exceeded
            return
        try:
            while True:
                data = await self.reader.read(1 << 20)
                if not data:
                    return
                for frame in decoder.feed(data):
                    if not await self.process(frame):
                        return
        except FrameError as exc:
            log.warning("Closing connection from %s on %s: %s", self.peer, self.listener_name, exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Unexpected error on connection from %s; closing it", self.peer)
        finally:
            self.writer.close()
            release_connection(self.server.services, self.listener_name, self.client_host)

    async def process(self, frame: bytes) -> bool:
        """Handle one request; False means close the connection."""
        req = decode_request(frame)
        hdr = req.header
        if req.body is None:
            if hdr.api_key == API_VERSIONS_KEY:
                schema = load_response_schema(API_VERSIONS_KEY, 0)
                self.writer.write(encode_response(API_VERSIONS_KEY, 0, hdr.correlation_id,
                                                  build(schema, unsupported_version_response())))
                await self.writer.drain()
                return True
            log.warning("Closing connection from %s: unsupported request %s v%s (client %s)",
                        self.peer, hdr.api_key, hdr.api_version, hdr.client_id)
            return False
        handler = HANDLERS.get(hdr.api_key)
        if handler is None:
            log.warning("Closing connection from %s: no handler for api key %s", self.peer, hdr.api_key)
            return False
        ctx = RequestContext(hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id, self.listener_name,
                             self.client_host, self.server.services, len(frame))
        started = time.perf_counter_ns()
        try:
            result = await handler(ctx, req.body)
        except CloseConnection:
            return False
        mute_ms = finish_request(ctx, result, time.perf_counter_ns() - started)  # quotas + request metrics
        if result is None:
            if mute_ms:  # acks=0 produce: no response, but the connection is still muted
                await asyncio.sleep(mute_ms / 1000)
            return True
        if isinstance(result, RawResponse):
            await self.write_chunks(result.chunks, result.size)
        else:
            schema = load_response_schema(hdr.api_key, hdr.api_version)
            self.writer.write(encode_response(hdr.api_key, hdr.api_version, hdr.correlation_id, build(schema, result)))
        await self.writer.drain()
        if mute_ms:  # throttled: the response is out, the connection's next request waits
            await asyncio.sleep(mute_ms / 1000)
        return True

    async def write_chunks(self, chunks: list[Any], size: int) -> None:
        file_bytes = size - sum(len(c) for c in chunks if isinstance(c, bytes | bytearray))
        if file_bytes < SENDFILE_THRESHOLD:
            self.writer.write(b"".join(c if isinstance(c, bytes | bytearray) else c.read() for c in chunks))
            return
        loop = asyncio.get_running_loop()
        for c in chunks:
            if isinstance(c, bytes | bytearray):
                self.writer.write(c)
            else:
                await self.writer.drain()
                await loop.sendfile(self.writer.transport, _SendfileSource(c.fileno()), c.position, c.size)  # type: ignore[arg-type]


class KafkaNetworkServer:
    def __init__(self, services: Any, max_request_bytes: int) -> None:
        self.services = services
        self.max_request_bytes = max_request_bytes
        self.servers: list[asyncio.Server] = []
        self.connections: set[asyncio.Task[None]] = set()
        self.bound: dict[str, tuple[str, int]] = {}

    async def start_listener(self, name: str, host: str, port: int) -> tuple[str, int]:
        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            if task is not None:
                self.connections.add(task)
                task.add_done_callback(self.connections.discard)

        async def client_connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            on_connect(reader, writer)
            await Connection(self, reader, writer, name).run()

        server = await asyncio.start_server(client_connected, host or "0.0.0.0", port, reuse_address=True,
                                            limit=1 << 20)
        self.servers.append(server)
        sock = server.sockets[0].getsockname()
        self.bound[name] = (sock[0], sock[1])
        log.info("Listening on %s://%s:%d", name, sock[0], sock[1])
        return sock[0], sock[1]

    async def stop_accepting(self) -> None:
        for s in self.servers:
            s.close()

    async def close(self) -> None:
        await self.stop_accepting()
        for t in list(self.connections):
            t.cancel()
        if self.connections:
            await asyncio.gather(*self.connections, return_exceptions=True)
        for s in self.servers:
            try:
                await asyncio.wait_for(s.wait_closed(), 2)
            except TimeoutError:
                pass


__all__ = ["Callable", "KafkaNetworkServer", "os"]
