"""Combined-mode nodes (`process.roles=broker,controller`) on a 3-voter dynamic quorum, the
operator's "combined" pool: they form a cluster and serve clients, survive kill -9 of the active
controller (which is also a broker), and SIGTERM runs a controlled shutdown and exits 0."""

from __future__ import annotations

import time
from pathlib import Path

from cluster import FAST, Node, create_topic, describe_quorum, free_port, metadata, run, wait_until
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kopfka import uuids


class CombinedNode(Node):
    """A broker and controller in one process: PLAINTEXT for clients, CONTROLLER for the quorum."""

    def __init__(self, root: Path, node_id: int, host: str) -> None:
        super().__init__(root, node_id, "combined", host, props={})
        self.controller_port = free_port(host)

    @property
    def controller_address(self) -> str:
        return f"{self.host}:{self.controller_port}"

    def write_config(self, extra: dict[str, str]) -> None:
        base = {
            "node.id": str(self.node_id),
            "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(self.dir / "logs"),
            "metadata.log.dir": str(self.dir / "metadata"),
            "kopfka.http.listener": f"{self.host}:{self.http_port}",
            **FAST,
            **extra,
        }
        self.config.write_text("".join(f"{k}={v}\n" for k, v in base.items()))


def quorum_leader(nodes: list[CombinedNode]) -> int:
    for n in nodes:
        if not n.alive:
            continue
        try:
            p = run(describe_quorum(n.controller_address)).topics[0].partitions[0]
        except (OSError, ConnectionError, TimeoutError):
            continue
        if p.error_code == 0 and p.leader_id >= 0:
            return int(p.leader_id)
    return -1


def produce_and_read(bootstrap: str, topic: str, n: int) -> list[bytes]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    errors: list[str] = []
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=0, on_delivery=lambda e, m: e and errors.append(str(e)))
    assert p.flush(30) == 0 and not errors, errors[:3]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "combined", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(out) < n and time.monotonic() < deadline:
            out += [m.value() for m in c.consume(100, 0.5) if m.error() is None]
        return out
    finally:
        c.close()


def test_three_combined_nodes_serve_fail_over_and_shut_down_cleanly(tmp_path: Path) -> None:
    nodes = [CombinedNode(tmp_path, i, f"127.0.0.{11 + i}") for i in range(3)]
    cluster_id = uuids.to_str(uuids.random_uuid())
    quorum = {"controller.quorum.bootstrap.servers": ",".join(n.controller_address for n in nodes)}
    initial = ",".join(f"{n.node_id}@{n.controller_address}:{n.directory_id}" for n in nodes)
    try:
        for n in nodes:
            n.write_config(quorum)
            res = n.format(cluster_id, "--initial-controllers", initial)
            assert res.returncode == 0, res.stderr
        for n in nodes:
            n.start()
        for n in nodes:
            n.wait_ready(60)
        bootstrap = ",".join(n.address for n in nodes)
        # node 0 lists node 2 once its metadata image holds node 2's unfencing, one fetch after node
        # 2 itself saw it (a three-worker CI run read [0, 1] here)
        wait_until(
            lambda: sorted(b.node_id for b in run(metadata(nodes[0].address)).brokers) == [0, 1, 2],
            15,
            "node 0's metadata to list all three brokers",
        )
        leader = wait_until(lambda: quorum_leader(nodes) + 1, 15, "a quorum leader") - 1
        voters = run(describe_quorum(nodes[leader].controller_address)).topics[0].partitions[0].current_voters
        assert sorted(v.replica_id for v in voters) == [0, 1, 2]
        assert run(create_topic(nodes[2].address, "before", partitions=1)).error_code == 0
        assert produce_and_read(bootstrap, "before", 20) == [f"v{i}".encode() for i in range(20)]

        # kill -9 the active controller: a new one is elected among the other two
        old = wait_until(lambda: quorum_leader(nodes) + 1, 15, "a quorum leader") - 1
        nodes[old].kill()
        survivors = [n for n in nodes if n.node_id != old]
        wait_until(lambda: quorum_leader(survivors) not in (-1, old), 30, "a new active controller")
        wait_until(
            lambda: old not in [b.node_id for b in run(metadata(survivors[0].address)).brokers],
            15,
            "the killed node's broker to be fenced",
        )
        assert run(create_topic(survivors[0].address, "after", partitions=1)).error_code == 0
        live = ",".join(n.address for n in survivors)
        assert produce_and_read(live, "after", 10) == [f"v{i}".encode() for i in range(10)]

        nodes[old].start()
        nodes[old].wait_ready(40)
        wait_until(
            lambda: sorted(b.node_id for b in run(metadata(nodes[old].address)).brokers) == [0, 1, 2],
            15,
            "the restarted node back in the cluster",
        )

        # SIGTERM: controlled shutdown of the broker side, then the controller side, exit 0
        victim = survivors[0]
        assert victim.terminate() == 0, victim.log_text()[-3000:]
        text = victim.log_text()
        steps = [
            "transitioning from RUNNING to PENDING_CONTROLLED_SHUTDOWN",
            "transitioning from PENDING_CONTROLLED_SHUTDOWN to SHUTTING_DOWN",
        ]
        pos = [text.rfind(s) for s in steps]
        assert all(p >= 0 for p in pos) and pos == sorted(pos), text[-3000:]
        rest = [n for n in nodes if n is not victim]
        wait_until(lambda: quorum_leader(rest) >= 0, 30, "a leader among the two remaining voters")
        assert run(create_topic(rest[0].address, "last", partitions=1)).error_code == 0
    finally:
        for n in nodes:
            n.kill()
