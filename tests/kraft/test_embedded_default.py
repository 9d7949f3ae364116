"""The embedded default (`kopfka serve`, a combined node) runs the same KRaft code as a cluster's
nodes, as a single-voter quorum: its metadata log is snapshotted and truncated below the snapshot
(and a restart starts from the snapshot), its AssignmentsManager records the dir of every replica,
and a log dir that fails at runtime is reported to its controller, which takes the dir's
partitions offline while the others stay served. The separate in-process path it had before did
none of these (its metadata log grew forever and was replayed whole at every start). A data dir
written by that old path still starts: the metadata log and quorum-state are the same files."""

from __future__ import annotations

import re
import shutil
import signal
import tarfile
from pathlib import Path

from cluster import describe_quorum, metadata, run, wait_until
from kopfka.log import meta_properties
from kopfka.metadata import records as mr
from kopfka.metadata.image import MetadataImage, replay
from kopfka.metadata.record_batches import decode_batch
from kopfka.protocol.records import iter_batches
from kopfka_process import KopfkaProcess

from tests.log.helpers import create_topic, produce, read_all

START_RE = re.compile(r"metadata log start offset is now (\d+)")
REPLAY_RE = re.compile(r"loaded metadata snapshot \S+; replaying the metadata log from offset (\d+)")
# written by the old in-process path (kopfka 8b04e3b): topic before-kraft with k0..k4, two starts, SIGKILL
OLD_DATA = Path(__file__).parent / "data" / "embedded-before-kraft.tgz"


def log_image(meta_dir: Path) -> MetadataImage:
    """The image the metadata log's segments (not its snapshots) replay to."""
    recs: list[mr.MetadataRecord] = []
    for seg in sorted((meta_dir / "__cluster_metadata-0").glob("*.log")):
        data = seg.read_bytes()
        for header in iter_batches(data, allow_partial_tail=True):
            recs.extend(decode_batch(data, header))
    return replay(r for r in recs if not isinstance(r, mr.BeginTransactionRecord | mr.EndTransactionRecord))


def test_clients_and_a_sigkill_on_the_single_voter_quorum(tmp_path: Path) -> None:
    """confluent-kafka produces (acks=all) and consumes; a SIGKILL loses nothing acknowledged and the
    node is back at once (its own controller knows the old incarnation is gone). Two embedded nodes
    run side by side: `--listen` moves each one's controller listener to a free port."""
    k = KopfkaProcess(tmp_path / "a")
    other = KopfkaProcess(tmp_path / "b")
    try:
        k.start()
        other.start()
        quorum = run(describe_quorum(k.bootstrap))  # forwarded to its own controller, as a broker does
        part = quorum.topics[0].partitions[0]
        assert (part.leader_id, [v.replica_id for v in part.current_voters]) == (1, [1])
        assert "[RaftClient id=1] leader in epoch" in k.log_text()
        create_topic(k.bootstrap, "acked", 2)
        sent = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(200)]
        assert produce(k.bootstrap, "acked", sent) == list(range(200))
        assert [(kk, v) for _, kk, v in read_all(k.bootstrap, "acked")] == sent
        assert produce(other.bootstrap, "elsewhere", [(None, b"x")]) == [0]  # auto-created there

        k.signal(signal.SIGKILL)
        k.proc.wait(10)  # type: ignore[union-attr]
        before = len(k.log_text())
        k.start(timeout=20)
        # not refused as a duplicate of its killed incarnation until broker.session.timeout.ms ran out
        assert "Broker registration failed" not in k.log_text()[before:]
        assert [(kk, v) for _, kk, v in read_all(k.bootstrap, "acked")] == sent
        assert produce(k.bootstrap, "acked", [(b"after", b"restart")]) == [200]
    finally:
        k.kill()
        other.kill()


def test_metadata_snapshots_and_retention_then_a_restart_from_the_snapshot(tmp_path: Path) -> None:
    k = KopfkaProcess(
        tmp_path / "data",
        overrides={
            "internal.metadata.log.segment.bytes": "2048",
            "metadata.log.max.record.bytes.between.snapshots": "1500",
            "metadata.max.retention.bytes": "0",
        },
    )
    meta = tmp_path / "data" / "__cluster_metadata-0"
    try:
        k.start()
        for i in range(8):
            create_topic(k.bootstrap, f"t{i}", 2)

        def truncated() -> int:
            starts = [int(x) for x in START_RE.findall(k.log_text())]
            return max(starts, default=0) if list(meta.glob("*.checkpoint")) else 0

        start = wait_until(truncated, 30, "a snapshot and the metadata log truncated below it")
        assert min(int(p.stem) for p in meta.glob("*.log")) > 0, "segments below the snapshot were kept"
        k.signal(signal.SIGKILL)
        k.proc.wait(10)  # type: ignore[union-attr]
        before = len(k.log_text())
        k.start()
        # the restart loads the snapshot and replays only the log above it
        loaded = REPLAY_RE.findall(k.log_text()[before:])
        assert loaded and int(loaded[0]) >= start > 0, loaded
        names = {t.name for t in run(metadata(k.bootstrap)).topics}
        assert {f"t{i}" for i in range(8)} <= names
        assert produce(k.bootstrap, "t7", [(None, b"after")]) == [0]
    finally:
        k.kill()


