"""ClusterClient: one connection per broker, opened on demand, for the admin subcommands that
talk to more than the bootstrap broker (groups, transactions): brokers, coordinators, leaders."""

from __future__ import annotations

import asyncio

from kopfka.client.admin import Admin, AdminError
from kopfka.client.connection import KafkaConnection
from kopfka.protocol.errors import ErrorCode
from kopfka.security.client import ClientSecurity

GROUP, TRANSACTION = 0, 1  # FindCoordinator key types


class ClusterClient:
    def __init__(self, bootstrap: str, security: ClientSecurity | None = None) -> None:
        self.bootstrap = bootstrap
        self.security = security  # --command-config: every broker connection is secured alike
        self.conns: dict[str, KafkaConnection] = {}

    async def conn(self, address: str) -> KafkaConnection:
        if address not in self.conns:
            self.conns[address] = await KafkaConnection.open(address, security=self.security)
        return self.conns[address]

    async def close(self) -> None:
        for c in self.conns.values():
            await c.close()

    async def brokers(self) -> dict[int, str]:
        admin = Admin(await self.conn(self.bootstrap))
        brokers, _, _ = await admin.metadata([])
        return {nid: f"{h}:{p}" for nid, (h, p, _) in brokers.items()}

    async def find_coordinator(self, key: str, key_type: int) -> tuple[int, str, int]:
        """(node id, host, port) of the group (key_type 0) or transaction (1) coordinator."""
        for _ in range(50):
            resp = await (await self.conn(self.bootstrap)).request(
                10, 4, {"key_type": key_type, "coordinator_keys": [key]}
            )
            c = resp.coordinators[0]
            code = ErrorCode(int(c.error_code))
            if code == ErrorCode.none:
                return int(c.node_id), c.host, int(c.port)
            if code not in (ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress):
                raise AdminError(code, c.error_message)
            await asyncio.sleep(0.2)
        raise AdminError(ErrorCode.coordinator_not_available, f"no coordinator for {key}")

    async def leaders(self, topics: list[str]) -> dict[tuple[str, int], int]:
        """(topic, partition) -> leader id of the named topics (all topics when empty)."""
        admin = Admin(await self.conn(self.bootstrap))
        _, infos, _ = await admin.metadata(topics or None)
        return {(t.name, p.partition): p.leader for t in infos for p in t.partitions}
