"""`kopfka reassign` and `kopfka topics --describe` against a 4-broker cluster, with a leader
replication throttle holding the move in progress long enough to watch it."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Producer
from harness import broker, create_topic, describe, run, wait_full_isr, wait_until
from kopfka.client.admin import Admin

pytestmark = pytest.mark.timeout(240)


async def _alter(addr: str, rtype: int, name: str, ops: list[tuple[str, int, str | None]]) -> None:
    admin = await Admin.connect(addr)
    try:
        await admin.incremental_alter_configs(rtype, name, ops)
    finally:
        await admin.close()


def test_reassign_cli_with_throttle(make_cluster: Any) -> None:
    c = make_cluster(4)
    create_topic(c, "mv", 1, 3, configs={"min.insync.replicas": "2"}, assignments={0: [0, 1, 2]})
    wait_full_isr(c, "mv")
    prod = Producer({"bootstrap.servers": c.bootstrap(), "acks": "all", "linger.ms": 20})
    for _ in range(2000):
        prod.produce("mv", b"x" * 1000, partition=0)
    assert prod.flush(60) == 0
    addr = broker(c, 0).address
    node = c.brokers[0]
    # throttle the leader side to 200 kB/s: the paced 2 MB copy takes ~10 s
    run(_alter(addr, 4, "", [("leader.replication.throttled.rate", 0, "200000")]))
    run(_alter(addr, 2, "mv", [("leader.replication.throttled.replicas", 0, "*")]))
    time.sleep(1)
    started = time.monotonic()
    res = node.kopfka("reassign", "--bootstrap-server", addr, "--execute", "--move", "mv:0=3,1,2")
    assert res.returncode == 0, res.stderr
    assert "mv-0: started" in res.stdout
    listed = node.kopfka("reassign", "--bootstrap-server", addr, "--list")
    assert "mv-0\tReplicas: 3,1,2,0\tAdding: 3\tRemoving: 0" in listed.stdout, listed.stdout
    assert "Progress: 0/1" in listed.stdout
    desc = node.kopfka("topics", "--bootstrap-server", addr, "--describe", "--topic", "mv")
    assert "Replicas: 3,1,2,0" in desc.stdout and "under-replicated" in desc.stdout, desc.stdout
    waited = node.kopfka("reassign", "--bootstrap-server", addr, "--execute", "--move", "mv:0=3,1,2", "--wait",
                         timeout=120)
    assert waited.returncode == 0 and "All reassignments completed." in waited.stdout, waited.stdout + waited.stderr
    took = time.monotonic() - started
    assert took > 5, f"the throttle should have slowed the 2 MB copy down ({took:.1f}s)"
    final = describe(c, "mv")[0]
    assert final.replicas == [3, 1, 2] and sorted(final.isr) == [1, 2, 3]
    assert node.kopfka("reassign", "--bootstrap-server", addr, "--list").stdout.startswith("No partition")
    desc = node.kopfka("topics", "--bootstrap-server", addr, "--describe", "--topic", "mv")
    assert "under-replicated" not in desc.stdout and "Replicas: 3,1,2\t" in desc.stdout, desc.stdout
    wait_until(lambda: not (c.brokers[0].dir / "logs" / "mv-0").exists(), 10, "the removed replica's log deleted")
