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
