"""Data directories both ways between kopfka and Apache Kafka 4.3:

- a log dir kopfka wrote (cleanly stopped) is read by Kafka's `kafka-dump-log`: segments with the
  same records, offset and time indexes that pass Kafka's checks and point at the same batches,
  producer snapshots with the producer's state, checkpoints in Kafka's text format;
- a partition Kafka wrote (cleanly stopped) is opened by kopfka's log layer with the same offsets,
  records and producer state;
- whole directories: `kopfka serve` starts on a dir formatted by `kafka-storage format` (its
  bootstrap.checkpoint) and on a single-node Kafka's whole log dir (its __cluster_metadata log,
  records and control records as Kafka wrote them), serving Kafka's records with their offsets.
"""

from __future__ import annotations

import random
import re
import shutil
import sys
from pathlib import Path

import pytest
from kafka_ref import KafkaCluster, KafkaNode, run_tool
from kopfka.config.log_config import LogConfig
from kopfka.storage.unified_log import UnifiedLog
from kopfka_process import KopfkaProcess

from tests.log.helpers import checkpoint_entries, create_topic, produce, read_all
from tests.storage.helpers import read_values

Record = tuple[int, bytes | None, bytes | None]
# Kafka 4.3 finalizes streams.version 1 (KIP-1071 streams groups) by default; kopfka does not
# implement streams groups, so its broker's registration is refused, exactly as Kafka refuses a
# broker that lacks a finalized feature. Dirs meant for kopfka are formatted without it.
STREAMS_OFF = ("--feature", "streams.version=0")


def records_to_write(n: int, seed: int) -> list[tuple[bytes | None, bytes | None]]:
    """Keyed records with incompressible printable values (so segments roll at 1 MiB)."""
    rnd = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [(f"key-{i}".encode(), "".join(rnd.choices(letters, k=600)).encode()) for i in range(n)]


