"""FileRecords: the .log file of a segment, a sequence of v2 record batches.

Appends go to the end with os.pwrite on a raw fd (one syscall, no extra copy); reads are
positional (os.pread), so readers never disturb the writer. Fetches get a FileSlice: an
(fd, position, size) triple the network layer can hand to os.sendfile. The fd is shared through
a reference-counted FileHandle, so a slice stays readable after the segment is renamed
`.deleted`, unlinked or closed: the fd is closed only when the last holder lets go.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from kopfka.protocol.errors import CorruptRecordError
from kopfka.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    read_header,
)

_HEADER_SCAN_CHUNK = 32 * 1024
_RECOVERY_CHUNK = 4 * 1024 * 1024
_LENGTH = struct.Struct(">qi")
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD


class FileHandle:
    """An fd closed when the last reference (file or slice) goes away."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def __del__(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except Exception:  # interpreter shutdown or already closed
                pass


@dataclass(frozen=True, slots=True)
class LogOffsetPosition:
    """The batch containing a searched offset: its last offset, file position and size."""

    offset: int
    position: int
    size: int


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """Kafka's FileRecords.TimestampAndOffset: a ListOffsets answer (timestamp, offset, leader epoch or None)."""

    timestamp: int
    offset: int
    leader_epoch: int | None = None


class FileSlice:
    """A zero-copy byte range of a segment file, as returned to the fetch path.

    Send with `os.sendfile(sock, slice.fileno(), slice.position, slice.size)`; a truncation
    racing the send can make the file shorter than `size` (sendfile then returns 0 early).
    """

    __slots__ = ("_handle", "position", "size")

    def __init__(self, handle: FileHandle, position: int, size: int) -> None:
        self._handle = handle
        self.position = position
        self.size = size

    def fileno(self) -> int:
        return self._handle.fd

    def __len__(self) -> int:
        return self.size

    def read(self) -> bytes:
        return os.pread(self._handle.fd, self.size, self.position)

    def __repr__(self) -> str:
        return f"FileSlice(fd={self._handle.fd}, position={self.position}, size={self.size})"


