"""A connection to the controller listener ends cleanly: its task finishes without an exception
when the peer closes it and when the node shuts the listener down. (Closing ran the broker
listener's teardown, which asked the services for the share-partition manager: ControllerServices
had no `built`, and every closed controller connection's task died with an AttributeError, logged
as "Task exception was never retrieved" once collected: seen in a clean restart on CI.)"""

from __future__ import annotations

import asyncio
import struct

from kopfka.server.controller_server import ControllerNetworkServer, ControllerServices

API_VERSIONS_V3 = struct.pack(">hhih", 18, 3, 7, 4) + b"test\x00" + b"\x06probe\x021\x00"


async def answered_connection(server: ControllerNetworkServer, port: int) -> tuple[asyncio.StreamWriter, object]:
    """A client connection that got its ApiVersions answer, and the server side's Connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(struct.pack(">i", len(API_VERSIONS_V3)) + API_VERSIONS_V3)
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    (correlation_id,) = struct.unpack(">i", (await reader.readexactly(size))[:4])
    assert correlation_id == 7
    (conn,) = server.connections
    return writer, conn


async def test_controller_connection_tasks_end_without_an_exception() -> None:
    services = ControllerServices(node_id=1, cluster_id="c", raft=None, controller=None)  # type: ignore[arg-type]
    server = ControllerNetworkServer(services, max_request_bytes=1 << 20)
    _, port = await server.start_listener("CONTROLLER", "127.0.0.1", 0)
    try:
        writer, conn = await answered_connection(server, port)
        writer.close()  # the peer goes away
        await asyncio.wait_for(conn._task, 5)  # type: ignore[attr-defined]  # raised AttributeError before
        assert conn._task.exception() is None  # type: ignore[attr-defined]
        writer, conn = await answered_connection(server, port)
        await server.close()  # the node shuts the listener down under the connection (cancelled)
        task = conn._task  # type: ignore[attr-defined]
        assert task.done() and (task.cancelled() or task.exception() is None)
        writer.close()
    finally:
        await server.close()
