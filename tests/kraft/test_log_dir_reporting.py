"""Log dir reporting on a KRaft cluster (JBOD, KIP-858, cordoned dirs), checked in the
controller's own metadata log: brokers register their online dir ids and report cordoned dirs
once caught up; new replicas avoid a broker whose dirs are all cordoned; AssignReplicasToDirs
records the dir of every replica in `PartitionRecord.directories`; a dir that fails at runtime is
reported in heartbeats, leaves the registration, its partitions lose their leader, and Metadata
names their replicas there offline."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from cluster import Cluster, create_topic, metadata, run, wait_until
from kopfka.client.admin import Admin, AdminError
from kopfka.log import meta_properties
from kopfka.metadata import records as mr
from kopfka.metadata.image import MetadataImage, replay
from kopfka.metadata.record_batches import decode_batch
from kopfka.protocol.errors import ErrorCode
from kopfka.protocol.records import iter_batches
from kopfka_operator.log_dir_health import OfflineDirs, read_offline_dirs
from kopfka_operator.roll.kafka_view import AdminKafkaView

FAST_LOG = {
    "log.initial.task.delay.ms": "0",
    "log.flush.offset.checkpoint.interval.ms": "200",
    "log.flush.start.offset.checkpoint.interval.ms": "200",
}
CORDONED = "cordoned.log.dirs"


def controller_image(node: Any) -> MetadataImage:
    """Replay the controller's metadata log segments, read-only, as the controller did."""
    seg_dir = node.dir / "metadata" / "__cluster_metadata-0"
    recs: list[mr.MetadataRecord] = []
    for seg in sorted(seg_dir.glob("*.log")):
        data = seg.read_bytes()
        for header in iter_batches(data, allow_partial_tail=True):
            for rec in decode_batch(data, header):
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
        # asked of broker 1, whose image can be a metadata fetch behind broker 0's
        wanted = [OfflineDirs(0, (str(b),), tuple(f"placed-{pid}" for pid in on_b))]
        wait_until(
            lambda: run(read_offline_dirs(AdminKafkaView(b1.address)))[1] == wanted, 10, "broker 1 to report the dir"
        )
        live, found = run(read_offline_dirs(AdminKafkaView(b1.address)))
        assert live == {0, 1}
        assert found == wanted
    finally:
        c.stop()


async def _with_admin(addr: str, call: Callable[[Admin], Awaitable[Any]]) -> Any:
    admin = await Admin.connect(addr)
    try:
        return await call(admin)
    finally:
        await admin.close()


async def _alter_cordoned(addr: str, broker: str, value: str | None) -> None:
    """IncrementalAlterConfigs of cordoned.log.dirs on BROKER `broker` ("" = cluster default):
    SET `value`, or DELETE when None."""
    op = (CORDONED, 1, None) if value is None else (CORDONED, 0, value)
    await _with_admin(addr, lambda adm: adm.incremental_alter_configs(4, broker, [op]))


