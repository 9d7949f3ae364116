"""LeaderEpochFileCache: leader epoch -> first offset written in it, plus its checkpoint file.

The `leader-epoch-checkpoint` file is text: a version line (0), a count line, then
`epoch startOffset` per line. Epochs are strictly increasing and an epoch's start offset is
never reassigned; followers use end_offset_for (OffsetsForLeaderEpoch) to find where their
log diverged from the leader's.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path

from kopfka.storage.checkpoint import CorruptCheckpointError, read_lines, write_lines

LEADER_EPOCH_CHECKPOINT_FILENAME = "leader-epoch-checkpoint"
LEADER_EPOCH_CHECKPOINT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """A leader epoch and the first offset written in it (one line of leader-epoch-checkpoint)."""

    epoch: int
    start_offset: int


class LeaderEpochCheckpointFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, entries: list[EpochEntry], sync: bool = True) -> None:
        write_lines(
            self.path,
            LEADER_EPOCH_CHECKPOINT_VERSION,
            (f"{e.epoch} {e.start_offset}" for e in entries),
            sync=sync,
        )

    def read(self) -> list[EpochEntry]:
        try:
            lines = read_lines(self.path, LEADER_EPOCH_CHECKPOINT_VERSION)
        except FileNotFoundError:
            return []
        except UnicodeDecodeError as e:
            raise CorruptCheckpointError(f"{self.path}: {e}") from None
        out = []
        for line in lines:
            parts = line.split()
            if len(parts) != 2:
                raise CorruptCheckpointError(f"{self.path}: malformed line {line!r}")
            try:
                out.append(EpochEntry(int(parts[0]), int(parts[1])))
            except ValueError:
                raise CorruptCheckpointError(f"{self.path}: malformed line {line!r}") from None
        return out


class LeaderEpochFileCache:
    def __init__(self, topic_partition: str, checkpoint: LeaderEpochCheckpointFile) -> None:
        self.topic_partition = topic_partition
        self.checkpoint = checkpoint
        self._epochs: list[int] = []
        self._entries: dict[int, EpochEntry] = {}
        try:
            loaded = checkpoint.read()
        except CorruptCheckpointError:
            loaded = []
        for entry in loaded:
            self._assign(entry)

    @classmethod
    def for_dir(cls, topic_partition: str, directory: Path) -> LeaderEpochFileCache:
        return cls(
            topic_partition, LeaderEpochCheckpointFile(directory / LEADER_EPOCH_CHECKPOINT_FILENAME)
        )

    def entries(self) -> list[EpochEntry]:
        return [self._entries[e] for e in self._epochs]

    def is_empty(self) -> bool:
        return not self._epochs

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[self._epochs[0]] if self._epochs else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[self._epochs[-1]] if self._epochs else None

    def _is_update_needed(self, entry: EpochEntry) -> bool:
        latest = self.latest_entry
        return (
            latest is None
            or entry.epoch != latest.epoch
            or entry.start_offset < latest.start_offset
        )

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"received invalid partition leader epoch entry {entry}")
        if not self._is_update_needed(entry):
            return False
        # keep the map monotonic: drop later epochs and those starting at/after this one
        while self._epochs:
            last = self._entries[self._epochs[-1]]
            if last.epoch >= entry.epoch or last.start_offset >= entry.start_offset:
                self._epochs.pop()
                del self._entries[last.epoch]
            else:
                break
        self._epochs.append(entry.epoch)
        self._entries[entry.epoch] = entry
        return True

    def assign(self, epoch: int, start_offset: int) -> None:
        if self._assign(EpochEntry(epoch, start_offset)):
            self.flush()

    def previous_epoch(self) -> int | None:
        return self._epochs[-2] if len(self._epochs) >= 2 else None

    def epoch_for_offset(self, offset: int) -> int | None:
        result = None
        for e in self._epochs:
            if self._entries[e].start_offset <= offset:
                result = e
            else:
                break
        return result

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answering OffsetsForLeaderEpoch for `requested_epoch`."""
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        latest = self.latest_epoch
        if latest is not None and latest == requested_epoch:
            return requested_epoch, log_end_offset
        i = bisect.bisect_right(self._epochs, requested_epoch)
        if i == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher = self._entries[self._epochs[i]]
        if i == 0:
            return requested_epoch, higher.start_offset
        return self._epochs[i - 1], higher.start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries starting at or after `end_offset` (log truncated to it)."""
        latest = self.latest_entry
        if end_offset >= 0 and latest is not None and latest.start_offset >= end_offset:
            while self._epochs and self._entries[self._epochs[-1]].start_offset >= end_offset:
                del self._entries[self._epochs.pop()]
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before `start_offset`; the surviving first epoch starts there."""
        removed: EpochEntry | None = None
        while self._epochs and self._entries[self._epochs[0]].start_offset <= start_offset:
            removed = self._entries.pop(self._epochs.pop(0))
        if removed is not None:
            self._epochs.insert(0, removed.epoch)
            self._entries[removed.epoch] = EpochEntry(removed.epoch, start_offset)
            self.flush()

    def clear_and_flush(self) -> None:
        self._epochs.clear()
        self._entries.clear()
        self.flush()

    def flush(self) -> None:
        self.checkpoint.write(self.entries())
