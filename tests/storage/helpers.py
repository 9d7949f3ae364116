"""Shared builders for storage tests: small-segment configs, batches, a controllable clock."""

from __future__ import annotations

from pathlib import Path

from kopfka.config.log_config import LogConfig
from kopfka.protocol.record_codec import Record, decode_records, encode_batch
from kopfka.protocol.records import iter_batches
from kopfka.storage.log_segment import FetchDataInfo
from kopfka.storage.unified_log import UnifiedLog

BASE_TS = 1_700_000_000_000


class Clock:
    def __init__(self, now: int = BASE_TS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def small_config(**overrides: object) -> LogConfig:
    """Topic defaults with tiny segments; built directly to bypass the 1 MiB validator floor."""
    values = dict(LogConfig.defaults().values)
    values.update({"segment.bytes": 4096, "index.interval.bytes": 256, "segment.index.bytes": 4096})
    values.update({k.replace("_", "."): v for k, v in overrides.items()})
    return LogConfig(values)


def batch(
    values: list[bytes],
    *,
    ts: int = BASE_TS,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamps: list[int] | None = None,
    compression: int = 0,
) -> bytes:
    records = [
        Record(i, timestamps[i] if timestamps else ts, f"k{i}".encode(), v)
        for i, v in enumerate(values)
    ]
    return encode_batch(
        records,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        compression_type=compression,
    )


def read_values(
    log: UnifiedLog, start: int, max_bytes: int = 1 << 30, isolation: str = "log_end"
) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record readable from `start`, following reads to the end."""
    out: list[tuple[int, bytes | None]] = []
    offset = start
    while offset < log.log_end_offset:
        info = log.read(offset, max_bytes, isolation=isolation)
        if info.records is None:
            break
        data = info.records.read()
        progressed = False
        for header in iter_batches(data, allow_partial_tail=True):
            for r in decode_records(data, header):
                if r.offset >= offset:
                    out.append((r.offset, r.value))
            offset = header.next_offset
            progressed = True
        if not progressed:
            break
    return out


def records_of(info: FetchDataInfo) -> list[int]:
    """Offsets of the whole batches in a read result."""
    if info.records is None:
        return []
    data = info.records.read()
    offs: list[int] = []
    for header in iter_batches(data, allow_partial_tail=True):
        offs.extend(range(header.base_offset, header.next_offset))
    return offs


def log_dir(tmp_path: Path, name: str = "orders-0") -> Path:
    return tmp_path / name
