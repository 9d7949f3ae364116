"""KIP-890 on the partition leader: is this transactional append part of an open transaction?

Before a producer's first transactional batch in a partition (no transaction of its epoch open
here yet), the leader asks the transaction coordinator whether the partition was added to the
producer's transaction (AddPartitionsToTxn v4+ with verify_only), or — for a transaction
version 2 client (Produce v12+ when `transaction.version` >= 2) — adds it on the producer's
behalf. A partition the coordinator does not know would otherwise open a "hanging"
transaction that holds the last stable offset back forever. The coordinator is called
in-process when this broker is it, else over the inter-broker listener.
"""

from __future__ import annotations

from typing import Any

from kopfka.coordinator.keys import partition_for
from kopfka.protocol.errors import ErrorCode, KafkaError

TXN_TOPIC = "__transaction_state"
TopicPartition = tuple[str, int]

# coordinator answers older clients do not retry well: NOT_ENOUGH_REPLICAS makes them retry the
# produce without a metadata refresh (Kafka's choice)
RETRIABLE_AS_NOT_ENOUGH_REPLICAS = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    }
)


class TransactionVerifier:
    def __init__(self, services: Any) -> None:
        self.services = services

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        *,
        add: bool,
        abortable_supported: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        """Per partition: NONE, or the error the produce answers for it."""
        raw = await self.ask(transactional_id, producer_id, producer_epoch, partitions, add=add)
        out = {}
        for tp in partitions:
            code = raw.get(tp, ErrorCode.none)
            if code == ErrorCode.producer_fenced:
                code = ErrorCode.invalid_producer_epoch  # what producers expect on a produce
            elif code == ErrorCode.transaction_abortable and not abortable_supported:
                code = ErrorCode.invalid_txn_state
            elif code in RETRIABLE_AS_NOT_ENOUGH_REPLICAS:
                code = ErrorCode.not_enough_replicas
            out[tp] = code
        return out

    async def ask(
        self, tid: str, pid: int, epoch: int, partitions: list[TopicPartition], *, add: bool
    ) -> dict[TopicPartition, ErrorCode]:
        """The coordinator's own answer per partition (no produce-specific translation)."""
        svc = self.services
        image = svc.metadata.image
        topic = image.topics_by_name.get(TXN_TOPIC)
        if topic is None:
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        reg = topic.partitions.get(partition_for(tid, len(topic.partitions)))
        leader = reg.leader if reg is not None else -1
        if leader < 0:
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        if leader == svc.node_id and svc.txn_coordinator is not None:
            coord = svc.txn_coordinator
            if not add:
                return dict(coord.verify_partitions(tid, pid, epoch, partitions))
            try:
                await coord.add_partitions(tid, pid, epoch, partitions, client_tv=2)
                return dict.fromkeys(partitions, ErrorCode.none)
            except KafkaError as exc:
                return dict.fromkeys(partitions, exc.code)
        topics: dict[str, list[int]] = {}
        for t, p in partitions:
            topics.setdefault(t, []).append(p)
        body = {
            "transactions": [
                {
                    "transactional_id": tid,
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "verify_only": not add,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                }
            ]
        }
        try:
            resp = await svc.inter_broker.request(leader, 24, 5, body, timeout=10)
        except KafkaError as exc:
            return dict.fromkeys(partitions, exc.code)
        if resp.error_code != ErrorCode.none:
            code = ErrorCode(int(resp.error_code))
            if code == ErrorCode.cluster_authorization_failed:
                code = ErrorCode.invalid_txn_state
            return dict.fromkeys(partitions, code)
        out: dict[TopicPartition, ErrorCode] = {}
        for r in resp.results_by_transaction:
            for t in r.topic_results:
                for p in t.results_by_partition:
                    out[(t.name, int(p.partition_index))] = ErrorCode(int(p.partition_error_code))
        return out
