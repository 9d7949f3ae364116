"""InterBrokerClient: request/response channels from this broker to its peers.

The transaction coordinator sends WriteTxnMarkers to partition leaders, and partition leaders
send AddPartitionsToTxn (KIP-890 verification) to transaction coordinators, over the
inter-broker listener (`inter.broker.listener.name`, else the first listener), secured as that
listener is (TLS, SASL: kopfka.security.client). One connection
per peer, opened on first use and dropped on any error so the next request reconnects to
wherever the metadata image says the peer now is.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kopfka.client.connection import KafkaConnection
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.security.client import ClientSecurity
from kopfka.security.listeners import inter_broker_listener
from kopfka.timeouts import within


class InterBrokerClient:
    def __init__(self, services: Any, security: ClientSecurity | None = None) -> None:
        self.services = services
        self.security = security
        config = services.config
        self.listener = inter_broker_listener(config) if hasattr(config, "broker_listeners") else "PLAINTEXT"
        self._conns: dict[int, KafkaConnection] = {}
        self._opening: dict[int, asyncio.Lock] = {}

    async def _connection(self, broker_id: int) -> KafkaConnection:
        lock = self._opening.setdefault(broker_id, asyncio.Lock())
        async with lock:
            conn = self._conns.get(broker_id)
            if conn is not None:
                if not conn.peer_closed:
                    return conn
                await self.disconnect(broker_id)  # the peer closed it (restarted): reconnect
            b = self.services.metadata.image.brokers.get(broker_id)
            ep = b.endpoint(self.listener) if b is not None else None
            if ep is None and b is not None and b.endpoints:
                ep = b.endpoints[0]
            if ep is None:
                raise KafkaError(ErrorCode.broker_not_available, f"no endpoint known for broker {broker_id}")
            conn = await KafkaConnection.open(f"{ep.host}:{ep.port}", timeout=5, security=self.security)
            self._conns[broker_id] = conn
            return conn

    async def request(
        self, broker_id: int, api_key: int, version: int, body: dict[str, Any], timeout: float = 30.0
    ) -> Any:
        """Send one request; a network failure raises KafkaError(NETWORK_EXCEPTION)."""
        try:
            conn = await self._connection(broker_id)
            return await conn.request(api_key, version, body, timeout=timeout)
        except KafkaError:
            raise
        except (OSError, ConnectionError, TimeoutError, asyncio.IncompleteReadError, EOFError) as exc:
            await self.disconnect(broker_id)
            raise KafkaError(ErrorCode.network_exception, f"broker {broker_id}: {exc!r}") from exc

    async def disconnect(self, broker_id: int) -> None:
        conn = self._conns.pop(broker_id, None)
        if conn is not None:
            try:
                await within(1, conn.close())
            except (OSError, TimeoutError):
                pass

    async def close(self) -> None:
        for broker_id in list(self._conns):
            await self.disconnect(broker_id)
