"""The asyncio socket server: frames in, handler, responses out, per connection in order.

Each connection processes one request at a time, like Kafka's muted channels, so responses
come back in request order while clients may pipeline. Record data in fetch responses is
sent with sendfile on plaintext connections (TLS needs the bytes in user space to encrypt
them: there it is read and written in chunks). A malformed or oversized frame closes only that
connection (with a log line); an unexpected handler failure likewise never reaches the server
loop.

Listener security (kopfka.security): a TLS listener's connections start after the handshake
with the principal of the client certificate (or ANONYMOUS); a SASL listener's connections
accept only the SASL exchange until it completes (SaslServerAuthenticator), with frames capped
at sasl.server.max.receive.size meanwhile.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from kopfka.protocol.api_versions import API_VERSIONS_KEY, is_supported
from kopfka.protocol.entity_builder import build
from kopfka.protocol.framing import (
    PRODUCE_KEY,
    FrameError,
    FrameReceiver,
    decode_request,
    encode_response,
    peek_header,
)
from kopfka.protocol.produce_response import encode_produce_response
from kopfka.protocol.schemas import load_response_schema
from kopfka.quota.throttling import admit_connection, finish_request, release_connection
from kopfka.quota.work_time import WorkTimed
from kopfka.security.listeners import PLAINTEXT, ListenerSecurity
from kopfka.security.principal import ANONYMOUS, KafkaPrincipal, ssl_principal
from kopfka.security.sasl_server import SASL_AUTHENTICATE, SASL_HANDSHAKE, AuthFailure, SaslServerAuthenticator
from kopfka.server.apis import load_all
from kopfka.server.apis.api_versions import unsupported_version_response
from kopfka.server.apis.produce import CloseConnection
from kopfka.server.apis.registry import HANDLERS, DeferredResponse, RawResponse
from kopfka.server.request_context import RequestContext
from kopfka.timeouts import wait_quietly

log = logging.getLogger(__name__)
load_all()

# answers on the path of every write, encoded by hand from the handler's dict (None: kio)
HAND_ENCODERS: dict[int, Callable[[int, int, Any], bytes | None]] = {PRODUCE_KEY: encode_produce_response}
SENDFILE_THRESHOLD = 64 * 1024
TLS_WRITE_CHUNK = 1024 * 1024  # file bytes read per write on TLS connections (no sendfile there)
PLAINTEXT_LISTENER = ListenerSecurity("PLAINTEXT", PLAINTEXT)


class _SendfileSource:
    """File-object adapter for loop.sendfile over a FileSlice (positional; seek is a no-op)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, *_: Any) -> int:
        return 0


