"""Log dir reporting on a KRaft cluster (JBOD, KIP-858, cordoned dirs), checked in the
controller's own metadata log: brokers register their online dir ids and report cordoned dirs
once caught up; new replicas avoid a broker whose dirs are all cordoned; AssignReplicasToDirs
records the dir of every replica in `PartitionRecord.directories`; a dir that fails at runtime is
reported in heartbeats, leaves the registration, its partitions lose their leader, and Metadata
names their replicas there offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cluster import Cluster, create_topic, metadata, run, wait_until
from kopfka.log import meta_properties
from kopfka.metadata import records as mr
from kopfka.metadata.image import MetadataImage, replay
from kopfka.protocol.record_codec import decode_records
from kopfka.protocol.records import iter_batches
from kopfka_operator.log_dir_health import OfflineDirs, read_offline_dirs
from kopfka_operator.roll.kafka_view import AdminKafkaView

FAST_LOG = {
    "log.initial.task.delay.ms": "0",
    "log.flush.offset.checkpoint.interval.ms": "200",
    "log.flush.start.offset.checkpoint.interval.ms": "200",
}


def controller_image(node: Any) -> MetadataImage:
    """Replay the controller's metadata log segments, read-only, as the controller did."""
    seg_dir = node.dir / "metadata" / "__cluster_metadata-0"
    recs: list[mr.MetadataRecord] = []
    for seg in sorted(seg_dir.glob("*.log")):
        data = seg.read_bytes()
        for header in iter_batches(data, allow_partial_tail=True):
            for r in decode_records(data, header):
                rec = mr.decode(r.value or b"")
                if not isinstance(rec, mr.BeginTransactionRecord | mr.EndTransactionRecord):
                    recs.append(rec)
    return replay(recs)


def dir_id(d: Path) -> str:
    meta = meta_properties.read(d)
    assert meta is not None
    return meta.directory_id


def test_dirs_registered_cordoned_assigned_and_failed(tmp_path: Path) -> None:
    c = Cluster(tmp_path / "c", 1, 2, props=FAST_LOG)
    b0, b1 = c.brokers
    a, b = b0.dir / "logs-a", b0.dir / "logs-b"
    cd, dd = b1.dir / "logs-c", b1.dir / "logs-d"
    b0.props = {**FAST_LOG, "log.dirs": f"{a},{b}"}
    b1.props = {**FAST_LOG, "log.dirs": f"{cd},{dd}", "cordoned.log.dirs": f"{cd},{dd}"}
    try:
        c.format_all()
        c.start()
        ctl = c.controllers[0]
        ids0, ids1 = (dir_id(a), dir_id(b)), (dir_id(cd), dir_id(dd))

        def registered() -> bool:
            img = controller_image(ctl)
            r0, r1 = img.brokers.get(0), img.brokers.get(1)
            return (
                r0 is not None
                and r1 is not None
                and sorted(r0.log_dirs) == sorted(ids0)
                and sorted(r1.log_dirs) == sorted(ids1)
                and r1.cordoned_log_dirs is not None
                and sorted(r1.cordoned_log_dirs) == sorted(ids1)
                and not r0.cordoned_log_dirs
            )

        wait_until(registered, 15, "dir ids registered and broker 1's cordoned dirs reported")

        # broker 1's dirs are all cordoned: every new replica goes to broker 0
        res = run(create_topic(b1.address, "placed", partitions=6, rf=1))
        assert res.error_code == 0, res.error_message
        parts = run(metadata(b0.address, ["placed"])).topics[0].partitions
        assert sorted(p.partition_index for p in parts) == list(range(6))
        assert all(list(p.replica_nodes) == [0] for p in parts)
        res = run(create_topic(b0.address, "too-wide", partitions=1, rf=2))
        assert res.error_code != 0, "RF=2 needs broker 1, whose dirs are all cordoned"

        # AssignReplicasToDirs: the controller records the dir each replica lives in
        def on_disk(pid: int) -> str:
            return ids0[0] if (a / f"placed-{pid}").exists() else ids0[1]

        def assigned() -> bool:
            t = controller_image(ctl).topics_by_name["placed"]
            return all(t.partitions[pid].directories == (on_disk(pid),) for pid in range(6))

        wait_until(assigned, 15, "AssignReplicasToDirs to record every replica's dir")
        on_b = [pid for pid in range(6) if on_disk(pid) == ids0[1]]
        on_a = [pid for pid in range(6) if on_disk(pid) == ids0[0]]
        assert on_a and on_b, (on_a, on_b)

        # dir b fails at runtime: reported in a heartbeat, its partitions lose their leader
        b.rename(b0.dir / "logs-b-gone")
        b.write_text("not a directory")

        def failed_over() -> bool:
            img = controller_image(ctl)
            t = img.topics_by_name["placed"]
            return (
                img.brokers[0].log_dirs == (ids0[0],)
                and all(t.partitions[pid].leader == -1 for pid in on_b)
                and all(t.partitions[pid].leader == 0 for pid in on_a)
            )

        wait_until(failed_over, 20, "the offline dir reported and its partitions leaderless")
        assert "reporting offline log dir" in b0.log_text()

        def served() -> bool:  # the broker's image follows the controller's one fetch later
            parts = {p.partition_index: p for p in run(metadata(b0.address, ["placed"])).topics[0].partitions}
            return all(parts[pid].leader_id == -1 for pid in on_b) and all(parts[pid].leader_id == 0 for pid in on_a)

        wait_until(served, 10, "broker 0 to serve the failed-over leaders")
        # Metadata names the replicas in the offline dir as offline, as Kafka's metadata cache does
        parts = {p.partition_index: p for p in run(metadata(b0.address, ["placed"])).topics[0].partitions}
        assert {pid: list(parts[pid].offline_replicas) for pid in range(6)} == {
            pid: [0] if pid in on_b else [] for pid in range(6)
        }
        assert b0.alive, "a broker with a live dir left keeps running"

        # the operator's reading of it (status.logDirs.offline): broker 0, dir b, its partitions
        live, found = run(read_offline_dirs(AdminKafkaView(b1.address)))
        assert live == {0, 1}
        assert found == [OfflineDirs(0, (str(b),), tuple(f"placed-{pid}" for pid in on_b))]
    finally:
        c.stop()
