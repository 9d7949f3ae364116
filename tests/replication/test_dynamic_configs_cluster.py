"""Dynamic broker configs on a KRaft cluster (1 controller + 2 brokers, separate processes), set
with `kopfka configs` as kafka-configs would: num.replica.fetchers changes how many fetch
connections a follower keeps to its leader, min.insync.replicas at the cluster default decides
acks=all on a shrunk ISR, unclean.leader.election.enable at the cluster default gets a leaderless
partition a leader outside its ISR (Kafka's periodic maybeElectUncleanLeaders), and the controller
itself refuses what Kafka cannot change at runtime."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from harness import broker, create_topic, describe, request, run, wait_full_isr, wait_until
from kopfka.protocol.errors import ErrorCode
from kopfka.server.replica_fetcher import ReplicaFetcherManager

from tests.integration.test_dynamic_broker_config import produce_raw

pytestmark = pytest.mark.timeout(240)


def configs(c: Any, *args: str) -> None:
    node = next(b for b in c.brokers if b.alive)
    res = node.kopfka("configs", "--bootstrap-server", node.address, "--entity-type", "brokers", *args)
    assert res.returncode == 0, res.stdout + res.stderr


def _hex_addr(addr: str) -> str:
    host, _, port = addr.rpartition(":")
    a, b, c_, d = (int(x) for x in host.split("."))
    return f"{d:02X}{c_:02X}{b:02X}{a:02X}:{int(port):04X}"


def connections(pid: int, dst: str) -> int:
    """ESTABLISHED TCP connections the process `pid` holds to dst (host:port): its sockets'
    inodes (/proc/<pid>/fd) matched against /proc/net/tcp."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    want = _hex_addr(dst)
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    return sum(1 for r in rows if r[2] == want and r[3] == "01" and r[9] in inodes)


def fetcher_ids(topic: str, partitions: int, n: int) -> set[int]:
    """Kafka's (and kopfka's) fetcher id of each partition: hash(topic, partition) % n."""
    probe = ReplicaFetcherManager.__new__(ReplicaFetcherManager)
    probe.num_fetchers = n
    return {probe._fetcher_id((topic, p)) for p in range(partitions)}


def test_num_replica_fetchers_resizes_the_fetch_connections(make_cluster: Any) -> None:
    c = make_cluster(2)
    b0, b1 = broker(c, 0), broker(c, 1)
    create_topic(c, "fetchers", configs={"min.insync.replicas": "1"}, assignments={p: [0, 1] for p in range(8)})
    wait_full_isr(c, "fetchers")
    wait_until(lambda: connections(b1.proc.pid, b0.address) == 1, 10, "one fetch connection from broker 1")
    for n in (2, 4):
        want = len(fetcher_ids("fetchers", 8, n))
        assert want > 1
        configs(c, "--entity-default", "--alter", "--add-config", f"num.replica.fetchers={n}")
        wait_until(lambda: connections(b1.proc.pid, b0.address) == want, 15, f"{want} fetch connections")  # noqa: B023
    # replication goes on over the new fetchers
    p = Producer({"bootstrap.servers": c.bootstrap(), "acks": "all"})
    for i in range(80):
        p.produce("fetchers", b"v%d" % i, partition=i % 8)
    assert p.flush(30) == 0
    wait_full_isr(c, "fetchers")
    # as in Kafka, a pool may shrink to no less than half at a time, deleting the key included
    configs(c, "--entity-default", "--alter", "--add-config", "num.replica.fetchers=2")
    configs(c, "--entity-default", "--alter", "--delete-config", "num.replica.fetchers")
    wait_until(lambda: connections(b1.proc.pid, b0.address) == 1, 15, "back to one fetch connection")


def test_min_insync_replicas_at_the_cluster_default(make_cluster: Any) -> None:
    """acks=all on an ISR shrunk to the leader: refused at the static 2, accepted once the cluster
    default is 1, refused again at 2 (ELR is on: the cluster-level value is set, never deleted)."""
    c = make_cluster(2)
    b0, b1 = broker(c, 0), broker(c, 1)
    create_topic(c, "mis", 1, configs={"retention.ms": "-1"}, assignments={0: [0, 1]})
    wait_full_isr(c, "mis")
    b1.kill()
    wait_until(lambda: describe(c, "mis")[0].isr == [0], 20, "broker 1 out of the ISR")
    assert produce_raw(b0.address, "mis", b"x")[0] == ErrorCode.not_enough_replicas
    configs(c, "--entity-default", "--alter", "--add-config", "min.insync.replicas=1")
    wait_until(lambda: produce_raw(b0.address, "mis", b"x")[0] == ErrorCode.none, 10, "acks=all accepted")
    configs(c, "--entity-default", "--alter", "--add-config", "min.insync.replicas=2")
    wait_until(lambda: produce_raw(b0.address, "mis", b"x")[0] == ErrorCode.not_enough_replicas, 10, "refused")


def test_unclean_leader_election_enabled_at_runtime_elects_a_leader(make_cluster: Any) -> None:
    c = make_cluster(2, props={"unclean.leader.election.interval.ms": "300"})
    b0, b1 = broker(c, 0), broker(c, 1)
    create_topic(c, "unclean", 1, configs={"min.insync.replicas": "1"}, assignments={0: [0, 1]})
    wait_full_isr(c, "unclean")
    b1.kill()
    wait_until(lambda: describe(c, "unclean")[0].isr == [0], 20, "broker 1 out of the ISR")
    p = Producer({"bootstrap.servers": b0.address, "acks": "all"})
    p.produce("unclean", b"only on broker 0", partition=0)
    assert p.flush(30) == 0
    b0.kill()
    b1.start()
    b1.wait_ready()
    wait_until(lambda: describe(c, "unclean")[0].leader == -1, 20, "the partition to be leaderless")
    time.sleep(1.5)  # several unclean-election intervals: disabled, so nothing happens
    assert describe(c, "unclean")[0].leader == -1, "elected outside the ISR while unclean election is disabled"
    configs(c, "--entity-default", "--alter", "--add-config", "unclean.leader.election.enable=true")
    state = wait_until(lambda: (d := describe(c, "unclean")[0]).leader == 1 and d, 15, "an unclean leader election")
    assert state.isr == [1]


def test_the_controller_refuses_static_broker_configs(make_cluster: Any) -> None:
    c = make_cluster(1)
    controller = c.controllers[0]

    async def alter(name: str, key: str, value: str) -> Any:
        body = {
            "resources": [
                {
                    "resource_type": 4,
                    "resource_name": name,
                    "configs": [{"name": key, "config_operation": 0, "value": value}],
                }
            ],
            "validate_only": False,
        }
        return (await request(controller.address, 44, 1, body)).responses[0]

    r = run(alter("", "num.partitions", "3"))
    assert (r.error_code, r.error_message) == (42, "Cannot update these configs dynamically: [num.partitions]")
    r = run(alter("", "listener.name.plaintext.ssl.keystore.location", "/x"))
    assert r.error_code == 42 and r.error_message.startswith("Cannot update these configs at default cluster level")
    r = run(alter("x", "log.retention.ms", "1000"))
    assert (r.error_code, r.error_message) == (42, "Unable to parse broker name as a base 10 number.")
    r = run(alter("", "log.retention.ms", "1000"))
    assert r.error_code == 0