class Connection(asyncio.BufferedProtocol):
    """One client connection: frames are received zero-copy, handled strictly in order by a
    task of their own, and answered in order. Reading pauses while a few requests are queued
    (Kafka mutes a channel while its request is processed), which gives backpressure."""

    MAX_QUEUED = 4
    FAIR_SHARE_S = 0.001  # the longest a connection runs its queued requests before the others' turn
    MAX_DEFERRED = 5  # acks=all produces waiting for the ISR while later requests go ahead (librdkafka's in-flight)

    def __init__(self, server: KafkaNetworkServer, listener_name: str) -> None:
        self.server = server
        self.listener_name = listener_name
        self.security = server.security.get(listener_name, PLAINTEXT_LISTENER)
        self.principal: KafkaPrincipal = ANONYMOUS
        self.authenticator = SaslServerAuthenticator(self.security) if self.security.sasl else None
        self.receiver = FrameReceiver(
            self.security.max_receive_bytes if self.authenticator is not None else server.max_request_bytes
        )
        self.frames: deque[bytes | bytearray] = deque()
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_host = ""
        self.client_port = 0
        self.client_software = ("", "")  # (name, version) from ApiVersions v3+ (KIP-511)
        self._wakeup = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._closed = False
        self._reading_paused = False
        self._task: asyncio.Task[None] | None = None
        self.tls = False
        self._deferred: deque[asyncio.Task[bool]] = deque()  # in request order

    # --- asyncio.BufferedProtocol ---------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = peer[0] if peer else ""
        self.client_port = int(peer[1]) if peer else 0
        ssl_object = transport.get_extra_info("ssl_object")
        self.tls = ssl_object is not None
        if ssl_object is not None and self.authenticator is None:
            try:
                self.principal = ssl_principal(ssl_object.getpeercert(binary_form=True), self.security.mapper)
            except (LookupError, ValueError) as exc:  # no mapping rule applies: Kafka fails the handshake
                log.info("Failed authentication with %s on %s (%s)", self.peer, self.listener_name, exc)
                transport.close()
                return
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"conn-{self.peer}")
        self.server.connections.add(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.receiver.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.receiver.buffer_updated(nbytes)
        except FrameError as exc:
            log.warning("Closing connection from %s on %s: %s", self.peer, self.listener_name, exc)
            self.close()
            return
        if frames:
            self.frames.extend(frames)
            self._wakeup.set()
            if len(self.frames) >= self.MAX_QUEUED and self.transport is not None and not self._reading_paused:
                self._reading_paused = True
                self.transport.pause_reading()

    def eof_received(self) -> bool:
        self._closed = True
        self._wakeup.set()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._wakeup.set()
        self._can_write.set()
        self.server.connections.discard(self)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # --- request loop ---------------------------------------------------------------------
    def write(self, data: bytes | bytearray) -> None:
        if self.transport is not None and not self._closed:
            self.transport.write(data)

    async def drain(self) -> None:
        await self._can_write.wait()
        if self._closed:
            raise ConnectionError("connection closed")

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()
        if self.transport is not None:
            self.transport.close()

    async def _run(self) -> None:
        if not await admit_connection(self.server.services, self.listener_name, self.client_host):
            self.close()  # connection quotas: per-IP count or rate exceeded
            return
        try:
            since_yield = time.perf_counter()
            while True:
                while not self.frames:
                    if self._closed:
                        return
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    since_yield = time.perf_counter()
                frame = self.frames.popleft()
                if self._reading_paused and len(self.frames) < self.MAX_QUEUED // 2 and self.transport is not None:
                    self._reading_paused = False
                    self.transport.resume_reading()
                if not await self.process(frame):
                    return
                if self.frames and time.perf_counter() - since_yield > self.FAIR_SHARE_S:
                    # one read can hold many small pipelined requests (acks=1 producers), and
                    # handlers that finish without suspending would run them all in one loop step
                    # (10-20 ms seen): other connections, the replica fetchers and timers go first
                    await asyncio.sleep(0)
                    since_yield = time.perf_counter()
        except FrameError as exc:
            log.warning("Closing connection from %s on %s: %s", self.peer, self.listener_name, exc)
        except ConnectionError:
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Unexpected error on connection from %s; closing it", self.peer)
        finally:
            self.close()
            for t in list(self._deferred):
                t.cancel()
            release_connection(self.server.services, self.listener_name, self.client_host)
            share = self.server.services.built("share_partitions")
            if share is not None:  # the share sessions of this connection end with it (KIP-932)
                share.on_disconnect(self)

    async def process(self, frame: bytes | bytearray) -> bool:
        """Handle one request; False means close the connection."""
        auth = self.authenticator
        if auth is not None:
            if not auth.complete:
                return await self._sasl_step(frame)
            api_key = peek_header(frame)[0]
            if api_key == SASL_HANDSHAKE and auth.client_supports_reauth:
                auth.begin_reauthentication()  # KIP-368: same mechanism, same principal
                return await self._sasl_step(frame)
            if auth.expired():
                log.info("Closing connection from %s on %s: its SASL session expired", self.peer, self.listener_name)
                return False
        return await self.handle_frame(frame)

    async def handle_frame(self, frame: bytes | bytearray) -> bool:
        """An authenticated request: decode, handle, answer (the controller listener overrides this)."""
        return await self._dispatch(decode_request(frame), len(frame))

    async def _sasl_step(self, frame: bytes | bytearray) -> bool:
        """One frame of the SASL exchange (the authenticator decides what is allowed)."""
        auth = self.authenticator
        assert auth is not None
        if self._deferred:  # a re-authentication answers after the responses before it
            await asyncio.wait([self._deferred[-1]])
        if auth.raw_tokens and auth.state == "authenticate":
            try:
                token = auth.evaluate_raw(bytes(frame))
            except AuthFailure as failure:
                return await self._fail_authentication(failure, None)
            self.write(len(token).to_bytes(4, "big") + token)
        else:
            api_key, version, _ = peek_header(frame)
            if api_key == API_VERSIONS_KEY and auth.accepts_api_versions():
                ok = await self.handle_frame(frame)
                auth.api_versions_answered(is_supported(API_VERSIONS_KEY, version))
                return ok
            if api_key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE):  # never parse other bodies unauthenticated
                return await self._fail_authentication(
                    AuthFailure(f"Unexpected Kafka request of type {api_key} during SASL {auth.text}"), None
                )
            req = decode_request(frame)
            hdr = req.header
            try:
                response = auth.handle(hdr.api_key, hdr.api_version, req.body)
            except AuthFailure as failure:
                return await self._fail_authentication(failure, hdr)
            schema = load_response_schema(hdr.api_key, hdr.api_version)
            self.write(encode_response(hdr.api_key, hdr.api_version, hdr.correlation_id, build(schema, response)))
        await self.drain()
        if auth.complete:
            self.principal = auth.principal or ANONYMOUS
            self.receiver.max_frame_bytes = self.server.max_request_bytes
        return True

    async def _fail_authentication(self, failure: AuthFailure, hdr: Any) -> bool:
        """Kafka's delayed close: wait connection.failed.authentication.delay.ms, answer, close."""
        log.info("Failed authentication with %s on %s (%s)", self.peer, self.listener_name, failure.reason)
        await asyncio.sleep(self.security.failed_auth_delay_ms / 1000)
        if failure.response is not None and hdr is not None:
            body = build(load_response_schema(hdr.api_key, hdr.api_version), failure.response)
            self.write(encode_response(hdr.api_key, hdr.api_version, hdr.correlation_id, body))
            await wait_quietly(self.drain(), 5)
        return False

    async def _dispatch(self, req: Any, frame_size: int) -> bool:
        hdr = req.header
        if req.body is None:
            if hdr.api_key == API_VERSIONS_KEY:
                schema = load_response_schema(API_VERSIONS_KEY, 0)
                self.write(
                    encode_response(
                        API_VERSIONS_KEY, 0, hdr.correlation_id, build(schema, unsupported_version_response())
                    )
                )
                await self.drain()
                return True
            log.warning(
                "Closing connection from %s: unsupported request %s v%s (client %s)",
                self.peer,
                hdr.api_key,
                hdr.api_version,
                hdr.client_id,
            )
            return False
        handler = HANDLERS.get(hdr.api_key)
        if handler is None:
            log.warning("Closing connection from %s: no handler for api key %s", self.peer, hdr.api_key)
            return False
        ctx = RequestContext(
            hdr.api_key,
            hdr.api_version,
            hdr.correlation_id,
            hdr.client_id,
            self.listener_name,
            self.client_host,
            self.server.services,
            frame_size,
            client_software_name=self.client_software[0],
            client_software_version=self.client_software[1],
            client_port=self.client_port,
            principal=self.principal,
            security_protocol=self.security.protocol,
            connection=self,
        )
        started = time.perf_counter_ns()
        timed = WorkTimed(handler(ctx, req.body))
        try:
            result = await timed
        except CloseConnection:
            return False
        finally:
            ctx.work_ns += timed.ns
        if hdr.api_key == API_VERSIONS_KEY and ctx.client_software_name:
            self.client_software = (ctx.client_software_name, ctx.client_software_version)
        if isinstance(result, DeferredResponse):
            prev = self._deferred[-1] if self._deferred else None
            task = asyncio.get_running_loop().create_task(self._finish_deferred(ctx, hdr, result, started, prev))
            self._deferred.append(task)
            task.add_done_callback(functools.partial(self._deferred_done, coro=result.result))
            if len(self._deferred) > self.MAX_DEFERRED:
                await asyncio.wait([self._deferred[0]])
            return True
        if self._deferred:  # answer after the deferred responses before it
            await asyncio.wait([self._deferred[-1]])
        return await self._respond(ctx, hdr, result, started)

    async def _finish_deferred(
        self, ctx: RequestContext, hdr: Any, deferred: DeferredResponse, started: int, prev: asyncio.Task[bool] | None
    ) -> bool:
        try:
            timed = WorkTimed(deferred.result)
            try:
                result = await timed
            finally:
                ctx.work_ns += timed.ns
            if prev is not None and not prev.done():  # asyncio.wait would cost loop steps even then
                await asyncio.wait([prev])
            if self._closed:
                return False
            if not await self._respond(ctx, hdr, result, started):
                self.close()
                return False
            return True
        except (ConnectionError, CloseConnection):
            self.close()
            return False
        except Exception:
            log.exception("Unexpected error answering a deferred request on %s; closing it", self.peer)
            self.close()
            return False

    def _deferred_done(self, task: asyncio.Task[bool], coro: Coroutine[Any, Any, Any]) -> None:
        if task.cancelled():
            coro.close()  # cancelled before it started (the connection closed): no "never awaited" warning
        try:
            self._deferred.remove(task)
        except ValueError:
            pass

    async def _respond(self, ctx: RequestContext, hdr: Any, result: Any, started: int) -> bool:
        mute_ms = finish_request(ctx, result, time.perf_counter_ns() - started)  # quotas + request metrics
        if result is None:
            if mute_ms:  # acks=0 produce: no response, but the connection is still muted
                await asyncio.sleep(mute_ms / 1000)
            return True
        if isinstance(result, RawResponse):
            await self.write_chunks(result.chunks, result.size)
        else:
            hand = HAND_ENCODERS.get(hdr.api_key)
            data = hand(hdr.api_version, hdr.correlation_id, result) if hand is not None else None
            if data is None:
                schema = load_response_schema(hdr.api_key, hdr.api_version)
                data = encode_response(hdr.api_key, hdr.api_version, hdr.correlation_id, build(schema, result))
            self.write(data)
        await self.drain()
        if mute_ms:  # throttled: the response is out, the connection's next request waits
            await asyncio.sleep(mute_ms / 1000)
        return True

    async def write_chunks(self, chunks: list[Any], size: int) -> None:
        file_bytes = size - sum(len(c) for c in chunks if isinstance(c, bytes | bytearray))
        if file_bytes < SENDFILE_THRESHOLD:
            self.write(b"".join(c if isinstance(c, bytes | bytearray) else c.read() for c in chunks))
            return
        if self.tls:
            await self._write_chunks_tls(chunks)
            return
        loop = asyncio.get_running_loop()
        for c in chunks:
            if isinstance(c, bytes | bytearray):
                self.write(c)
            else:
                await self.drain()
                sent = await loop.sendfile(self.transport, _SendfileSource(c.fileno()), c.position, c.size)  # type: ignore[arg-type]
                if sent != c.size:
                    # the segment was truncated under us: a short frame would corrupt the stream
                    raise ConnectionError(f"sendfile sent {sent} of {c.size} bytes (segment truncated)")

    async def _write_chunks_tls(self, chunks: list[Any]) -> None:
        """TLS encrypts in user space, so sendfile cannot apply: read the file ranges (pread)
        in bounded pieces and write them, draining between pieces to bound memory."""
        for c in chunks:
            if isinstance(c, bytes | bytearray):
                self.write(c)
                continue
            fd, pos, left = c.fileno(), c.position, c.size
            while left > 0:
                piece = os.pread(fd, min(left, TLS_WRITE_CHUNK), pos)
                if not piece:
                    raise ConnectionError(f"segment truncated under a fetch ({left} bytes missing)")
                self.write(piece)
                pos += len(piece)
                left -= len(piece)
                await self.drain()


