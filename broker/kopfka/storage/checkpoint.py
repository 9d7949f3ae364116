"""Crash-consistent checkpoint files and the clean-shutdown marker.

Every checkpoint is written to `<name>.tmp`, fsync'd, renamed over the target and the
directory fsync'd, so a crash leaves either the old or the new complete file. The offset
checkpoint text format (OffsetCheckpointFile) is shared by recovery-point-offset-checkpoint,
log-start-offset-checkpoint, replication-offset-checkpoint and cleaner-offset-checkpoint:

    0                 <- version
    2                 <- entry count
    orders 0 1234     <- topic partition offset
    orders 1 99
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from kopfka.storage.log_file_utils import CLEAN_SHUTDOWN_FILE_NAME

RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
OFFSET_CHECKPOINT_VERSION = 0


class CorruptCheckpointError(ValueError):
    """A checkpoint file could not be parsed; callers may treat it as empty."""


def fsync_dir(directory: Path) -> None:
    """Make a rename/create in `directory` durable (no-op where directories can't be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace `path` with `data` so that a crash leaves the old or the new file, never a mix."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def write_lines(path: Path, version: int, lines: Iterable[str], *, sync: bool = True) -> None:
    """The CheckpointFile layout: version line, count line, one entry per line."""
    body = list(lines)
    text = f"{version}\n{len(body)}\n" + "".join(line + "\n" for line in body)
    atomic_write(path, text.encode(), sync=sync)


def read_lines(path: Path, expected_version: int) -> list[str]:
    """Entry lines of a checkpoint file; raises CorruptCheckpointError on any inconsistency.

    A missing file raises FileNotFoundError (distinct from corruption).
    """
    text = path.read_bytes().decode("utf-8", errors="strict")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CorruptCheckpointError(f"{path}: missing version or count line")
    try:
        version = int(lines[0].strip())
        count = int(lines[1].strip())
    except ValueError as e:
        raise CorruptCheckpointError(f"{path}: malformed header: {e}") from None
    if version != expected_version:
        raise CorruptCheckpointError(f"{path}: unrecognised version {version}")
    entries = lines[2:]
    if count != len(entries) or count < 0:
        raise CorruptCheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    return entries


class OffsetCheckpointFile:
    """A per-log-dir map of (topic, partition) -> offset in the OffsetCheckpointFile format."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, offsets: Mapping[tuple[str, int], int], *, sync: bool = True) -> None:
        lines = [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
        write_lines(self.path, OFFSET_CHECKPOINT_VERSION, lines, sync=sync)

    def read(self) -> dict[tuple[str, int], int]:
        """Entries of the file; {} if it does not exist; CorruptCheckpointError if malformed."""
        try:
            lines = read_lines(self.path, OFFSET_CHECKPOINT_VERSION)
        except FileNotFoundError:
            return {}
        except UnicodeDecodeError as e:
            raise CorruptCheckpointError(f"{self.path}: not text: {e}") from None
        result: dict[tuple[str, int], int] = {}
        for line in lines:
            parts = line.split(" ")
            if len(parts) != 3:
                raise CorruptCheckpointError(f"{self.path}: malformed line {line!r}")
            topic, partition, offset = parts
            try:
                result[(topic, int(partition))] = int(offset)
            except ValueError:
                raise CorruptCheckpointError(f"{self.path}: malformed line {line!r}") from None
        return result

    def read_or_empty(self) -> dict[tuple[str, int], int]:
        """Tolerant read used at startup: a corrupt checkpoint is treated as empty."""
        try:
            return self.read()
        except CorruptCheckpointError:
            return {}


class CleanShutdownFileHandler:
    """The `.kafka_cleanshutdown` marker in a log dir, carrying the broker epoch as JSON."""

    VERSION = 0

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / CLEAN_SHUTDOWN_FILE_NAME

    def write(self, broker_epoch: int, *, sync: bool = True) -> None:
        body = json.dumps(
            {"version": self.VERSION, "brokerEpoch": broker_epoch}, separators=(",", ":")
        )
        atomic_write(self.path, body.encode(), sync=sync)

    def read(self) -> int:
        """The recorded broker epoch, or -1 if absent, empty (old format) or unreadable."""
        try:
            text = self.path.read_text()
        except (FileNotFoundError, UnicodeDecodeError):
            return -1
        try:
            data = json.loads(text)
            return int(data["brokerEpoch"])
        except (ValueError, KeyError, TypeError):
            return -1

    def exists(self) -> bool:
        return self.path.exists()

    def delete(self) -> None:
        """Removed at startup so a crash during loading is treated as unclean next time."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        fsync_dir(self.path.parent)
