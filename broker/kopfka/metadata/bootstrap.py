"""bootstrap.checkpoint: the records a new cluster's metadata log starts with (seed 000).

Written by `kopfka storage format` into the metadata dir, in Kafka's layout (a snapshot: header,
metadata.version first and the other finalized features, footer). The active controller appends
them when it finds the metadata log empty. For a dynamic quorum (--standalone,
--initial-controllers) the initial voter set and kraft.version 1 go, as in Kafka, in the
metadata log's first snapshot, `__cluster_metadata-0/00000000000000000000-0000000000.checkpoint`.
Dirs formatted by earlier kopfka releases kept the voters in bootstrap.checkpoint: still read.
"""

from __future__ import annotations

import time
from pathlib import Path

from kopfka.metadata import records as mr
from kopfka.metadata.features import (  # noqa: F401  (re-exported for the format CLI)
    KRAFT_VERSION,
    LATEST_PRODUCTION_RELEASE,
    METADATA_VERSION,
    RELEASE_LEVELS,
    default_feature_levels,
    metadata_level_for,
)
from kopfka.metadata.record_batches import decode_all, encode_snapshot
from kopfka.protocol.errors import CorruptRecordError
from kopfka.storage.checkpoint import atomic_write

BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
METADATA_TOPIC = "__cluster_metadata"
BOOTSTRAP_SNAPSHOT = "00000000000000000000-0000000000.checkpoint"  # Kafka's snapshot id (0, 0)


def bootstrap_records(
    release: str = LATEST_PRODUCTION_RELEASE,
    *,
    kraft_version: int = 0,
    voters: tuple[tuple[int, str, str, int], ...] = (),
    features: dict[str, int] | None = None,
    controller_listener: str = "CONTROLLER",
) -> list[mr.MetadataRecord]:
    """`features` overrides the release's default levels (`kopfka storage format --feature`)."""
    """`features` overrides the release's default levels (`kopfka storage format --feature`).
    With `voters` (a dynamic quorum) the list ends with kraft.version and the voter set, which
    write_bootstrap puts in the metadata log's first snapshot (each voter's endpoint named after
    `controller_listener`, the first of controller.listener.names)."""
    recs: list[mr.MetadataRecord] = [mr.FeatureLevelRecord(METADATA_VERSION, metadata_level_for(release))]
    levels = {**default_feature_levels(metadata_level_for(release)), **(features or {})}
    recs.extend(mr.FeatureLevelRecord(name, level) for name, level in sorted(levels.items()) if level > 0)
    if voters:
        recs += [mr.KRaftVersionRecord(kraft_version or 1), mr.VotersRecord(voters, controller_listener)]
    return recs


def write_bootstrap(metadata_dir: Path, records: list[mr.MetadataRecord]) -> None:
    """bootstrap.checkpoint with the metadata records, and the 0-0 snapshot with the control ones."""
    now = int(time.time() * 1000)
    metadata = [r for r in records if not isinstance(r, mr.ControlRecord)]
    control = [r for r in records if isinstance(r, mr.ControlRecord)]
    metadata_dir.mkdir(parents=True, exist_ok=True)
    data = encode_snapshot(metadata, timestamp=now, last_contained_log_timestamp=0)
    atomic_write(metadata_dir / BOOTSTRAP_CHECKPOINT, data)
    if control:
        log_dir = metadata_dir / f"{METADATA_TOPIC}-0"
        log_dir.mkdir(exist_ok=True)
        atomic_write(
            log_dir / BOOTSTRAP_SNAPSHOT, encode_snapshot(control, timestamp=now, last_contained_log_timestamp=now)
        )


def _read(path: Path) -> list[mr.MetadataRecord]:
    try:
        return decode_all(path.read_bytes())
    except (mr.MetadataRecordError, CorruptRecordError) as exc:
        raise mr.MetadataRecordError(f"{path} cannot be read: {exc}") from None


def read_bootstrap(metadata_dir: Path) -> list[mr.MetadataRecord] | None:
    """bootstrap.checkpoint's records, then those of the 0-0 snapshot (the initial voters); None
    if the dir has no bootstrap.checkpoint. MetadataRecordError names a file that does not parse."""
    path = metadata_dir / BOOTSTRAP_CHECKPOINT
    if not path.exists():
        return None
    out = _read(path)
    first = metadata_dir / f"{METADATA_TOPIC}-0" / BOOTSTRAP_SNAPSHOT
    if first.exists():
        out += _read(first)
    return out
