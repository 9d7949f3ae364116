"""The operator's data mover (kopfka_operator.rebalance.mover) on a real KRaft cluster, with
Kafka's verifiable producer writing (acks=all, idempotent) throughout and a verifiable consumer
reading everything back afterwards: replicas spread onto a new broker, a broker emptied, and a
broker's log dir emptied into its other dir, each with 0 acknowledged messages lost, every
replica where the plan put it, and the throttles gone at the end.

Each tick is what the operator's 3-second timer does (here every second): a fresh Mover over a
fresh connection (nothing carried over, as after an operator restart) makes one bounded step.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from harness import add_broker, broker, create_topic, describe, log_dirs, run, run_scenario, wait_full_isr, wait_until
from kopfka.client.admin import Admin
from kopfka_operator.kafka_pool import ClusterAdmin
from kopfka_operator.rebalance.cluster import ClusterState, read_cluster
from kopfka_operator.rebalance.model import Plan
from kopfka_operator.rebalance.mover import MoverSettings
from kopfka_operator.throttles import ALTER_LOG_DIRS_RATE, BROKER, RATE_KEYS, REPLICA_KEYS, TOPIC
from mover_steps import drive, fill, tick

pytestmark = pytest.mark.timeout(180)

DYNAMIC = {BROKER: 2, TOPIC: 1}  # DescribeConfigs config_source of an own override
MB = 1 << 20


def bulk_and_live(c: Any, partitions: int, per_partition: int) -> list[str]:
    """Topic "bulk" holds the bytes the moves copy; "live" takes the verifiable producer; and the
    mover moves "__consumer_offsets" as any other topic."""
    create_topic(c, "bulk", partitions, 3)
    create_topic(c, "live", partitions, 3)
    fill(c.bootstrap(), "bulk", partitions, per_partition)
    wait_full_isr(c, "bulk")
    _offsets_topic(c)
    return ["bulk", "live", "__consumer_offsets"]


def _offsets_topic(c: Any) -> None:
    """__consumer_offsets made now, not by the verifiable consumer while the mover plans: the
    mover balances internal topics too, and a topic born between two steps changes the mean."""

    async def go() -> None:
        admin = await Admin.connect(c.bootstrap().split(",")[0])
        try:
            for _ in range(100):
                body = {"key_type": 0, "coordinator_keys": ["mover-test"]}
                if (await admin.conn.request(10, 4, body)).coordinators[0].error_code == 0:
                    return
                await asyncio.sleep(0.1)
            raise TimeoutError("no group coordinator")
        finally:
            await admin.close()

    run(go())
    wait_full_isr(c, "__consumer_offsets")


def state(bootstrap: str) -> ClusterState:
    async def go() -> ClusterState:
        admin = ClusterAdmin(bootstrap)
        try:
            async with admin.session() as a:
                return await read_cluster(a, admin.node)
        finally:
            await admin.close()

    return run(go())  # type: ignore[no-any-return]


def dynamic_configs(addr: str, rtype: int, name: str) -> dict[str, str]:
    """The configs set on exactly this resource (a broker's own: asked of that broker)."""

    async def go() -> dict[str, str]:
        admin = await Admin.connect(addr)
        try:
            return {
                c.name: c.value for c in await admin.describe_configs(rtype, name) if c.config_source == DYNAMIC[rtype]
            }
        finally:
            await admin.close()

    return run(go())  # type: ignore[no-any-return]


def throttles_left(c: Any, topics: list[str]) -> dict[str, dict[str, str]]:
    keys = {*RATE_KEYS, ALTER_LOG_DIRS_RATE, *REPLICA_KEYS}
    left: dict[str, dict[str, str]] = {}
    for b in c.brokers:
        found = {k: v for k, v in dynamic_configs(b.address, BROKER, str(b.node_id)).items() if k in keys}
        if found:
            left[f"broker {b.node_id}"] = found
    for t in topics:
        found = {k: v for k, v in dynamic_configs(c.brokers[0].address, TOPIC, t).items() if k in keys}
        if found:
            left[f"topic {t}"] = found
    return left


def replica_dirs(node: Any) -> dict[tuple[str, int], str]:
    async def go() -> dict[tuple[str, int], str]:
        admin = await Admin.connect(node.address)
        try:
            return {
                tp: d.path for d in await admin.describe_log_dirs() for tp, r in d.replicas.items() if not r.is_future
            }
        finally:
            await admin.close()

    return run(go())  # type: ignore[no-any-return]


def assignment(c: Any, topics: list[str]) -> dict[tuple[str, int], list[int]]:
    return {(t, p): info.replicas for t in topics for p, info in describe(c, t).items()}


def planned(before: dict[tuple[str, int], list[int]], plan: Plan) -> dict[tuple[str, int], list[int]]:
    after = dict(before)
    for r in plan.reassignments:
        after[r.tp] = list(r.replicas)
    return after


def test_spread_onto_a_new_broker(make_cluster: Any, tmp_path: Path) -> None:
    c = make_cluster(3, dirs=2)
    topics = bulk_and_live(c, 6, 1536 * 1024)
    new = add_broker(c, dirs=2)
    rate = 3 * MB
    settings = MoverSettings(throttle_bytes_per_second=rate, max_concurrent_moves=20)
    seen: dict[str, Any] = {}

    def watch() -> None:
        if "throttled" not in seen:
            rates = dynamic_configs(new.address, BROKER, str(new.node_id))
            if all(rates.get(k) == str(rate) for k in RATE_KEYS):
                seen["throttled"] = rates
                seen["topic"] = dynamic_configs(c.brokers[0].address, TOPIC, "bulk")

    def disrupt(_: Any) -> None:
        seen["before"] = assignment(c, topics)
        t0 = time.monotonic()
        seen["progress"], seen["plans"] = drive(c.bootstrap(), settings, lambda m: m.spread([new.node_id]), watch)
        seen["seconds"] = time.monotonic() - t0
        # done means done: another step finds nothing to do
        assert tick(c.bootstrap(), settings, lambda m: m.spread([new.node_id]))[0]

    result = run_scenario(c, "live", tmp_path, "spread", disrupt)
    assert result.lost == 0 and result.acked > 400, result.line("spread")
    # the first step planned it all and started it all (20 moves at once allowed)
    assert len(seen["plans"]) == 1, [p.summary() for p in seen["plans"]]
    plan: Plan = seen["plans"][0]
    print(plan.summary(), f"in {seen['seconds']:.1f} s")
    # every replica where the plan said, the new broker holding its share
    final = assignment(c, topics)
    assert final == planned(seen["before"], plan)
    on_new = [tp for tp, reps in final.items() if new.node_id in reps]
    assert len(on_new) == plan.after.brokers[new.node_id].replicas >= 36 // 4
    # ... each in the log dir the plan chose for it (AlterReplicaLogDirs before the reassignment)
    wanted_dirs = {r.tp: r.dir_for(new.node_id) for r in plan.reassignments if new.node_id in r.adding}
    got_dirs = replica_dirs(new)
    assert {tp: got_dirs.get(tp) for tp in wanted_dirs} == wanted_dirs
    assert {str(d) for d in log_dirs(new, 2)} == set(wanted_dirs.values())

    # ... and the preferred leaders the plan gave it lead
    def leading() -> int:
        return sum(1 for t in topics for i in describe(c, t).values() if i.leader == new.node_id)

    assert plan.after.brokers[new.node_id].leaders > 0
    wait_until(lambda: leading() == plan.after.brokers[new.node_id].leaders, 15, "the new broker to lead its share")
    # throttled while it ran (at least the bytes copied onto the new broker at the rate), none left
    assert seen.get("throttled"), "the replication throttle was never seen on the new broker"
    assert "leader.replication.throttled.replicas" in seen["topic"], seen["topic"]
    copied = sum(r.size for r in plan.reassignments if new.node_id in r.adding)
    assert copied > 3 * MB and seen["seconds"] >= 0.7 * copied / rate, (copied, seen["seconds"])
    assert throttles_left(c, topics) == {}


def test_evacuate_a_broker(make_cluster: Any, tmp_path: Path) -> None:
    c = make_cluster(4)
    topics = bulk_and_live(c, 8, 512 * 1024)
    leaving = 3
    settings = MoverSettings(throttle_bytes_per_second=8 * MB, max_concurrent_moves=2)
    seen: dict[str, Any] = {"concurrent": 0}

    def watch() -> None:
        s = state(c.bootstrap())
        seen["concurrent"] = max(seen["concurrent"], sum(1 for r in s.ongoing.values() if r.adding))

    def disrupt(_: Any) -> None:
        seen["before"] = assignment(c, topics)
        seen["progress"], _ = drive(c.bootstrap(), settings, lambda m: m.evacuate([leaving]), watch)
        # its logs go once it learns it no longer hosts them (before the consumer's offsets
        # topic, which may well be placed on a broker that is still registered, exists)
        wait_until(
            lambda: not [tp for tp in replica_dirs(broker(c, leaving)) if tp[0] in topics],
            15,
            "the evacuated broker to delete its logs",
        )

    result = run_scenario(c, "live", tmp_path, "evacuate", disrupt)
    assert result.lost == 0 and result.acked > 400, result.line("evacuate")
    before, final = seen["before"], assignment(c, topics)
    assert not [tp for tp, reps in final.items() if leaving in reps]
    # only the replicas the leaving broker held were copied: other replica sets are as they were
    for tp, reps in before.items():
        if leaving not in reps:
            assert set(final[tp]) == set(reps), (tp, reps, final[tp])
        else:
            assert len(set(final[tp]) - set(reps)) == 1, (tp, reps, final[tp])
    # evenly over the brokers left, never more than two copies at once
    counts = [sum(1 for reps in final.values() if b in reps) for b in range(3)]
    assert max(counts) - min(counts) <= 1, counts
    assert 1 <= seen["concurrent"] <= 2, seen["concurrent"]
    assert any("to start" in p for p in seen["progress"])
    for t in topics:
        wait_full_isr(c, t)
    assert throttles_left(c, topics) == {}


def test_move_replicas_between_the_log_dirs_of_a_broker(make_cluster: Any, tmp_path: Path) -> None:
    c = make_cluster(3, dirs=2)
    topics = bulk_and_live(c, 4, 1024 * 1024)
    node = broker(c, 0)
    gone, stays = (str(d) for d in log_dirs(node, 2))
    before = replica_dirs(node)
    leaving = sorted(tp for tp, d in before.items() if d == gone)
    assert leaving and any(tp[0] == "bulk" for tp in leaving), before
    rate = 2 * MB
    settings = MoverSettings(throttle_bytes_per_second=rate, max_concurrent_moves=2)
    # no other dir to take them: refused, saying why
    done, why, _ = tick(c.bootstrap(), settings, lambda m: m.evacuate_dirs({0: [gone, stays]}))
    assert not done and why.startswith("refused:") and "no other online, uncordoned log dir" in why, why
    seen: dict[str, Any] = {}

    def watch() -> None:
        if "throttled" not in seen and dynamic_configs(node.address, BROKER, "0").get(ALTER_LOG_DIRS_RATE) == str(rate):
            seen["throttled"] = True

    def disrupt(_: Any) -> None:
        seen["assignment"] = assignment(c, topics)
        seen["progress"], _ = drive(c.bootstrap(), settings, lambda m: m.evacuate_dirs({0: [gone]}), watch)

    result = run_scenario(c, "live", tmp_path, "log-dir", disrupt)
    assert result.lost == 0 and result.acked > 400, result.line("log-dir")
    after = {tp: d for tp, d in replica_dirs(node).items() if tp in before}  # not the offsets topic
    assert set(after) == set(before) and all(d == stays for d in after.values()), after
    assert "replaced by the future one" in node.log_text()
    assert assignment(c, topics) == seen["assignment"]  # no replica changed brokers
    assert seen.get("throttled"), "replica.alter.log.dirs.io.max.bytes.per.second was never seen set"
    assert throttles_left(c, topics) == {}
