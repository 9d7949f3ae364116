"""JBOD: partitions spread evenly over 3 dirs, none on a cordoned dir; a dir made to fail
(replaced by a file) goes offline while the others serve; losing every dir stops the broker
cleanly; AlterReplicaLogDirs moves a partition under produce load with nothing lost."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer
from kopfka.protocol.errors import ErrorCode

from tests.log.helpers import broker, create_topic, describe_log_dirs, produce, raw_request, read_all, wait_for


def dirs_of(tmp_path: Path) -> list[Path]:
    return [tmp_path / n for n in ("a", "b", "c")]


def placement(dirs: list[Path], topic: str) -> dict[str, int]:
    return {d.name: sum(1 for p in d.iterdir() if p.name.startswith(topic + "-")) for d in dirs}


def list_offset_error(bootstrap: str, topic: str, partition: int) -> int:
    resp = raw_request(
        bootstrap,
        2,
        8,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}],
                }
            ],
        },
    )
    return int(resp.topics[0].partitions[0].error_code)


def test_spread_failure_and_last_dir(tmp_path: Path) -> None:
    dirs = dirs_of(tmp_path)
    meta = tmp_path / "meta"
    proc = broker(tmp_path / "data", **{"log.dirs": ",".join(map(str, dirs)), "metadata.log.dir": str(meta)}).start()
    try:
        create_topic(proc.bootstrap, "spread", partitions=30)
        assert placement(dirs, "spread") == {"a": 10, "b": 10, "c": 10}
        described = describe_log_dirs(proc.bootstrap)
        assert {Path(k).name: len(v[1]) for k, v in described.items()} == {"a": 10, "b": 10, "c": 10}
        on_b = sorted(int(p.name.rsplit("-", 1)[1]) for p in dirs[1].iterdir() if p.name.startswith("spread-"))
        on_a = sorted(int(p.name.rsplit("-", 1)[1]) for p in dirs[0].iterdir() if p.name.startswith("spread-"))
        # fail dir b: it disappears and a file takes its place
        dirs[1].rename(tmp_path / "b-gone")
        dirs[1].write_text("not a directory")
        wait_for(
            lambda: describe_log_dirs(proc.bootstrap)[str(dirs[1])][0] == ErrorCode.kafka_storage_error,
            20,
            what="dir b offline",
        )
        # DescribeLogDirs answers the error once the failure channel holds the dir; the handler
        # task that takes its logs offline logs the warning a moment later
        wait_for(lambda: "is offline" in proc.log_text(), 10, what="the offline warning")
        assert list_offset_error(proc.bootstrap, "spread", on_b[0]) == ErrorCode.kafka_storage_error
        assert list_offset_error(proc.bootstrap, "spread", on_a[0]) == ErrorCode.none
        produce(proc.bootstrap, "spread", [(b"k", b"still served")], partition=on_a[0])
        assert read_all(proc.bootstrap, "spread", partition=on_a[0])[-1][2] == b"still served"
        # new partitions avoid the offline dir
        create_topic(proc.bootstrap, "after", partitions=4)
        assert placement([dirs[0], dirs[2]], "after") == {"a": 2, "c": 2}
        # losing the remaining dirs stops the broker cleanly
        for d in (dirs[0], dirs[2]):
            d.rename(d.with_name(d.name + "-gone"))
            d.write_text("gone")
        assert proc.proc is not None
        assert proc.proc.wait(30) == 0
        assert "all log dirs" in proc.log_text()
    finally:
        proc.kill()


def test_cordoned_dir_and_move_under_load(tmp_path: Path) -> None:
    dirs = dirs_of(tmp_path)
    proc = broker(
        tmp_path / "data",
        **{
            "log.dirs": ",".join(map(str, dirs)),
            "cordoned.log.dirs": str(dirs[2]),
            "metadata.log.dir": str(tmp_path / "meta"),
        },
    ).start()
    try:
        create_topic(proc.bootstrap, "cord", partitions=30)
        assert placement(dirs, "cord") == {"a": 15, "b": 15, "c": 0}
        # DescribeLogDirs v5 (KIP-1066) tells which dirs are cordoned
        v5 = raw_request(proc.bootstrap, 35, 5, {"topics": None})
        assert {r.log_dir: r.is_cordoned for r in v5.results} == {str(d): d == dirs[2] for d in dirs}
        create_topic(proc.bootstrap, "moving", partitions=1)
        src = next(d for d in dirs if (d / "moving-0").exists())
        dest = next(d for d in dirs[:2] if d != src)
        acked: list[tuple[int, bytes]] = []
        errors: list[str] = []
        stop = threading.Event()

        def load() -> None:
            p = Producer(
                {"bootstrap.servers": proc.bootstrap, "acks": "all", "linger.ms": 2, "enable.idempotence": True}
            )
            i = 0
            while not stop.is_set():
                v = b"v%08d" % i + bytes(500)

                def cb(err: object, msg: object, v: bytes = v) -> None:
                    if err is not None:
                        errors.append(str(err))
                    else:
                        acked.append((msg.offset(), v))  # type: ignore[attr-defined]

                try:
                    p.produce("moving", v, partition=0, on_delivery=cb)
                    i += 1
                except BufferError:
                    p.poll(0.01)
                p.poll(0)
                if i % 200 == 0:
                    time.sleep(0.005)
            p.flush(30)

        t = threading.Thread(target=load)
        t.start()
        try:
            wait_for(lambda: len(acked) > 3000, 30, what="load")
            resp = raw_request(
                proc.bootstrap,
                34,
                2,
                {"dirs": [{"path": str(dest), "topics": [{"name": "moving", "partitions": [0]}]}]},
            )
            assert resp.results[0].partitions[0].error_code == 0
            wait_for(lambda: (dest / "moving-0").exists() and not (src / "moving-0").exists(), 60, what="move")
            time.sleep(1.0)  # keep producing to the new log
        finally:
            stop.set()
            t.join(60)
        assert not errors, errors[:3]
        assert "replaced by the future one" in proc.log_text()
        described = describe_log_dirs(proc.bootstrap)
        assert ("moving", 0) in described[str(dest)][1]
        assert not described[str(dest)][1][("moving", 0)][1]  # not a future log any more
        got = read_all(proc.bootstrap, "moving")
        assert [o for o, _, _ in got] == list(range(len(got)))
        by_offset = {o: v for o, _, v in got}
        assert all(by_offset[o] == v for o, v in acked)
        assert Counter(o for o, _ in acked).most_common(1)[0][1] == 1
        # and it survives a restart from its new home
        proc.stop()
        proc.start()
        assert len(read_all(proc.bootstrap, "moving")) == len(got)
    finally:
        proc.kill()