class FileRecords:
    def __init__(self, file: Path, handle: FileHandle, size: int) -> None:
        self.file = file
        self._handle: FileHandle | None = handle
        self._size = size

    @classmethod
    def open(
        cls,
        file: Path,
        *,
        file_already_exists: bool = False,
        init_file_size: int = 0,
        preallocate: bool = False,
    ) -> FileRecords:
        fd = os.open(file, os.O_RDWR | os.O_CREAT, 0o644)
        if preallocate and not file_already_exists:
            os.ftruncate(fd, init_file_size)
            size = 0
        else:
            size = os.fstat(fd).st_size
        return cls(file, FileHandle(fd), size)

    @property
    def fd(self) -> int:
        if self._handle is None:
            raise ValueError(f"{self.file} is closed")
        return self._handle.fd

    def size_in_bytes(self) -> int:
        return self._size

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write `data` at the end; returns the number of bytes written."""
        fd = self.fd
        position = self._size
        n = os.pwrite(fd, data, position)
        total = len(data)
        if n < total:
            view = memoryview(data)
            while n < total:
                n += os.pwrite(fd, view[n:], position + n)
        self._size = position + total
        return total

    def pread(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def slice(self, position: int, size: int) -> FileSlice:
        if position < 0 or size < 0:
            raise ValueError(f"invalid slice position {position} size {size}")
        end = min(position + size, self._size)
        assert self._handle is not None
        return FileSlice(self._handle, position, max(0, end - position))

    # -- batch header scanning (no record decoding, no CRC) ---------------------------------

    def batch_headers(self, start: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
        """Headers of the batches in [start, end) with absolute positions; stops at a
        partial batch."""
        limit = self._size if end is None else min(end, self._size)
        fd = self.fd
        pos = start
        buf = b""
        buf_start = start
        while pos + LOG_OVERHEAD <= limit:
            rel = pos - buf_start
            if rel < 0 or len(buf) - rel < BATCH_HEADER_SIZE:
                buf = os.pread(fd, min(_HEADER_SCAN_CHUNK, limit - pos), pos)
                buf_start = pos
                rel = 0
                if len(buf) < BATCH_HEADER_SIZE:
                    return
            header = read_header(buf, rel)
            if pos + header.size > limit:
                return
            header.position = pos
            yield header
            pos += header.size

    def search_for_offset_from_position(
        self, target_offset: int, starting_position: int
    ) -> LogOffsetPosition | None:
        """The first batch at or after `starting_position` whose last offset >= target."""
        for header in self.batch_headers(starting_position):
            if header.base_offset + header.last_offset_delta >= target_offset:
                return LogOffsetPosition(header.last_offset, header.position, header.size)
        return None

    def search_for_timestamp(
        self, target_timestamp: int, starting_position: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """First record with timestamp >= target and offset >= starting_offset (decodes one
        batch)."""
        from kopfka.protocol.record_codec import decode_records

        for header in self.batch_headers(starting_position):
            if header.max_timestamp >= target_timestamp and header.last_offset >= starting_offset:
                data = self.pread(header.position, header.size)
                local = read_header(data, 0)
                for record in decode_records(data, local):
                    if record.timestamp >= target_timestamp and record.offset >= starting_offset:
                        return TimestampAndOffset(
                            record.timestamp, record.offset, _epoch_or_none(header)
                        )
        return None

    def largest_timestamp_after(self, starting_position: int) -> TimestampAndOffset:
        """Max batch timestamp (and its batch's last offset) from `starting_position` on."""
        max_ts, offset = -1, -1
        for header in self.batch_headers(starting_position):
            if header.max_timestamp > max_ts:
                max_ts, offset = header.max_timestamp, header.last_offset
        return TimestampAndOffset(max_ts, offset)

    # -- recovery ----------------------------------------------------------------------------

    def valid_batches(self, start: int = 0) -> Iterator[BatchHeader]:
        """Batches that pass size, magic and CRC32C checks, stopping silently at the first
        that doesn't.

        Used by recovery only: reads the bytes in large chunks to verify the CRC.
        """
        fd = self.fd
        size = self._size
        pos = start
        while pos + LOG_OVERHEAD <= size:
            buf = os.pread(fd, min(_RECOVERY_CHUNK, size - pos), pos)
            off = 0
            blen = len(buf)
            while blen - off >= LOG_OVERHEAD:
                batch_length = _LENGTH.unpack_from(buf, off)[1]
                total = batch_length + LOG_OVERHEAD
                if batch_length < _MIN_BATCH_LENGTH or pos + off + total > size:
                    return  # garbage length or torn tail
                if blen - off < total:
                    break
                if buf[off + 16] != MAGIC_V2:
                    return
                try:
                    header = read_header(buf, off)
                except CorruptRecordError:
                    return
                crc_start = off + ATTRIBUTES_OFFSET
                if crc32c(memoryview(buf)[crc_start : off + total]) != header.crc:
                    return
                header.position = pos + off
                yield header
                off += total
            if off == 0:
                # a single batch larger than the chunk: read exactly it
                batch_length = _LENGTH.unpack_from(buf, 0)[1]
                total = batch_length + LOG_OVERHEAD
                buf = os.pread(fd, total, pos)
                if len(buf) < total or buf[16] != MAGIC_V2:
                    return
                try:
                    header = read_header(buf, 0)
                except CorruptRecordError:
                    return
                if crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:total]) != header.crc:
                    return
                header.position = pos
                yield header
                off = total
            pos += off

    # -- lifecycle ---------------------------------------------------------------------------

    def truncate_to(self, target_size: int) -> int:
        """Cut the file to `target_size`; returns the bytes removed."""
        if target_size > self._size or target_size < 0:
            raise ValueError(
                f"attempt to truncate {self.file} of size {self._size} to {target_size}"
            )
        removed = self._size - target_size
        os.ftruncate(self.fd, target_size)
        self._size = target_size
        return removed

    def trim(self) -> None:
        """Drop pre-allocated space beyond the written bytes."""
        if self._handle is not None and os.fstat(self.fd).st_size > self._size:
            os.ftruncate(self.fd, self._size)

    def flush(self) -> None:
        if self._handle is not None:
            os.fsync(self._handle.fd)

    def close(self) -> None:
        if self._handle is not None:
            self.trim()
            self._handle = None  # the fd closes once no FileSlice holds it

    def close_handlers(self) -> None:
        self._handle = None

    def rename_to(self, new_file: Path) -> None:
        try:
            os.replace(self.file, new_file)
        finally:
            self.file = new_file

    def delete_if_exists(self) -> bool:
        self.close_handlers()
        try:
            self.file.unlink()
            return True
        except FileNotFoundError:
            return False

    def last_modified_ms(self) -> int:
        try:
            return int(self.file.stat().st_mtime * 1000)
        except FileNotFoundError:
            return 0


def _epoch_or_none(header: BatchHeader) -> int | None:
    return header.partition_leader_epoch if header.partition_leader_epoch >= 0 else None
