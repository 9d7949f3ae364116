"""A single-voter KRaft quorum: the embedded default's metadata log.

With one voter the quorum high watermark is simply the flushed log end: a batch is committed
once fsync'd. The log is `__cluster_metadata-0` in metadata.log.dir, stored by the same log
engine as every partition; the epoch is bumped on every start and kept in `quorum-state`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from kopfka.config.log_config import LogConfig
from kopfka.metadata import records as mr
from kopfka.protocol.record_codec import Record, decode_records, encode_batch
from kopfka.protocol.records import iter_batches
from kopfka.raft.raft_client import CommittedBatch, LeaderAndEpoch, NotLeaderError, RaftListener
from kopfka.storage.unified_log import UnifiedLog
from kopfka.uuids import METADATA_TOPIC_ID

log = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"
QUORUM_STATE = "quorum-state"


def metadata_log_dir(metadata_dir: Path) -> Path:
    return metadata_dir / f"{METADATA_TOPIC}-0"


def read_committed_batches(log_: UnifiedLog, start: int, end: int) -> list[CommittedBatch]:
    """Decode metadata batches in [start, end) from the log."""
    out: list[CommittedBatch] = []
    offset = start
    while offset < end:
        info = log_.read(offset, 1 << 20, isolation="log_end", min_one_message=True)
        if info.records is None:
            break
        data = info.records.read()
        progressed = False
        for header in iter_batches(data, allow_partial_tail=True):
            if header.last_offset < offset:
                continue
            if header.base_offset >= end:
                return out
            recs = tuple(mr.decode(r.value or b"") for r in decode_records(data, header))
            out.append(
                CommittedBatch(
                    header.base_offset, header.last_offset, header.partition_leader_epoch, header.max_timestamp, recs
                )
            )
            offset = header.next_offset
            progressed = True
        if not progressed:
            break
    return out


class LocalRaftClient:
    def __init__(self, node_id: int, metadata_dir: Path, *, segment_bytes: int = 1 << 30) -> None:
        self.node_id = node_id
        self.dir = metadata_log_dir(metadata_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._listeners: list[RaftListener] = []
        self._lock = asyncio.Lock()
        state_path = self.dir / QUORUM_STATE
        epoch = 0
        if state_path.exists():
            try:
                epoch = int(json.loads(state_path.read_text()).get("leaderEpoch", 0))
            except (ValueError, OSError):
                epoch = 0
        self.epoch = epoch + 1
        tmp = state_path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "leaderId": node_id,
                    "leaderEpoch": self.epoch,
                    "votedId": node_id,
                    "appliedOffset": 0,
                    "currentVoters": [{"voterId": node_id}],
                    "data_version": 0,
                }
            )
        )
        os.replace(tmp, state_path)
        config = LogConfig.defaults(**{"segment.bytes": segment_bytes})
        self.log = UnifiedLog.load(self.dir, config, topic_id=METADATA_TOPIC_ID)
        self.log.update_high_watermark(self.log.log_end_offset)

    def register(self, listener: RaftListener) -> None:
        self._listeners.append(listener)

    def replay_committed(self) -> None:
        """Deliver the whole committed log to the listeners (startup catch-up)."""
        for batch in read_committed_batches(self.log, self.log.log_start_offset, self.log.high_watermark):
            for lst in self._listeners:
                lst.handle_commit(batch)
        for lst in self._listeners:
            lst.handle_leader_change(self.leader_and_epoch)

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(self.node_id, self.epoch)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def describe_quorum(self, endpoint: tuple[str, int] | None) -> dict[str, Any]:
        """DescribeQuorum of the in-process single-voter quorum: this node leads and is the only voter."""
        now = int(time.time() * 1000)
        me = {
            "replica_id": self.node_id,
            "replica_directory_id": None,
            "log_end_offset": self.log.log_end_offset,
            "last_fetch_timestamp": now,
            "last_caught_up_timestamp": now,
        }
        partition = {
            "partition_index": 0,
            "error_code": 0,
            "error_message": None,
            "leader_id": self.node_id,
            "leader_epoch": self.epoch,
            "high_watermark": self.high_watermark,
            "current_voters": [me],
            "observers": [],
        }
        listeners = [{"name": "CONTROLLER", "host": endpoint[0], "port": endpoint[1]}] if endpoint else []
        return {
            "error_code": 0,
            "error_message": None,
            "topics": [{"topic_name": "__cluster_metadata", "partitions": [partition]}],
            "nodes": [{"node_id": self.node_id, "listeners": listeners}],
        }

    async def append(self, records: list[mr.MetadataRecord]) -> int:
        if not records:
            raise ValueError("empty metadata batch")
        async with self._lock:
            now = int(time.time() * 1000)
            batch = encode_batch([Record(i, now, None, mr.encode(rec)) for i, rec in enumerate(records)])
            info = self.log.append_as_leader(batch, leader_epoch=self.epoch)
            await asyncio.to_thread(self.log.flush)
            self.log.update_high_watermark(self.log.log_end_offset)
            committed = CommittedBatch(info.first_offset, info.last_offset, self.epoch, now, tuple(records))
            for lst in self._listeners:
                lst.handle_commit(committed)
            return info.last_offset

    def close(self) -> None:
        self.log.close()


__all__ = ["LocalRaftClient", "NotLeaderError", "read_committed_batches"]