class KafkaNetworkServer:
    def __init__(
        self, services: Any, max_request_bytes: int, security: dict[str, ListenerSecurity] | None = None
    ) -> None:
        self.services = services
        self.max_request_bytes = max_request_bytes
        self.security = dict(security or {})
        self.servers: list[asyncio.Server] = []
        self.connections: set[Connection] = set()
        self.bound: dict[str, tuple[str, int]] = {}

    async def start_listener(self, name: str, host: str, port: int) -> tuple[str, int]:
        server = await self._create_server(lambda: Connection(self, name), name, host, port)
        self.servers.append(server)
        sock = server.sockets[0].getsockname()
        self.bound[name] = (sock[0], sock[1])
        log.info("Listening on %s://%s:%d", name, sock[0], sock[1])
        return sock[0], sock[1]

    async def _create_server(self, factory: Any, name: str, host: str, port: int) -> asyncio.Server:
        sec = self.security.get(name)
        ctx = sec.ssl_context if sec is not None else None
        return await asyncio.get_running_loop().create_server(
            factory, host or "0.0.0.0", port, reuse_address=True, ssl=ctx, ssl_handshake_timeout=30 if ctx else None
        )

    async def stop_accepting(self) -> None:
        for s in self.servers:
            s.close()

    async def close(self) -> None:
        await self.stop_accepting()
        tasks = []
        for conn in list(self.connections):
            conn.close()
            if conn._task is not None:
                conn._task.cancel()
                tasks.append(conn._task)
        if tasks:
            await asyncio.wait(tasks, timeout=5)  # bounded: the server's last-resort drain reports stragglers
        for s in self.servers:
            await wait_quietly(s.wait_closed(), 2)
