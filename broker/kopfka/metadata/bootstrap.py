"""bootstrap.checkpoint: the records a new cluster's metadata log starts with (seed 000).

Written by `kopfka storage format` into the metadata dir: metadata.version first, then any
other finalized features and, for a dynamic quorum, the initial voter set. The active
controller appends them when it finds the metadata log empty.
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
from kopfka.protocol.record_codec import Record, decode_records, encode_batch
from kopfka.protocol.records import iter_batches
from kopfka.storage.checkpoint import atomic_write

BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"


def bootstrap_records(
    release: str = LATEST_PRODUCTION_RELEASE,
    *,
    kraft_version: int = 0,
    voters: tuple[tuple[int, str, str, int], ...] = (),
    features: dict[str, int] | None = None,
) -> list[mr.MetadataRecord]:
    """`features` overrides the release's default levels (`kopfka storage format --feature`)."""
    recs: list[mr.MetadataRecord] = [
        mr.FeatureLevelRecord(METADATA_VERSION, metadata_level_for(release)),
        mr.FeatureLevelRecord(KRAFT_VERSION, kraft_version),
    ]
    levels = {**default_feature_levels(metadata_level_for(release)), **(features or {})}
    recs.extend(mr.FeatureLevelRecord(name, level) for name, level in sorted(levels.items()) if level > 0)
    if voters:
        recs.append(mr.VotersRecord(voters))
    return recs


def write_bootstrap(metadata_dir: Path, records: list[mr.MetadataRecord]) -> None:
    now = int(time.time() * 1000)
    batch = encode_batch([Record(i, now, None, mr.encode(r)) for i, r in enumerate(records)])
    metadata_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(metadata_dir / BOOTSTRAP_CHECKPOINT, batch)


def read_bootstrap(metadata_dir: Path) -> list[mr.MetadataRecord] | None:
    path = metadata_dir / BOOTSTRAP_CHECKPOINT
    if not path.exists():
        return None
    data = path.read_bytes()
    out: list[mr.MetadataRecord] = []
    try:
        for header in iter_batches(data):
            if header.is_control:  # Kafka's snapshot header and footer; kopfka writes none
                continue
            out.extend(mr.decode(r.value or b"") for r in decode_records(data, header))
    except mr.KafkaBinaryRecordError as exc:  # e.g. a dir formatted by kafka-storage
        raise exc.in_file(path) from None
    return out
