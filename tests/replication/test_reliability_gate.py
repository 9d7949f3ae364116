"""The reliability gate: no acknowledged record is lost while fewer than RF replicas fail.

3 brokers + 1 controller, topic RF=3 with min.insync.replicas=2; Kafka's verifiable producer
(acks=all, idempotence on) writes continuously through each disruption, then the verifiable
consumer reads the topic back. Each test prints acked / consumed / lost / duplicated counts.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from harness import (
    VerifiableProducer,
    broker,
    create_topic,
    describe,
    request,
    run,
    run_scenario,
    wait_full_isr,
    wait_until,
)

TOPIC = "gate"
pytestmark = pytest.mark.timeout(300)


def _assert_clean(a: Any) -> None:
    assert a.acked > 500, a
    assert a.lost == 0, f"acknowledged records lost: {a.lost_sample}"
    assert a.duplicated == 0, a
    assert a.out_of_order == 0, a


def _cluster(
    make_cluster: Any,
    brokers: int = 3,
    props: dict[str, str] | None = None,
    assignments: dict[int, list[int]] | None = None,
) -> Any:
    c = make_cluster(brokers, props)
    create_topic(c, TOPIC, 3, 3, assignments=assignments)
    wait_full_isr(c, TOPIC, 30)
    return c


def test_rolling_controlled_shutdown(make_cluster: Any, tmp_path: Path) -> None:
    """(a) each broker in turn gets SIGTERM (controlled shutdown) and restarts."""
    c = _cluster(make_cluster)

    def disrupt(prod: VerifiableProducer) -> None:
        for b in c.brokers:
            led = [p for p, i in describe(c, TOPIC).items() if i.leader == b.node_id]
            assert b.terminate(timeout=60) == 0
            after = describe(c, TOPIC)
            # leadership moved to another ISR member before the broker stopped
            assert all(after[p].leader not in (-1, b.node_id) for p in led), after
            assert all(b.node_id not in i.isr for i in after.values()), after
            n = prod.acked_count
            prod.wait_acked(n + 100, timeout=60)  # the cluster keeps accepting acks=all writes
            b.start()
            b.wait_ready(60)
            wait_full_isr(c, TOPIC, 60)

    _assert_clean(run_scenario(c, TOPIC, tmp_path, "rolling-sigterm", disrupt))
    # every shutdown ended on its own: no task had to be abandoned by the last-resort drain
    assert not [b.node_id for b in c.brokers if "did not stop when cancelled" in b.log_text()]


def test_sigkill_every_leader(make_cluster: Any, tmp_path: Path) -> None:
    """(b) the leader of every partition gets SIGKILL once (and comes back)."""
    c = _cluster(make_cluster)

    def disrupt(prod: VerifiableProducer) -> None:
        for pid in sorted(describe(c, TOPIC)):
            leader = describe(c, TOPIC)[pid].leader
            victim = broker(c, leader)
            victim.kill()
            # the controller fences it after broker.session.timeout.ms and elects from the ISR
            wait_until(
                lambda: describe(c, TOPIC)[pid].leader not in (-1, leader),  # noqa: B023
                30,
                f"a new leader for partition {pid}",
            )
            n = prod.acked_count
            prod.wait_acked(n + 100, timeout=60)
            victim.start()
            victim.wait_ready(60)
            wait_full_isr(c, TOPIC, 60)

    _assert_clean(run_scenario(c, TOPIC, tmp_path, "sigkill-leaders", disrupt))


def test_frozen_follower(make_cluster: Any, tmp_path: Path) -> None:
    """(c) a broker is frozen (SIGSTOP) past replica.lag.time.max.ms, shrunk out of the ISRs it
    follows in, then resumed and re-added. The session timeout is longer than the freeze, so this
    is the ISR path, not fencing."""
    c = _cluster(make_cluster, props={"broker.session.timeout.ms": "15000"})

    def disrupt(prod: VerifiableProducer) -> None:
        victim = c.brokers[2]
        followed = [p for p, i in describe(c, TOPIC).items() if i.leader != victim.node_id]
        assert victim.proc is not None
        os.kill(victim.proc.pid, signal.SIGSTOP)
        try:
            wait_until(
                lambda: all(victim.node_id not in describe(c, TOPIC)[p].isr for p in followed),
                20,
                "the frozen follower to leave the ISRs",
            )
            n = prod.acked_count
            prod.wait_acked(n + 100, timeout=60)  # min.insync.replicas=2 still met by the rest
        finally:
            os.kill(victim.proc.pid, signal.SIGCONT)
        wait_full_isr(c, TOPIC, 60)

    _assert_clean(run_scenario(c, TOPIC, tmp_path, "sigstop-follower", disrupt))


async def _reassign(addr: str, moves: dict[int, list[int]]) -> Any:
    body = {
        "timeout": 30000,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": p, "replicas": r} for p, r in moves.items()]}],
    }
    return await request(addr, 45, 0, body, timeout=30)


async def _ongoing(addr: str) -> Any:
    return await request(addr, 46, 0, {"timeout": 30000, "topics": None}, timeout=30)


def test_reassign_every_partition(make_cluster: Any, tmp_path: Path) -> None:
    """(d) a 4th broker joins; every partition moves to a new replica set (each replica shifted
    by one broker: one replica is added, one leaves, and some leaders move)."""
    old = {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]}
    c = _cluster(make_cluster, brokers=4, assignments=old)
    new = {p: [(r + 1) % 4 for r in rs] for p, rs in old.items()}
    seen_progress: list[Any] = []

    def disrupt(prod: VerifiableProducer) -> None:
        resp = run(_reassign(c.bootstrap().split(",")[0], new))
        assert int(resp.error_code) == 0, resp
        assert all(int(p.error_code) == 0 for t in resp.responses for p in t.partitions), resp

        def done() -> bool:
            ongoing = run(_ongoing(c.bootstrap().split(",")[0]))
            seen_progress.extend(p for t in ongoing.topics for p in t.partitions)
            return not ongoing.topics

        wait_until(done, 90, "the reassignments to complete", interval=0.2)
        n = prod.acked_count
        prod.wait_acked(n + 100, timeout=60)

    a = run_scenario(c, TOPIC, tmp_path, "reassign", disrupt)
    final = describe(c, TOPIC)
    assert {p: i.replicas for p, i in final.items()} == new, final
    print(f"[reassign] progress snapshots seen: {len(seen_progress)}; final {final}")
    _assert_clean(a)
    # the leaving replicas' logs are gone
    time.sleep(1)
    for p, rs in old.items():
        for r in rs:
            if r not in new[p]:
                assert not (c.brokers[r].dir / "logs" / f"{TOPIC}-{p}").exists()
