"""Broker lifecycle against a separate controller quorum: session-timeout fencing after SIGKILL,
re-registration with a new epoch, and SIGTERM controlled shutdown through the logged states."""

from __future__ import annotations

import re
import time
from typing import Any

from cluster import Cluster, create_topic, metadata, run, wait_until


def live_brokers(addr: str) -> list[int]:
    return sorted(int(b.node_id) for b in run(metadata(addr)).brokers)


def epochs(log: str, node_id: int) -> list[int]:
    return [int(x) for x in re.findall(rf"Broker {node_id} registered with epoch (\d+)", log)]


def test_sigkilled_broker_is_fenced_then_rejoins_with_new_epoch(make_cluster: Any) -> None:
    c: Cluster = make_cluster(3, 3).start()
    victim, witness = c.brokers[2], c.brokers[0]
    res = run(create_topic(witness.address, "spread", partitions=6, rf=1))
    assert res.error_code == 0
    first_epoch = epochs(victim.log_text(), victim.node_id)[-1]
    killed_at = time.monotonic()
    victim.kill()
    wait_until(lambda: victim.node_id not in live_brokers(witness.address), 10, "the killed broker to be fenced")
    fenced_after = time.monotonic() - killed_at
    assert fenced_after >= 2.0, f"fenced after {fenced_after:.1f}s, before broker.session.timeout.ms=3000"
    # its partitions have no live leader now (RF=1): LEADER_NOT_AVAILABLE rather than a dead broker
    parts = [p for t in run(metadata(witness.address, ["spread"])).topics for p in t.partitions]
    assert any(p.error_code != 0 and p.leader_id == -1 for p in parts)

    victim.start()
    victim.wait_ready(30)
    new_epoch = epochs(victim.log_text(), victim.node_id)[-1]
    assert new_epoch > first_epoch
    assert "transitioning from STARTING to RECOVERY" in victim.log_text()
    wait_until(lambda: victim.node_id in live_brokers(witness.address), 10, "the restarted broker to be unfenced")
    parts = [p for t in run(metadata(witness.address, ["spread"])).topics for p in t.partitions]
    assert all(p.error_code == 0 and p.leader_id >= 0 for p in parts)


def test_sigterm_runs_controlled_shutdown_and_exits_zero(make_cluster: Any) -> None:
    c: Cluster = make_cluster(3, 2).start()
    b = c.brokers[1]
    assert b.terminate() == 0
    log = b.log_text()
    order = [
        "transitioning from NOT_RUNNING to STARTING",
        "transitioning from STARTING to RECOVERY",
        "transitioning from RECOVERY to RUNNING",
        "transitioning from RUNNING to PENDING_CONTROLLED_SHUTDOWN",
        "transitioning from PENDING_CONTROLLED_SHUTDOWN to SHUTTING_DOWN",
    ]
    positions = [log.find(s) for s in order]
    assert all(p >= 0 for p in positions), (positions, log[-3000:])
    assert positions == sorted(positions)
    # the controller was told (in_controlled_shutdown) and the broker left the live set
    wait_until(lambda: b.node_id not in live_brokers(c.brokers[0].address), 10, "the stopped broker to be fenced")


def test_controlled_shutdown_does_not_wait_for_the_next_heartbeats(make_cluster: Any) -> None:
    """A broker in controlled shutdown may stop once it leads nothing and every active broker has
    applied the records that moved its leadership and ISR memberships away (Kafka's
    BrokerHeartbeatManager); brokers report what they applied in their heartbeats. Here they
    heartbeat every 10 s, yet a SIGTERMed leader stops within a few seconds: a broker that sees a
    peer enter controlled shutdown heartbeats at once instead of at its next interval."""
    slow = {"broker.heartbeat.interval.ms": "10000", "broker.session.timeout.ms": "30000"}
    c: Cluster = make_cluster(1, 3, props=slow)
    c.start()
    addr = c.brokers[0].address
    assert run(create_topic(addr, "led", partitions=3, rf=3)).error_code == 0

    def full() -> bool:
        parts = [p for t in run(metadata(addr, ["led"])).topics for p in t.partitions]
        return len(parts) == 3 and all(len(p.isr_nodes) == 3 for p in parts)

    wait_until(full, 30, "every ISR to be full")
    victim = c.brokers[2]
    led = [p for t in run(metadata(addr, ["led"])).topics for p in t.partitions if p.leader_id == victim.node_id]
    assert led, "the victim leads a partition"
    t0 = time.monotonic()
    assert victim.terminate() == 0
    took = time.monotonic() - t0
    assert took < 4, f"the controlled shutdown took {took:.1f} s (heartbeats every 10 s)"
    parts = [p for t in run(metadata(addr, ["led"])).topics for p in t.partitions]
    assert all(p.leader_id != victim.node_id and victim.node_id not in p.isr_nodes for p in parts)
