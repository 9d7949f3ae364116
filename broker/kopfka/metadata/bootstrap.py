"""bootstrap.checkpoint: the records a new cluster's metadata log starts with (seed 000).

Written by `kopfka storage format` into the metadata dir: metadata.version first, then any
other finalized features and, for a dynamic quorum, the initial voter set. The active
controller appends them when it finds the metadata log empty.
"""

from __future__ import annotations

import time
from pathlib import Path

from kopfka.metadata import records as mr
from kopfka.protocol.record_codec import Record, decode_records, encode_batch
from kopfka.protocol.records import iter_batches
from kopfka.storage.checkpoint import atomic_write

BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"

# release -> metadata.version feature level (MetadataVersion's levels per Kafka release line)
RELEASE_LEVELS = {
    "3.3": 7,
    "3.4": 8,
    "3.5": 11,
    "3.6": 14,
    "3.7": 19,
    "3.8": 20,
    "3.9": 21,
    "4.0": 25,
    "4.1": 27,
    "4.2": 28,
    "4.3": 30,
}
LATEST_PRODUCTION_RELEASE = "4.3"
KRAFT_VERSION = "kraft.version"


def metadata_level_for(release: str) -> int:
    short = ".".join(release.split("-")[0].split(".")[:2])
    if short not in RELEASE_LEVELS:
        raise ValueError(f"Unknown release version {release!r}; known: {', '.join(RELEASE_LEVELS)}")
    return RELEASE_LEVELS[short]


def bootstrap_records(
    release: str = LATEST_PRODUCTION_RELEASE,
    *,
    kraft_version: int = 0,
    voters: tuple[tuple[int, str, str, int], ...] = (),
) -> list[mr.MetadataRecord]:
    recs: list[mr.MetadataRecord] = [
        mr.FeatureLevelRecord("metadata.version", metadata_level_for(release)),
        mr.FeatureLevelRecord(KRAFT_VERSION, kraft_version),
    ]
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
    for header in iter_batches(data):
        out.extend(mr.decode(r.value or b"") for r in decode_records(data, header))
    return out
