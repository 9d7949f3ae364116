"""LogManager in-process: dir locking, meta.properties checks naming the dir, placement in
the live uncordoned dir with the fewest partitions, parallel loading with a progress line per
dir, the crash-during-load rule for the clean-shutdown marker, checkpoint files."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kopfka.config.log_config import LogConfig
from kopfka.log import meta_properties
from kopfka.log.log_manager import LogDirLockedError, LogManager
from kopfka.protocol.record_codec import Record, encode_batch
from kopfka.storage.checkpoint import CleanShutdownFileHandler

from tests.log.helpers import checkpoint_entries


def cfg(_topic: str) -> LogConfig:
    return LogConfig.defaults()


def manager(dirs: list[Path], **values: object) -> LogManager:
    lm = LogManager(dirs, cfg, server_config=values, halt=lambda: None)
    lm.lock_dirs()
    return lm


def test_second_manager_on_a_dir_is_refused(tmp_path: Path) -> None:
    lm = manager([tmp_path / "a"])
    with pytest.raises(LogDirLockedError, match="Failed to acquire lock"):
        manager([tmp_path / "a"])
    lm.shutdown()
    manager([tmp_path / "a"]).shutdown()  # released at shutdown


def test_meta_properties_mismatch_names_the_dir(tmp_path: Path) -> None:
    d = tmp_path / "a"
    meta_properties.write(d, meta_properties.MetaProperties("cluster-x", 1, meta_properties.new_directory_id()))
    lm = LogManager([d], cfg, node_id=2)
    with pytest.raises(meta_properties.MetaPropertiesError, match=str(d)):
        lm.lock_dirs()
    lm2 = LogManager([d], cfg, node_id=1, cluster_id="cluster-y")
    with pytest.raises(meta_properties.MetaPropertiesError, match="cluster-y"):
        lm2.lock_dirs()


def test_placement_fewest_partitions_and_cordoned(tmp_path: Path) -> None:
    dirs = [tmp_path / n for n in "abc"]
    lm = manager(dirs, **{"cordoned.log.dirs": [str(dirs[1])]})
    for p in range(10):
        lm.get_or_create_log(("t", p), None)
    counts = {d.name: len([x for x in d.iterdir() if x.is_dir()]) for d in dirs}
    assert counts == {"a": 5, "b": 0, "c": 5}
    lm.shutdown()


def test_parallel_load_progress_and_crash_during_load(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = manager(dirs)
    lm.load_logs()
    for p in range(6):
        ulog = lm.get_or_create_log(("t", p), None)
        ulog.append_as_leader(encode_batch([Record(0, 1_700_000_000_000, b"k", b"v" * 10)]), 0)
        ulog.update_high_watermark(ulog.log_end_offset)
    lm.shutdown()
    for d in dirs:
        assert CleanShutdownFileHandler(d).exists()
        assert checkpoint_entries(d / "recovery-point-offset-checkpoint")
        assert set(checkpoint_entries(d / "replication-offset-checkpoint").values()) == {1}
    caplog.set_level(logging.INFO)
    lm = manager(dirs, **{"num.recovery.threads.per.data.dir": 3})
    lm.load_logs()
    assert len(lm.current_logs) == 6 and all(ul.log_end_offset == 1 for ul in lm.current_logs.values())
    for d in dirs:
        assert f"Loading 3 logs (3 segments) in {d} after a clean shutdown" in caplog.text
        assert f"{d}: 0 logs and 0 segments remaining to recover" in caplog.text
        # the marker is gone as soon as loading starts: a crash now counts as unclean
        assert not CleanShutdownFileHandler(d).exists()
    # crash (no shutdown): the next load is unclean
    lm._release_locks()
    caplog.clear()
    lm = manager(dirs)
    lm.load_logs()
    assert "after an unclean shutdown" in caplog.text
    lm.shutdown()


def test_delete_log_renames_then_deletes(tmp_path: Path) -> None:
    lm = manager([tmp_path / "a"])
    lm.get_or_create_log(("t", 0), None)
    lm.delete_log(("t", 0))
    assert not (tmp_path / "a" / "t-0").exists()
    assert not [p for p in (tmp_path / "a").iterdir() if p.is_dir()]  # no loop: deleted at once
    lm.shutdown()


def test_topic_recreated_while_away_never_serves_the_old_log(tmp_path: Path) -> None:
    """The broker was down while `t` was deleted and recreated under a new topic id: on its first
    metadata publish the old log is a stray (renamed `-stray`, as Kafka's isStrayKraftReplica), and
    the new topic's partition starts empty; a log of another id is never handed out for it."""
    from kopfka import uuids
    from kopfka.metadata import records as mr
    from kopfka.metadata.image import MetadataDelta, MetadataImage, replay
    from kopfka.protocol.errors import ErrorCode, KafkaError
    from kopfka.server.replica_manager import ReplicaManager

    old_id, new_id, moved_id = (uuids.to_str(uuids.random_uuid()) for _ in range(3))
    lm = manager([tmp_path])
    old = lm.get_or_create_log(("t", 0), old_id)
    old.append_as_leader(encode_batch([Record(i, 1_700_000_000_000, b"k", b"old-%d" % i) for i in range(5)]), 0)
    lm.get_or_create_log(("gone", 0), moved_id)  # reassigned away from this broker meanwhile
    lm.get_or_create_log(("noid", 0), None)  # never got its partition.metadata
    lm.shutdown()

    lm = manager([tmp_path])
    lm.load_logs()
    assert {("t", 0), ("gone", 0), ("noid", 0)} <= set(lm.current_logs)
    image = replay(
        [
            mr.TopicRecord("t", new_id),
            mr.PartitionRecord(0, new_id, (1,), (1,), 1, 0),
            mr.TopicRecord("gone", moved_id),
            mr.PartitionRecord(0, moved_id, (2,), (2,), 2, 0),
        ]
    )
    with pytest.raises(KafkaError) as exc:  # handed the old log for the new id: refused
        lm.get_or_create_log(("t", 0), new_id)
    assert exc.value.code == ErrorCode.inconsistent_topic_id
    assert sorted(lm.rename_stray_logs(image, broker_id=1)) == [("gone", 0), ("noid", 0), ("t", 0)]
    strays = sorted(p.name.split(".")[0] for p in tmp_path.iterdir() if p.name.endswith("-stray"))
    assert strays == ["gone-0", "noid-0", "t-0"]
    rm = ReplicaManager(1, lm)
    delta = MetadataDelta(MetadataImage())
    delta.replay_all(image.to_records())
    rm.on_metadata_update(delta, image)
    new = rm.partitions[("t", 0)].log
    assert new is not old and new.log_end_offset == 0 and uuids.to_str(new.topic_id) == new_id  # type: ignore[arg-type]
    lm.shutdown()
    lm = manager([tmp_path])
    lm.load_logs()  # strays stay on disk for the operator but are never loaded again
    assert set(lm.current_logs) == {("t", 0)} and lm.current_logs[("t", 0)].log_end_offset == 0
    lm.shutdown()