def produce_in_batches(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    """One idempotent producer, lz4 batches of at most 100 records."""
    produce(bootstrap, topic, records, extra={"batch.num.messages": 100})


def kopfka_on(config: Path, port: int, tmp_path: Path) -> KopfkaProcess:
    """`kopfka serve --config` on a Kafka node's server.properties (and so on its dirs)."""
    k = KopfkaProcess(tmp_path / "unused", port=port)
    k.command = lambda: [sys.executable, "-m", "kopfka.cli.main", "serve", "--config", str(config)]  # type: ignore[method-assign]
    return k


def dump(path: Path, *args: str) -> str:
    out = run_tool("kafka-dump-log", "--files", str(path), *args)
    assert "Exception" not in out.stdout + out.stderr and "error" not in out.stderr.lower(), out.stderr
    return out.stdout


def dumped_batches(log_file: Path) -> tuple[list[dict[str, str]], list[Record]]:
    """(batch headers, (offset, key, value) records) as kafka-dump-log --deep-iteration prints them."""
    batches: list[dict[str, str]] = []
    records: list[Record] = []
    for line in dump(log_file, "--print-data-log", "--deep-iteration").splitlines():
        if line.startswith("baseOffset:"):
            batches.append(dict(re.findall(r"(\w+): (\S+)", line)))
        elif line.startswith("| offset:"):
            m = re.match(r"\| offset: (\d+) .* key: (\S*) payload: (\S*)$", line)
            assert m, line
            records.append((int(m[1]), m[2].encode(), m[3].encode()))
    return batches, records


def test_kafka_dump_log_reads_a_kopfka_log_dir(tmp_path: Path) -> None:
    k = KopfkaProcess(tmp_path / "data").start()
    try:
        create_topic(k.bootstrap, "dd", 1, **{"segment.bytes": "1048576", "index.interval.bytes": "4096"})
        written = records_to_write(3000, seed=1)
        produce_in_batches(k.bootstrap, "dd", written)
        consumed = read_all(k.bootstrap, "dd")
        assert [(o, kk, v) for o, kk, v in consumed] == [(i, kk, v) for i, (kk, v) in enumerate(written)]
        assert k.stop() == 0
    finally:
        k.kill()
    part = tmp_path / "data" / "dd-0"
    segments = sorted(part.glob("*.log"))
    assert len(segments) >= 2, "expected the 1 MiB segments to have rolled"

    all_records: list[Record] = []
    for seg in segments:
        batches, records = dumped_batches(seg)
        assert all(b["isvalid"] == "true" and b["compresscodec"] == "lz4" for b in batches)
        assert all(b["producerId"] == batches[0]["producerId"] != "-1" for b in batches)
        assert [int(b["baseSequence"]) for b in batches] == [int(b["baseOffset"]) for b in batches]
        all_records += records
        positions = {int(b["position"]): (int(b["baseOffset"]), int(b["lastOffset"])) for b in batches}

        index = seg.with_suffix(".index")
        entries = [tuple(map(int, m)) for m in re.findall(r"^offset: (\d+) position: (\d+)$", dump(index), re.M)]
        assert entries, f"{index.name} has no entries"
        for offset, position in entries:  # each entry points at the batch holding that last offset
            assert positions[position][1] == offset, (offset, position)
        assert "Mismatches" not in dump(index, "--verify-index-only")
        assert "passed sanity check" in dump(index, "--index-sanity-check")

        timeindex = seg.with_suffix(".timeindex")
        tentries = re.findall(r"^timestamp: (\d+) offset: (\d+)$", dump(timeindex), re.M)
        assert tentries and all(int(o) in {last for _, last in positions.values()} for _, o in tentries)
        assert "passed sanity check" in dump(timeindex, "--index-sanity-check")
    assert all_records == [(o, kk, v) for o, kk, v in consumed]

    snapshot = max(part.glob("*.snapshot"))  # one per roll, the last at the clean shutdown
    assert int(snapshot.stem) == 3000
    (state,) = [dict(re.findall(r"(\w+): (\S+)", ln)) for ln in dump(snapshot).splitlines() if "producerId:" in ln]
    assert state["lastSequence"] == "2999" and state["lastOffset"] == "2999" and state["producerEpoch"] == "0"

    # checkpoints: Kafka's text format (version 0, entry count, `topic partition offset`)
    data = tmp_path / "data"
    assert checkpoint_entries(data / "recovery-point-offset-checkpoint")[("dd", 0)] == 3000
    assert checkpoint_entries(data / "replication-offset-checkpoint")[("dd", 0)] == 3000
    lines = (part / "leader-epoch-checkpoint").read_text().splitlines()
    assert lines[:3] == ["0", "1", "0 0"], lines


@pytest.fixture(scope="module")
def kafka_written(kafka_libs: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[KafkaNode, list[Record]]:
    """A single-node Kafka that wrote 2,500 records to `kd` (idempotent, lz4) and stopped cleanly.
    Formatted without streams.version (see STREAMS_OFF), so that kopfka can serve the whole dir."""
    ref = KafkaCluster(tmp_path_factory.mktemp("kafka-written"), 1).format(None, *STREAMS_OFF).start()
    try:
        create_topic(ref.bootstrap, "kd", 1, **{"segment.bytes": "1048576", "index.interval.bytes": "4096"})
        produce_in_batches(ref.bootstrap, "kd", records_to_write(2500, seed=2))
        consumed = read_all(ref.bootstrap, "kd")
        assert len(consumed) == 2500
    finally:
        ref.stop()
    assert (ref.nodes[0].log_dir / ".kafka_cleanshutdown").exists()
    return ref.nodes[0], consumed


def test_kopfka_log_layer_reads_a_kafka_partition(
    kafka_written: tuple[KafkaNode, list[Record]], tmp_path: Path
) -> None:
    node, consumed = kafka_written
    kafka_part = node.log_dir / "kd-0"
    assert len(list(kafka_part.glob("*.log"))) >= 2
    copy = tmp_path / "kd-0"
    shutil.copytree(kafka_part, copy)
    log = UnifiedLog.load(copy, LogConfig.defaults(), had_clean_shutdown=True, recovery_point=2500)
    try:
        assert log.log_end_offset == 2500 and log.log_start_offset == 0
        assert read_values(log, 0) == [(o, v) for o, _, v in consumed]
        (entry,) = log.producer_state.active_producers().values()
        assert entry.last_seq == 2499 and entry.producer_epoch == 0
    finally:
        log.close()


def test_kopfka_serves_a_kafka_log_dir(kafka_written: tuple[KafkaNode, list[Record]], tmp_path: Path) -> None:
    node, consumed = kafka_written
    shutil.copytree(node.dir, tmp_path / "node")
    config = tmp_path / "node" / "server.properties"
    config.write_text(node.config.read_text().replace(str(node.dir), str(tmp_path / "node")))
    k = kopfka_on(config, node.port, tmp_path)
    try:
        k.start()
        assert read_all(k.bootstrap, "kd") == consumed
    finally:
        k.kill()


def test_kopfka_serves_a_dir_formatted_by_kafka_storage(kafka_libs: Path, tmp_path: Path) -> None:
    node = KafkaNode(tmp_path, 1)
    node.write_config(node.voter, {})
    assert "Formatting metadata directory" in node.format("MkU3OEVBNTcwNTJENDM2Qg", *STREAMS_OFF).stdout
    k = kopfka_on(node.config, node.port, tmp_path)
    try:
        k.start()
        create_topic(k.bootstrap, "fmt", 1)
        assert produce(k.bootstrap, "fmt", [(None, b"x")]) == [0]
    finally:
        k.kill()


def test_kopfka_serves_a_standalone_dir_formatted_by_kafka_storage(kafka_libs: Path, tmp_path: Path) -> None:
    """`kafka-storage format --standalone` (a dynamic quorum): kopfka takes its voter set from the
    0-0 snapshot Kafka wrote (kraft.version 1, KRaftVoters) and serves."""
    node = KafkaNode(tmp_path, 1)
    node.write_config("", {})
    bootstrap_servers = f"controller.quorum.bootstrap.servers={node.host}:{node.controller_port}\n"
    node.config.write_text(node.config.read_text().replace("controller.quorum.voters=\n", bootstrap_servers))
    out = node.format("MkU3OEVBNTcwNTJENDM2Qg", "--standalone", *STREAMS_OFF).stdout
    assert "Formatting dynamic metadata voter directory" in out, out
    assert (node.log_dir / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint").exists()
    k = kopfka_on(node.config, node.port, tmp_path)
    try:
        k.start()
        create_topic(k.bootstrap, "standalone", 1)
        assert produce(k.bootstrap, "standalone", [(None, b"x")]) == [0]
        quorum = run_tool(
            "kafka-metadata-quorum",
            "--bootstrap-controller",
            f"{node.host}:{node.controller_port}",
            "describe",
            "--status",
        )
        assert quorum.returncode == 0, quorum.stderr[-2000:]
        assert re.search(r"CurrentVoters:\s+\[\{\"id\": 1, \"directoryId\": \"[^\"]+\"", quorum.stdout), quorum.stdout
    finally:
        k.kill()