def test_replica_dirs_assigned_and_a_failed_dir_reported(tmp_path: Path) -> None:
    a, b = tmp_path / "logs-a", tmp_path / "logs-b"
    k = KopfkaProcess(
        a,
        overrides={
            "log.dirs": f"{a},{b}",
            "log.initial.task.delay.ms": "0",
            "log.flush.offset.checkpoint.interval.ms": "200",
            "log.flush.start.offset.checkpoint.interval.ms": "200",
        },
    )
    try:
        k.start()
        ids = {d: meta_properties.read(d).directory_id for d in (a, b)}  # type: ignore[union-attr]
        create_topic(k.bootstrap, "spread", 6)

        def dir_of(pid: int) -> Path:
            return a if (a / f"spread-{pid}").exists() else b

        def assigned() -> bool:
            t = log_image(a).topics_by_name.get("spread")
            return t is not None and all(t.partitions[p].directories == (ids[dir_of(p)],) for p in range(6))

        wait_until(assigned, 20, "AssignReplicasToDirs to record every replica's dir")
        on_b = [p for p in range(6) if dir_of(p) == b]
        on_a = [p for p in range(6) if dir_of(p) == a]
        assert on_a and on_b, (on_a, on_b)

        shutil.move(b, tmp_path / "logs-b-gone")  # the dir fails under the running broker
        b.write_text("not a directory")

        def failed_over() -> bool:
            parts = {p.partition_index: p for p in run(metadata(k.bootstrap, ["spread"])).topics[0].partitions}
            return all(parts[p].leader_id == -1 for p in on_b) and all(parts[p].leader_id == 1 for p in on_a)

        wait_until(failed_over, 30, "the failed dir's partitions offline, the others served")
        assert "reporting offline log dir" in k.log_text()
        assert k.proc is not None and k.proc.poll() is None, "a broker with a live dir left keeps running"
    finally:
        k.kill()


def test_a_data_dir_of_the_old_in_process_path_starts_on_kraft(tmp_path: Path) -> None:
    """The old path wrote the same metadata log and a quorum-state naming itself leader: the raft
    client elects itself in a later epoch and replays that log; acknowledged records are served."""
    with tarfile.open(OLD_DATA) as tar:
        tar.extractall(tmp_path, filter="data")
    data = tmp_path / "data"
    assert '"data_version": 0' in (data / "__cluster_metadata-0" / "quorum-state").read_text()
    k = KopfkaProcess(data)
    try:
        k.start()
        expected = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(5)]
        assert [(kk, v) for _, kk, v in read_all(k.bootstrap, "before-kraft")] == expected
        assert produce(k.bootstrap, "before-kraft", [(b"k5", b"v5")]) == [5]
        state = (data / "__cluster_metadata-0" / "quorum-state").read_text()
        assert '"data_version": 1' in state and '"leaderEpoch": 3' in state, state
    finally:
        k.kill()


def test_an_authorizer_without_a_super_user_broker_principal_stops_with_the_reason(tmp_path: Path) -> None:
    """With an authorizer, the node's broker reaches its own controller like any broker: on the
    default PLAINTEXT controller listener as User:ANONYMOUS, which lacks ClusterAction. The start
    fails and says so (the controller answers CLUSTER_AUTHORIZATION_FAILED rather than dropping
    the connection, which left only '0 bytes read')."""
    k = KopfkaProcess(
        tmp_path / "data",
        overrides={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "initial.broker.registration.timeout.ms": "3000",
        },
    )
    try:
        try:
            k.start(timeout=30)
        except RuntimeError as exc:  # exited
            text = str(exc)
        else:
            raise AssertionError("started although its broker may not register")
        assert "needs ClusterAction: add it to super.users" in text, text[-2000:]
        assert k.proc is not None and k.proc.returncode != 0
    finally:
        k.kill()
