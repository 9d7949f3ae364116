"""TransactionIndex: append-only list of aborted transactions of one segment.

Not mmap'd and created lazily on the first recorded abort. Each entry is a version-prefixed
AbortedTxn (34 bytes): version int16 (0), producerId, firstOffset, lastOffset,
lastStableOffset (int64 each). The fetch path uses it to tell READ_COMMITTED consumers which
ranges to drop.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from kopfka.storage.abstract_index import CorruptIndexError

ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """Kafka's AbortedTxn: a transaction index entry, an aborted transaction's offset range and the LSO at its abort."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            ABORTED_TXN_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    """The aborted transactions a segment's index holds for a fetch range; complete: no later segment need be read."""

    aborted_transactions: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    def __init__(self, start_offset: int, file: Path) -> None:
        self.start_offset = start_offset
        self.file = file
        self._last_offset: int | None = None
        # the file's size once known: every read_committed fetch asks this index, and most
        # logs never abort a transaction, so an empty index answers without touching the disk
        self._size: int | None = None

    @property
    def is_empty(self) -> bool:
        if self._size is None:
            self._size = self.size_in_bytes()
        return self._size < ENTRY_SIZE

    def _fd_append(self, data: bytes) -> None:
        fd = os.open(self.file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self._size = None

    def append(self, txn: AbortedTxn) -> None:
        if self._last_offset is None and self.file.exists():
            entries = self.all_aborted_txns()
            self._last_offset = entries[-1].last_offset if entries else None
        if self._last_offset is not None and self._last_offset >= txn.last_offset:
            raise ValueError(f"last offset of appended aborted txn {txn.last_offset} is not above {self._last_offset}")
        self._fd_append(txn.encode())
        self._last_offset = txn.last_offset

    def _read_all(self) -> bytes:
        try:
            return self.file.read_bytes()
        except FileNotFoundError:
            return b""

    def all_aborted_txns(self) -> list[AbortedTxn]:
        data = self._read_all()
        out: list[AbortedTxn] = []
        for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            if version != ABORTED_TXN_VERSION:
                raise CorruptIndexError(f"unexpected aborted txn version {version} in {self.file}")
            out.append(AbortedTxn(pid, first, last, lso))
        return out

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted txns overlapping [fetch_offset, upper_bound_offset); complete if no later
        segment matters."""
        if self.is_empty:
            return TxnIndexSearchResult([], False)
        found: list[AbortedTxn] = []
        for txn in self.all_aborted_txns():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose lastOffset >= offset."""
        data = self._read_all()
        if not data:
            return
        keep = 0
        for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
            last = struct.unpack_from(">q", data, pos + 18)[0]
            if last >= offset:
                break
            keep = pos + ENTRY_SIZE
        os.truncate(self.file, keep)
        self._last_offset = None
        self._size = None

    def reset(self) -> None:
        if self.file.exists():
            os.truncate(self.file, 0)
        self._last_offset = None
        self._size = None

    def sanity_check(self) -> None:
        try:
            size = self.file.stat().st_size
        except FileNotFoundError:
            return
        if size % ENTRY_SIZE != 0:
            raise CorruptIndexError(f"transaction index {self.file} has a partial entry")

    def flush(self) -> None:
        try:
            fd = os.open(self.file, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        pass

    def rename_to(self, new_file: Path) -> None:
        try:
            os.replace(self.file, new_file)
        except FileNotFoundError:
            pass
        self.file = new_file

    def delete_if_exists(self) -> bool:
        self._size = None
        try:
            self.file.unlink()
            return True
        except FileNotFoundError:
            return False

    def size_in_bytes(self) -> int:
        try:
            return self.file.stat().st_size
        except FileNotFoundError:
            return 0
