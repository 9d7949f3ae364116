"""Replication throttles during reassignment: the follower throttle bounds a new replica's
catch-up rate, and `kopfka reassign --throttle` / `--verify` set and clear the throttle configs
the way kafka-reassign-partitions does."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from harness import broker, create_topic, describe, run, wait_full_isr, wait_until
from kopfka.client.admin import Admin

pytestmark = pytest.mark.timeout(240)

BROKER, TOPIC = 4, 2
DYNAMIC_BROKER, DYNAMIC_TOPIC = 2, 1  # DescribeConfigs config_source
THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_LISTS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


async def _alter(addr: str, rtype: int, name: str, ops: list[tuple[str, int, str | None]]) -> None:
    admin = await Admin.connect(addr)
    try:
        await admin.incremental_alter_configs(rtype, name, ops)
    finally:
        await admin.close()


async def _dynamic(addr: str, rtype: int, name: str) -> dict[str, str]:
    """The configs set on exactly this resource (not defaults)."""
    admin = await Admin.connect(addr)
    try:
        configs = await admin.describe_configs(rtype, name)
    finally:
        await admin.close()
    own = DYNAMIC_BROKER if rtype == BROKER else DYNAMIC_TOPIC
    return {c.name: c.value for c in configs if c.config_source == own}


def _produce(bootstrap: str, topic: str, n: int, size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 16384})
    for _ in range(n):
        p.produce(topic, b"x" * size, partition=0)
    assert p.flush(60) == 0


def _log_bytes(d: Path) -> int:
    try:
        return sum(f.stat().st_size for f in d.glob("*.log"))
    except FileNotFoundError:  # a segment rolled or the dir is being created
        return 0


def _throttled_catch_up(c: Any, topic: str, total: int, rate: int, side: str) -> None:
    """Partition 0 of `topic` (replicas 0, 1, holding `total` bytes) gains a replica on broker 2
    under one side's throttle only (the leader's on broker 0, or the follower's on broker 2); its
    log grows at the rate, from its first fetched chunk until it holds everything."""
    addr = broker(c, 0).address
    node, replicas = ("0", "0:0,0:1") if side == "leader" else ("2", "0:2")
    run(_alter(addr, BROKER, node, [(f"{side}.replication.throttled.rate", 0, str(rate))]))
    run(_alter(addr, TOPIC, topic, [(f"{side}.replication.throttled.replicas", 0, replicas)]))
    time.sleep(1)
    res = broker(c, 0).kopfka("reassign", "--bootstrap-server", addr, "--execute", "--move", f"{topic}:0=0,1,2")
    assert res.returncode == 0, res.stderr
    samples: list[tuple[float, int]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        n = _log_bytes(broker(c, 2).dir / "logs" / f"{topic}-0")
        if n:
            samples.append((time.monotonic(), n))
        if n >= total:
            break
        time.sleep(0.05)
    assert samples and samples[-1][1] >= total, f"the new replica did not catch up within 60 s: {samples[-1:]}"
    (t0, n0), (t1, n1) = samples[0], samples[-1]
    measured = (n1 - n0) / (t1 - t0)
    print(f"caught up {n1} bytes in {t1 - t0:.1f} s after the first {n0}: {measured:.0f} B/s ({side} throttle {rate})")
    assert 0.8 * rate <= measured <= 1.2 * rate, f"catch-up ran at {measured:.0f} B/s against a {rate} B/s throttle"


def test_follower_throttle_bounds_catch_up_rate(make_cluster: Any) -> None:
    rate = 250_000
    c = make_cluster(3)
    create_topic(c, "ft", 1, 2, configs={"min.insync.replicas": "1"}, assignments={0: [0, 1]})
    wait_full_isr(c, "ft")
    _produce(c.bootstrap(), "ft", 3000, 1000)
    total = _log_bytes(broker(c, 0).dir / "logs" / "ft-0")
    assert total > 3_000_000
    # only the follower side, only on the new replica (broker 2): no leader throttle at all
    _throttled_catch_up(c, "ft", total, rate, "follower")
    wait_full_isr(c, "ft")
    assert describe(c, "ft")[0].replicas == [0, 1, 2]


@pytest.mark.parametrize("side", ["leader", "follower"])
def test_a_throttle_is_used_to_its_rate(make_cluster: Any, side: str) -> None:
    """A throttled replica's fetches pause while its side is over the rate, and the pause ends
    when the rate allows the next chunk, not a whole replica.fetch.wait.max.ms later: the leader's
    long poll of a held-back replica ends then, and so does the follower's long poll of its other
    partitions (here an in-sync one of the same leader) while the throttled one is left out of it.
    Otherwise each paced chunk is followed by a whole wait and a rate of a few MB/s, a
    rebalance's, runs at a fraction of itself (seen in benchmarks/move.py: three leaders throttled
    at 20 MiB/s moved 11 MiB/s together, the later moves 2 MiB/s each)."""
    rate = 4_000_000
    c = make_cluster(3, props={"replica.fetch.wait.max.ms": "500"})
    assignments = {0: [0, 1], 1: [0, 2]}  # partition 1: broker 2's in-sync neighbour
    create_topic(c, "lt", 2, 2, configs={"min.insync.replicas": "1"}, assignments=assignments)
    wait_full_isr(c, "lt")
    _produce(c.bootstrap(), "lt", 24000, 1000)
    total = _log_bytes(broker(c, 0).dir / "logs" / "lt-0")
    assert total > 20_000_000
    # one side only: the leader's rate on broker 0, or the follower's on broker 2
    _throttled_catch_up(c, "lt", total, rate, side)


def test_reassign_throttle_set_and_verified_away(make_cluster: Any) -> None:
    c = make_cluster(4)
    create_topic(c, "tv", 1, 3, configs={"min.insync.replicas": "2"}, assignments={0: [0, 1, 2]})
    wait_full_isr(c, "tv")
    _produce(c.bootstrap(), "tv", 1500, 1000)
    node = c.brokers[0]
    addr = node.address
    move = ("--move", "tv:0=3,1,2")
    res = node.kopfka("reassign", "--bootstrap-server", addr, "--execute", *move, "--throttle", "150000")
    assert res.returncode == 0, res.stderr
    assert "throttle limit was set to 150000 B/s on brokers 0,1,2,3" in res.stdout, res.stdout
    for b in range(4):  # a broker describes only its own configs
        dyn = run(_dynamic(broker(c, b).address, BROKER, str(b)))
        assert all(dyn.get(k) == "150000" for k in THROTTLES), (b, dyn)
    topic = run(_dynamic(addr, TOPIC, "tv"))
    assert sorted(topic["leader.replication.throttled.replicas"].split(",")) == ["0:0", "0:1", "0:2"], topic
    assert topic["follower.replication.throttled.replicas"] == "0:3", topic

    desc = node.kopfka("topics", "--bootstrap-server", addr, "--describe", "--topic", "tv")
    assert "Replicas: 3,1,2,0\t" in desc.stdout and "Adding Replicas: 3\tRemoving Replicas: 0" in desc.stdout, (
        desc.stdout
    )
    early = node.kopfka("reassign", "--bootstrap-server", addr, "--verify", *move)
    assert early.returncode == 0 and "tv-0 is still in progress" in early.stdout, early.stdout + early.stderr
    assert "Cleared" not in early.stdout
    assert run(_dynamic(broker(c, 3).address, BROKER, "3")).get("follower.replication.throttled.rate") == "150000"

    def verified() -> str | None:
        out = node.kopfka("reassign", "--bootstrap-server", addr, "--verify", *move).stdout
        return out if "tv-0 is completed" in out else None

    out = wait_until(verified, 90, "the throttled reassignment to complete", interval=1.0)
    assert "Cleared the broker-level throttles on brokers 0,1,2,3" in out and "topics tv" in out, out
    # each broker describes its own image, which follows the controller's one fetch later
    for b in range(4):
        wait_until(
            lambda b=b: not any(k in run(_dynamic(broker(c, b).address, BROKER, str(b))) for k in THROTTLES),
            10,
            f"broker {b}'s throttles cleared",
        )
    wait_until(lambda: not any(k in run(_dynamic(addr, TOPIC, "tv")) for k in REPLICA_LISTS), 10, "lists cleared")
    desc = node.kopfka("topics", "--bootstrap-server", addr, "--describe", "--topic", "tv")
    assert "Adding Replicas" not in desc.stdout and "Replicas: 3,1,2\t" in desc.stdout, desc.stdout
