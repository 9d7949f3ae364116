"""Transaction data on disk, both ways between kopfka and Apache Kafka 4.3:

- Kafka's `kafka-dump-log` decodes kopfka's `__transaction_state` (--transaction-log-decoder),
  its transaction markers (control batches with the coordinator epoch) and its transaction
  index;
- kopfka's decoders read the `__transaction_state` records Kafka wrote, and kopfka's log layer
  opens a Kafka partition holding committed and aborted transactions with the same aborted
  ranges and last stable offset.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from confluent_kafka import Producer
from kafka_ref import KafkaCluster, run_tool
from kopfka.config.log_config import LogConfig
from kopfka.coordinator.transaction import records as txn_records
from kopfka.protocol.record_codec import decode_records
from kopfka.protocol.records import iter_batches
from kopfka.storage.unified_log import UnifiedLog
from kopfka_process import KopfkaProcess

from tests.log.helpers import create_topic


def transactions(bootstrap: str, topic: str, txn_id: str) -> None:
    """Commit c0..c2, abort a0..a2, commit d0."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    p.init_transactions(60)
    for values, commit in ((["c0", "c1", "c2"], True), (["a0", "a1", "a2"], False), (["d0"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(topic, value=v.encode())
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)


def dump(path: Path, *args: str) -> str:
    out = run_tool("kafka-dump-log", "--files", str(path), *args)
    assert "Exception" not in out.stdout + out.stderr, out.stdout + out.stderr
    return out.stdout


def state_partition(data: Path) -> Path:
    """The `__transaction_state` partition holding the records (only one is non-empty)."""
    (part,) = [p for p in data.glob("__transaction_state-*") if any(f.stat().st_size for f in p.glob("*.log"))]
    return part


def test_kafka_reads_kopfka_transaction_logs(tmp_path: Path) -> None:
    k = KopfkaProcess(tmp_path / "data").start()
    try:
        create_topic(k.bootstrap, "txl", 1)
        transactions(k.bootstrap, "txl", "dump-tx")
        assert k.stop() == 0
    finally:
        k.kill()
    data = tmp_path / "data"
    decoded = dump(next(state_partition(data).glob("*.log")), "--transaction-log-decoder")
    entries = [
        (json.loads(k), json.loads(v)) for k, v in re.findall(r"key: (\{.*\}) payload: (\{.*\})$", decoded, re.M)
    ]
    assert {k["data"]["transactionalId"] for k, _ in entries} == {"dump-tx"}
    values = [v["data"] for _, v in entries]
    # Empty, then per transaction Ongoing -> PrepareCommit/PrepareAbort -> CompleteCommit/CompleteAbort
    assert [v["transactionStatus"] for v in values] == [0, 1, 2, 4, 1, 3, 5, 1, 2, 4], decoded
    assert values[1]["transactionPartitions"] == [{"topic": "txl", "partitionIds": [0]}]
    assert values[0]["transactionPartitions"] is None and values[3]["transactionPartitions"] == []
    log = dump(next((data / "txl-0").glob("*.log")), "--print-data-log")
    markers = re.findall(r"endTxnMarker: (COMMIT|ABORT) coordinatorEpoch: (\d+)", log)
    assert markers == [("COMMIT", "0"), ("ABORT", "0"), ("COMMIT", "0")], log
    assert log.count("isTransactional: true isControl: true") == 3
    index = dump(next((data / "txl-0").glob("*.txnindex")))
    assert re.search(r"producerId: \d+ firstOffset: 4 lastOffset: 7 lastStableOffset: 8", index), index


def test_kopfka_reads_kafka_transaction_logs(kafka_libs: Path, tmp_path: Path) -> None:
    ref = KafkaCluster(tmp_path / "kafka", 1).format().start()
    try:
        create_topic(ref.bootstrap, "txk", 1)
        transactions(ref.bootstrap, "txk", "kafka-tx")
    finally:
        ref.stop()
    logs = ref.nodes[0].log_dir
    values = []
    for seg in sorted(state_partition(logs).glob("*.log")):
        raw = seg.read_bytes()
        for h in iter_batches(raw, allow_partial_tail=True):
            for r in decode_records(raw, h):
                assert r.key is not None and txn_records.decode_key(r.key) == "kafka-tx"
                values.append(txn_records.decode_value(r.value or b""))
    assert [v.state for v in values][-1] == 4  # CompleteCommit
    ongoing = [v for v in values if v.state == 1]
    assert ongoing and all(v.partitions == {"txk": [0]} for v in ongoing)
    assert len({v.producer_id for v in values}) == 1
    copy = tmp_path / "copy" / "txk-0"
    shutil.copytree(logs / "txk-0", copy)
    ulog = UnifiedLog.load(copy, LogConfig.defaults(), had_clean_shutdown=True, recovery_point=1 << 40)
    try:
        aborted = ulog.collect_aborted_transactions(0, ulog.log_end_offset)
        assert [(a.first_offset, a.last_offset) for a in aborted] == [(4, 7)]
        assert ulog.producer_state.first_unstable_offset() is None  # every transaction ended
    finally:
        ulog.close()