def test_cordoned_log_dirs_altered_at_runtime(tmp_path: Path) -> None:
    """KIP-1066 cordoned.log.dirs as a dynamic config: cordoning a broker's dirs at runtime is
    reported in the next heartbeat and recorded by the controller, new replicas avoid it,
    DescribeLogDirs shows it, AlterReplicaLogDirs into a cordoned dir is refused, a path outside
    log.dirs is INVALID_CONFIG, and uncordoning (an empty list) brings placements back. Also at
    the cluster default with `*`."""
    c = Cluster(tmp_path / "c", 1, 2, props=FAST_LOG)
    b0, b1 = c.brokers
    a, b = b0.dir / "logs-a", b0.dir / "logs-b"
    cd, dd = b1.dir / "logs-c", b1.dir / "logs-d"
    b0.props = {**FAST_LOG, "log.dirs": f"{a},{b}"}
    b1.props = {**FAST_LOG, "log.dirs": f"{cd},{dd}"}
    try:
        c.format_all()
        c.start()
        ctl = c.controllers[0]
        ids0, ids1 = (dir_id(a), dir_id(b)), (dir_id(cd), dir_id(dd))

        def cordoned_in_controller(expected: dict[int, tuple[str, ...]]) -> Callable[[], bool]:
            def check() -> bool:
                img = controller_image(ctl)
                return all(
                    bid in img.brokers
                    and img.brokers[bid].cordoned_log_dirs is not None
                    and tuple(sorted(img.brokers[bid].cordoned_log_dirs or ())) == tuple(sorted(dirs))
                    for bid, dirs in expected.items()
                )

            return check

        # the metadata version supports cordoning: an empty set is reported (and recorded) from the start
        wait_until(cordoned_in_controller({0: (), 1: ()}), 15, "both brokers to report no cordoned dir")

        # cordon every dir of broker 1 at runtime (refused as static before)
        run(_alter_cordoned(b0.address, "1", f"{cd},{dd}"))
        wait_until(cordoned_in_controller({0: (), 1: ids1}), 10, "broker 1's cordoned dirs recorded")
        dirs1 = run(_with_admin(b1.address, lambda adm: adm.describe_log_dirs()))
        assert {Path(d.path).name: d.cordoned for d in dirs1} == {"logs-c": True, "logs-d": True}
        res = run(create_topic(b0.address, "avoid1", partitions=4, rf=1))
        assert res.error_code == 0, res.error_message
        parts = run(metadata(b0.address, ["avoid1"])).topics[0].partitions
        assert all(list(p.replica_nodes) == [0] for p in parts), [list(p.replica_nodes) for p in parts]
        res = run(create_topic(b0.address, "too-wide", partitions=1, rf=2))
        assert res.error_code != 0, "RF=2 needs broker 1, whose dirs are all cordoned"

        # one dir of broker 0: new partitions land in the other one; no move into it either
        run(_alter_cordoned(b0.address, "0", str(a)))
        wait_until(cordoned_in_controller({0: (ids0[0],)}), 10, "broker 0's dir a recorded as cordoned")
        res = run(create_topic(b0.address, "in-b", partitions=4, rf=1))
        assert res.error_code == 0, res.error_message
        wait_until(lambda: all((b / f"in-b-{p}").is_dir() for p in range(4)), 10, "in-b's logs created in dir b")
        assert not any((a / f"in-b-{p}").exists() for p in range(4))
        moved = run(_with_admin(b0.address, lambda adm: adm.alter_replica_log_dirs({("in-b", 0): str(a)})))
        err = moved[("in-b", 0)]
        assert err is not None and err.code == ErrorCode.invalid_replica_assignment, err

        # a path outside log.dirs: INVALID_CONFIG naming it, nothing stored
        bogus = str(tmp_path / "not-a-log-dir")
        try:
            run(_alter_cordoned(b0.address, "0", bogus))
        except AdminError as exc:
            assert exc.code == ErrorCode.invalid_config and bogus in str(exc), exc
        else:
            raise AssertionError("a cordoned dir outside log.dirs was accepted")

        # uncordon: an empty list on broker 1, a DELETE on broker 0; placements come back
        run(_alter_cordoned(b0.address, "1", ""))
        run(_alter_cordoned(b0.address, "0", None))
        wait_until(cordoned_in_controller({0: (), 1: ()}), 10, "the empty cordoned sets recorded")
        dirs1 = run(_with_admin(b1.address, lambda adm: adm.describe_log_dirs()))
        assert not any(d.cordoned for d in dirs1)
        res = run(create_topic(b0.address, "wide", partitions=2, rf=2))
        assert res.error_code == 0, res.error_message
        moved = run(_with_admin(b0.address, lambda adm: adm.alter_replica_log_dirs({("in-b", 0): str(a)})))
        assert moved[("in-b", 0)] is None, moved

        # the cluster default `*` cordons every dir of every broker without its own value (broker
        # 1's empty list wins over it until deleted): then no new topic can be placed
        run(_alter_cordoned(b0.address, "", "*"))
        wait_until(cordoned_in_controller({0: ids0, 1: ()}), 10, "broker 0 cordoned by the cluster default")
        run(_alter_cordoned(b0.address, "1", None))
        wait_until(cordoned_in_controller({0: ids0, 1: ids1}), 10, "every dir recorded as cordoned")
        res = run(create_topic(b0.address, "nowhere", partitions=1, rf=1))
        assert res.error_code != 0, "every dir is cordoned"
        run(_alter_cordoned(b0.address, "", None))
        wait_until(cordoned_in_controller({0: (), 1: ()}), 10, "the cluster default removed")
        res = run(create_topic(b0.address, "somewhere", partitions=1, rf=1))
        assert res.error_code == 0, res.error_message

        # the operator's call (scale-down: every dir of the broker going away), and its lifting
        view = AdminKafkaView(b0.address)
        run(view.set_cordoned_dirs(1, ["*"]))
        wait_until(cordoned_in_controller({0: (), 1: ids1}), 10, "the operator's cordon of broker 1 recorded")
        run(view.set_cordoned_dirs(1, []))
        wait_until(cordoned_in_controller({0: (), 1: ()}), 10, "the operator's cordon of broker 1 lifted")
    finally:
        c.stop()


def test_cordoning_needs_metadata_version_4_3(tmp_path: Path) -> None:
    """As in Kafka, below 4.3-IV0 (the controller cannot record cordoned dirs) setting
    cordoned.log.dirs is INVALID_CONFIG and heartbeats report nothing; after UpdateFeatures to
    4.3-IV0 the same alteration is recorded."""
    c = Cluster(tmp_path / "c", 1, 1, props=FAST_LOG)
    (b0,) = c.brokers
    a, b = b0.dir / "logs-a", b0.dir / "logs-b"
    b0.props = {**FAST_LOG, "log.dirs": f"{a},{b}"}
    try:
        for n in c.nodes:
            n.write_config(c.quorum_props())
            quorum = ("--initial-controllers", c.initial_controllers()) if n.role == "controller" and c.dynamic else ()
            res = n.format(c.cluster_id, "--release-version", "4.2", *quorum)
            assert res.returncode == 0, res.stderr
        c.start()
        ctl = c.controllers[0]
        wait_until(lambda: 0 in controller_image(ctl).brokers, 15, "broker 0 registered")
        try:
            run(_alter_cordoned(b0.address, "0", str(a)))
        except AdminError as exc:
            assert exc.code == ErrorCode.invalid_config and "4.3-IV0" in str(exc), exc
        else:
            raise AssertionError("cordoned.log.dirs accepted below metadata.version 4.3-IV0")
        assert controller_image(ctl).brokers[0].cordoned_log_dirs is None
        # the operator sees it and does not try (its scale-down goes on without a cordon)
        assert run(AdminKafkaView(b0.address).set_cordoned_dirs(0, ["*"])) is False

        run(_with_admin(b0.address, lambda adm: adm.update_feature("metadata.version", 30)))
        wait_until(lambda: controller_image(ctl).brokers[0].cordoned_log_dirs == (), 15, "the empty set reported")
        wait_until(
            lambda: run(_alter_cordoned(b0.address, "0", str(a))) is None, 10, "the alteration accepted at 4.3-IV0"
        )
        wait_until(lambda: controller_image(ctl).brokers[0].cordoned_log_dirs == (dir_id(a),), 10, "dir a recorded")
    finally:
        c.stop()
