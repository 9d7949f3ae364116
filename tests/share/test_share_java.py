"""Kafka's own share consumer (KafkaShareConsumer, kafka-clients 4.3) and kafka-share-groups
against kopfka: records shared by several consumers and delivered once each, redelivered after a
release or a lock timeout with a higher delivery count, archived after the delivery limit; the
tool's listing, describe, reset and delete. One JVM runs all the consumer scenarios."""

from __future__ import annotations

import re

import pytest
from java_clients import JavaAdmin
from kafka_ref import run_tool
from kopfka_process import KopfkaProcess

from .helpers import create_topic, produce

EARLIEST = "share.auto.offset.reset=earliest"


def test_kafka_share_consumer_scenarios(share_broker: KopfkaProcess, share_peer: JavaAdmin) -> None:
    b = share_broker.bootstrap
    for topic, partitions in (("shared", 3), ("released", 1), ("archived", 1), ("locked", 1)):
        create_topic(b, topic, partitions)
    out = share_peer.run(
        b,
        ["group-config", "gs", EARLIEST], ["share", "gs", "shared", "3", "60", "40000"], ["offsets", "gs"],
        ["group-config", "gr", EARLIEST], ["produce", "released", "4"], ["release-then-accept", "gr", "released", "4"],
        ["group-config", "ga", EARLIEST], ["produce", "archived", "1"], ["release-until-archived", "ga", "archived"],
        ["group-config", "gl", EARLIEST], ["produce", "locked", "3"], ["lock-timeout", "gl", "locked", "3", "4000"],
        ["offsets", "gl"], ["describe", "gs"], ["list-share-groups"],
        ["group-config", "gs", "share.delivery.count.limit=11"],
    )  # fmt: skip
    assert all("ok" in r for r in out[:-1]), out
    shared = out[1]["ok"]
    # 60 records over 3 partitions and 3 consumers: each record delivered exactly once
    assert (shared["distinct"], shared["deliveries"], shared["duplicated"]) == (60, 60, 0), shared
    assert shared["assigned_before_produce"] == 3, shared  # all three consumers held partitions
    assert sum(1 for n in shared["per_consumer"].values() if n > 0) >= 2, shared  # the work was shared
    assert out[2]["ok"] == {f"shared-{p}": [20, 0] for p in range(3)}  # start offsets past all, no lag
    released = out[5]["ok"]
    assert released["first"] == {f"v{i}": 1 for i in range(4)}
    assert released["again"] == {f"v{i}": 2 for i in range(4)} and released["after_accept"] == 0
    assert out[8]["ok"] == [1, 2, 3]  # group.share.delivery.count.limit=3, then archived
    locked = out[11]["ok"]
    assert locked["lock_ms"] == 3000 and locked["b_before_expiry"] == 0
    assert locked["held"] == {f"v{i}": 1 for i in range(3)}
    assert locked["b_after_expiry"] == {f"v{i}": 2 for i in range(3)}
    assert locked["late_ack"] == {"locked-0": "InvalidRecordStateException"} and locked["b_ack"] == {"locked-0": "none"}
    assert out[12]["ok"] == {"locked-0": [3, 0]}
    assert out[13]["ok"]["state"] == "Empty" and out[13]["ok"]["members"] == []
    assert {g for g, _ in out[14]["ok"]} >= {"gs", "gr", "ga", "gl"}
    assert out[15]["error"] == "InvalidConfigurationException"  # above group.share.max.delivery.count.limit
    assert "group.share.max.delivery.count.limit" in out[15]["message"]


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip() and not line.startswith("GROUP")]


@pytest.mark.timeout(300)
def test_kafka_share_groups_tool(share_broker: KopfkaProcess) -> None:
    """kafka-share-groups --list/--describe (offsets, members, state)/--reset-offsets/--delete-offsets/--delete."""
    from confluent_kafka import ShareConsumer

    b = share_broker.bootstrap
    create_topic(b, "tooled", 2)
    produce(b, "tooled", [f"v{i}".encode() for i in range(10)], partition=0)
    produce(b, "tooled", [f"w{i}".encode() for i in range(6)], partition=1)
    run_tool(
        "kafka-configs",
        "--bootstrap-server",
        b,
        "--alter",
        "--entity-type",
        "groups",
        "--entity-name",
        "gt",
        "--add-config",
        EARLIEST,
    )
    described = run_tool(
        "kafka-configs", "--bootstrap-server", b, "--describe", "--entity-type", "groups", "--entity-name", "gt"
    ).stdout
    assert "share.auto.offset.reset=earliest" in described
    c = ShareConsumer({"bootstrap.servers": b, "group.id": "gt"})
    try:
        c.subscribe(["tooled"])
        got = 0
        for _ in range(40):
            got += sum(1 for m in c.poll(0.5) if m.error() is None)
            if got >= 16:
                break
        assert got == 16
        c.commit_sync()
        tool = ["kafka-share-groups", "--bootstrap-server", b]
        assert "gt" in run_tool(*tool, "--list").stdout.split()
        members = _rows(run_tool(*tool, "--describe", "--group", "gt", "--members").stdout)
        assert len(members) == 1 and members[0][-1] == "tooled:0,1", members
        state = _rows(run_tool(*tool, "--describe", "--group", "gt", "--state").stdout)
        assert state[0][0] == "gt" and state[0][-2:] == ["Stable", "1"], state
        # a group with members cannot be reset
        refused = run_tool(
            *tool, "--reset-offsets", "--group", "gt", "--topic", "tooled", "--to-earliest", "--execute", check=False
        )
        assert "not empty" in (refused.stdout + refused.stderr).lower() or refused.returncode != 0
    finally:
        c.close()
    offsets = {(r[1], r[2]): r[3:] for r in _rows(run_tool(*tool, "--describe", "--group", "gt").stdout)}
    assert offsets == {("tooled", "0"): ["10", "0"], ("tooled", "1"): ["6", "0"]}
    assert "Empty" in run_tool(*tool, "--describe", "--group", "gt", "--state").stdout
    reset = run_tool(
        *tool, "--reset-offsets", "--group", "gt", "--topic", "tooled:0", "--to-earliest", "--execute"
    ).stdout
    assert re.search(r"gt\s+tooled\s+0\s+0", reset), reset
    offsets = {(r[1], r[2]): r[3:] for r in _rows(run_tool(*tool, "--describe", "--group", "gt").stdout)}
    assert offsets[("tooled", "0")] == ["0", "10"]  # the 10 records are to be delivered again
    assert "Successful" in run_tool(*tool, "--delete-offsets", "--group", "gt", "--topic", "tooled").stdout
    assert "no offset information" in run_tool(*tool, "--describe", "--group", "gt").stdout
    assert "successful" in run_tool(*tool, "--delete", "--group", "gt").stdout
    assert "gt" not in run_tool(*tool, "--list").stdout.split()
