"""`partition.metadata`: binds a partition directory to its topic id.

Written before the first append so a partition dir can never be confused with one of a
deleted-and-recreated topic of the same name. Format:

    version: 0
    topic_id: <base64url uuid, no padding>
"""

from __future__ import annotations

import base64
import threading
import uuid
from pathlib import Path

from kopfka.storage.checkpoint import atomic_write

PARTITION_METADATA_FILE = "partition.metadata"
PARTITION_METADATA_VERSION = 0


class InconsistentTopicIdError(Exception):
    """The partition dir belongs to a different topic id than the one being loaded."""


def uuid_to_base64(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): url-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def uuid_from_base64(text: str) -> uuid.UUID:
    if len(text) != 22:
        raise ValueError(f"topic id {text!r} is not a 22-character base64 uuid")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


class PartitionMetadataFile:
    """Kafka's PartitionMetadataFile: the topic id is recorded at once and written (with fsync)
    by the scheduler or by the first append, whichever comes first, so that creating many
    partitions in one metadata update costs no fsync on the event loop."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / PARTITION_METADATA_FILE
        self._dirty_topic_id: uuid.UUID | None = None
        self._lock = threading.Lock()  # the scheduler's thread and the appending loop may both flush

    def record(self, topic_id: uuid.UUID) -> None:
        """Remember the topic id to persist at the next maybe_flush (before data is written)."""
        with self._lock:
            self._dirty_topic_id = topic_id

    def maybe_flush(self) -> None:
        if self._dirty_topic_id is None:  # the append path's check, without the lock
            return
        with self._lock:
            if self._dirty_topic_id is not None:
                self.write(self._dirty_topic_id)
                self._dirty_topic_id = None

    def flush_if_dir_exists(self) -> None:
        """The scheduler's flush. A log whose dir was renamed while it ran writes into the new dir;
        one deleted before it ran has no file to write."""
        path = self.path
        try:
            self.maybe_flush()
        except FileNotFoundError:
            if self.path != path:
                self.maybe_flush()
            elif path.parent.exists():
                raise

    def write(self, topic_id: uuid.UUID) -> None:
        text = f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {uuid_to_base64(topic_id)}\n"
        atomic_write(self.path, text.encode())

    def exists(self) -> bool:
        return self.path.exists()

    def read(self) -> uuid.UUID:
        """The recorded topic id; ValueError if the file is malformed."""
        lines = self.path.read_text().splitlines()
        if len(lines) < 2:
            raise ValueError(f"{self.path}: expected version and topic_id lines")
        key, _, value = lines[0].partition(":")
        if key.strip() != "version" or value.strip() != str(PARTITION_METADATA_VERSION):
            raise ValueError(f"{self.path}: unsupported version line {lines[0]!r}")
        key, _, value = lines[1].partition(":")
        if key.strip() != "topic_id":
            raise ValueError(f"{self.path}: malformed topic_id line {lines[1]!r}")
        return uuid_from_base64(value.strip())
