"""A connection to the controller listener ends cleanly: its task finishes without an exception
when the peer closes it and when the node shuts the listener down. (Closing ran the broker
listener's teardown, which asked the services for the share-partition manager: ControllerServices
had no `built`, and every closed controller connection's task died with an AttributeError, logged
as "Task exception was never retrieved" once collected: seen in a clean restart on CI.)"""

from __future__ import annotations

import asyncio

from kopfka.client.connection import KafkaConnection
from kopfka.server.controller_server import ControllerNetworkServer, ControllerServices


async def answered_connection(server: ControllerNetworkServer, port: int) -> tuple[KafkaConnection, object]:
    """A client connection that got its ApiVersions answer, and the server side's Connection."""
    client = await KafkaConnection.open(f"127.0.0.1:{port}")
    resp = await client.request(18, 3, {"client_software_name": "probe", "client_software_version": "1"})
    assert resp.error_code == 0 and resp.api_keys
    (conn,) = server.connections
    return client, conn


async def test_controller_connection_tasks_end_without_an_exception() -> None:
    services = ControllerServices(node_id=1, cluster_id="c", raft=None, controller=None)  # type: ignore[arg-type]
    server = ControllerNetworkServer(services, max_request_bytes=1 << 20)
    _, port = await server.start_listener("CONTROLLER", "127.0.0.1", 0)
    try:
        client, conn = await answered_connection(server, port)
        await client.close()  # the peer goes away
        await asyncio.wait_for(conn._task, 5)  # type: ignore[attr-defined]  # raised AttributeError before
        assert conn._task.exception() is None  # type: ignore[attr-defined]
        client, conn = await answered_connection(server, port)
        await server.close()  # the node shuts the listener down under the connection (cancelled)
        task = conn._task  # type: ignore[attr-defined]
        assert task.done() and (task.cancelled() or task.exception() is None)
        await client.close()
    finally:
        await server.close()
