"""One group consumer in its own process (so SIGKILL is a real crash), for the group tests.

Usage: python consumer_worker.py CLIENT BOOTSTRAP TOPIC GROUP EVENTS_FILE [--instance-id ID]
       [--assignor NAME] [--session-ms N]
CLIENT: kafka-python | aiokafka | confluent | confluent-848. Appends JSON lines to EVENTS_FILE:
{"ev": "own", "parts": [...], "t": time} after every ownership change (written *before* a
revocation returns, so it precedes any other member's assignment of those partitions),
{"ev": "rec", "p": partition, "o": offset} per record, {"ev": "commit", "offsets": {...}} after each
synchronous commit. SIGTERM stops it cleanly: it reports owning nothing, then closes (leaving the
group unless it is a static member).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from typing import Any

STOP = False


def on_term(*_: Any) -> None:
    global STOP
    STOP = True


class Events:
    def __init__(self, path: str) -> None:
        self.f = open(path, "a", buffering=1)
        self.owned: set[int] = set()

    def emit(self, ev: str, **kw: Any) -> None:
        self.f.write(json.dumps({"ev": ev, "t": time.time(), **kw}) + "\n")
        self.f.flush()

    def own(self, parts: set[int]) -> None:
        self.owned = set(parts)
        self.emit("own", parts=sorted(self.owned))

    def assigned(self, parts: set[int], incremental: bool) -> None:
        self.own(self.owned | parts if incremental else parts)
        self.emit("assigned", parts=sorted(parts))

    def revoked(self, parts: set[int], incremental: bool) -> None:
        self.own(self.owned - parts if incremental else set())
        self.emit("revoked", parts=sorted(parts))


def run_kafka_python(a: argparse.Namespace, ev: Events) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    coop = a.assignor == "cooperative-sticky"
    strategies = (CooperativeStickyAssignor,) if coop else (RangePartitionAssignor, RoundRobinPartitionAssignor)
    c = KafkaConsumer(bootstrap_servers=a.bootstrap, group_id=a.group, client_id=f"kp-{a.label}",
                      auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=a.session_ms,
                      heartbeat_interval_ms=max(a.session_ms // 6, 100), max_poll_interval_ms=a.poll_interval_ms,
                      group_instance_id=a.instance_id, partition_assignment_strategy=strategies)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            commit(set(tp.partition for tp in revoked))
            ev.revoked({tp.partition for tp in revoked}, coop)

        def on_partitions_assigned(self, assigned: Any) -> None:
            ev.assigned({tp.partition for tp in assigned}, coop)

        def on_partitions_lost(self, lost: Any) -> None:
            ev.revoked({tp.partition for tp in lost}, coop)

    pending: dict[Any, int] = {}

    def commit(only: set[int] | None = None) -> None:
        todo = {tp: o for tp, o in pending.items() if only is None or tp.partition in only}
        if not todo:
            return
        try:
            c.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in todo.items()})
            ev.emit("commit", offsets={str(tp.partition): o for tp, o in todo.items()})
            for tp in todo:
                pending.pop(tp, None)
        except Exception as exc:
            ev.emit("commit_failed", error=repr(exc))

    # Work around a kafka-python 3.0.12 bug (also on its main branch as of 2026-08): when the
    # leader joins before it knows the topic's partitions, it assigns nothing and rejoins once the
    # metadata arrives. If a poll's timeout lapses while that second JoinGroup/SyncGroup is in flight,
    # the leader's own assignment snapshot already matches the metadata, need_rejoin() turns False,
    # and no later poll completes the join: the member owns nothing until its session expires.
    # Seen in CI under load; the broker's answers were correct. Knowing the partitions before the
    # first join avoids the metadata-change rejoin.
    if not c.partitions_for_topic(a.topic):
        raise SystemExit(f"topic {a.topic} has no partitions in the metadata")
    c.subscribe([a.topic], listener=Listener())
    while not STOP:
        for tp, msgs in c.poll(200).items():
            for m in msgs:
                ev.emit("rec", p=m.partition, o=m.offset)
            pending[tp] = msgs[-1].offset + 1
        commit()
    ev.own(set())
    c.close()


async def run_aiokafka(a: argparse.Namespace, ev: Events) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    c = AIOKafkaConsumer(bootstrap_servers=a.bootstrap, group_id=a.group, client_id=f"aio-{a.label}",
                         auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=a.session_ms,
                         heartbeat_interval_ms=max(a.session_ms // 6, 100), max_poll_interval_ms=a.poll_interval_ms,
                         rebalance_timeout_ms=a.poll_interval_ms, group_instance_id=a.instance_id,
                         partition_assignment_strategy=(RoundRobinPartitionAssignor,))
    pending: dict[Any, int] = {}

    async def commit() -> None:
        if not pending:
            return
        todo = dict(pending)
        try:
            await c.commit(todo)
            ev.emit("commit", offsets={str(tp.partition): o for tp, o in todo.items()})
            for tp, o in todo.items():
                if pending.get(tp) == o:
                    del pending[tp]
        except Exception as exc:
            ev.emit("commit_failed", error=repr(exc))

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            await commit()
            ev.revoked({tp.partition for tp in revoked}, False)

        async def on_partitions_assigned(self, assigned: Any) -> None:
            ev.assigned({tp.partition for tp in assigned}, False)

    await c.start()
    c.subscribe([a.topic], listener=Listener())
    try:
        while not STOP:
            for tp, msgs in (await c.getmany(timeout_ms=200)).items():
                for m in msgs:
                    ev.emit("rec", p=m.partition, o=m.offset)
                pending[tp] = msgs[-1].offset + 1
            await commit()
    finally:
        ev.own(set())
        await c.stop()


def run_confluent(a: argparse.Namespace, ev: Events, kip848: bool) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    conf: dict[str, Any] = {"bootstrap.servers": a.bootstrap, "group.id": a.group, "client.id": f"ck-{a.label}",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False,
                            "enable.auto.offset.store": False, "log_level": 3}
    if kip848:
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": a.session_ms, "heartbeat.interval.ms": max(a.session_ms // 6, 100),
                     "max.poll.interval.ms": a.poll_interval_ms,
                     "partition.assignment.strategy": a.assignor or "range,roundrobin"})
    if a.instance_id:
        conf["group.instance.id"] = a.instance_id
    incremental = kip848 or a.assignor == "cooperative-sticky"
    pending: dict[int, int] = {}
    c = Consumer(conf)

    def commit(only: set[int] | None = None) -> None:
        todo = {p: o for p, o in pending.items() if only is None or p in only}
        if not todo:
            return
        try:
            c.commit(offsets=[TopicPartition(a.topic, p, o) for p, o in todo.items()], asynchronous=False)
            ev.emit("commit", offsets={str(p): o for p, o in todo.items()})
            for p in todo:
                pending.pop(p, None)
        except KafkaException as exc:
            ev.emit("commit_failed", error=repr(exc))

    def on_assign(consumer: Any, parts: list[Any]) -> None:
        ev.assigned({tp.partition for tp in parts}, incremental)

    def on_revoke(consumer: Any, parts: list[Any]) -> None:
        commit({tp.partition for tp in parts})
        ev.revoked({tp.partition for tp in parts}, incremental)

    def on_lost(consumer: Any, parts: list[Any]) -> None:
        ev.revoked({tp.partition for tp in parts}, incremental)

    c.subscribe([a.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    while not STOP:
        msgs = c.consume(num_messages=500, timeout=0.2)
        for m in msgs:
            if m.error():
                ev.emit("error", error=str(m.error()))
                continue
            part, off = m.partition(), m.offset()
            assert part is not None and off is not None
            ev.emit("rec", p=part, o=off)
            pending[part] = off + 1
        commit()
    ev.own(set())
    c.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("client")
    p.add_argument("bootstrap")
    p.add_argument("topic")
    p.add_argument("group")
    p.add_argument("events")
    p.add_argument("--label", default="x")
    p.add_argument("--instance-id")
    p.add_argument("--assignor")
    p.add_argument("--session-ms", type=int, default=3000)
    p.add_argument("--poll-interval-ms", type=int, default=10000)
    a = p.parse_args()
    signal.signal(signal.SIGTERM, on_term)
    ev = Events(a.events)
    ev.emit("start", client=a.client)
    if a.client == "kafka-python":
        run_kafka_python(a, ev)
    elif a.client == "aiokafka":
        asyncio.run(run_aiokafka(a, ev))
    elif a.client in ("confluent", "confluent-848"):
        run_confluent(a, ev, a.client == "confluent-848")
    else:
        sys.exit(f"unknown client {a.client}")
    ev.emit("stopped")


if __name__ == "__main__":
    main()
