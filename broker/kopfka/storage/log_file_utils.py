"""LogFileUtils: file and directory naming of a partition log.

Segment files are named by the zero-padded 20-digit base offset so `ls` sorts them
numerically; transient suffixes mark files being deleted (.deleted), produced by the cleaner
(.cleaned) or about to replace live segments (.swap). Partition directories are
`<topic>-<partition>`, with `.<uuid>-delete` / `-future` / `-stray` forms for deletion,
intra-broker moves and stray replicas.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
CLEAN_SHUTDOWN_FILE_NAME = ".kafka_cleanshutdown"

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

_DELETE_DIR_PATTERN = re.compile(r"^(\S+)-(\S+)\.(\S+)" + DELETE_DIR_SUFFIX + "$")
_FUTURE_DIR_PATTERN = re.compile(r"^(\S+)-(\S+)\.(\S+)" + FUTURE_DIR_SUFFIX + "$")
_STRAY_DIR_PATTERN = re.compile(r"^(\S+)-(\S+)\.(\S+)" + STRAY_DIR_SUFFIX + "$")

# A file name may not exceed 255 bytes on common filesystems; delete dir names are cut to fit.
_MAX_FILE_NAME = 255


def filename_prefix_from_offset(offset: int) -> str:
    """20 digits: the widest positive long, so lexical order = numeric order."""
    return f"{offset:020d}"


def log_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / (filename_prefix_from_offset(offset) + LOG_FILE_SUFFIX + suffix)


def offset_index_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / (filename_prefix_from_offset(offset) + INDEX_FILE_SUFFIX + suffix)


def time_index_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / (filename_prefix_from_offset(offset) + TIME_INDEX_FILE_SUFFIX + suffix)


def transaction_index_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / (filename_prefix_from_offset(offset) + TXN_INDEX_FILE_SUFFIX + suffix)


def producer_snapshot_file(directory: Path, offset: int) -> Path:
    return directory / (filename_prefix_from_offset(offset) + PRODUCER_SNAPSHOT_FILE_SUFFIX)


def offset_from_file_name(name: str) -> int:
    """Base offset encoded in a segment/index/snapshot file name (the part before the first dot)."""
    return int(name.split(".", 1)[0])


def offset_from_file(path: Path) -> int:
    return offset_from_file_name(path.name)


def is_log_file(path: Path) -> bool:
    return path.name.endswith(LOG_FILE_SUFFIX)


def is_index_file(path: Path) -> bool:
    name = path.name
    return (
        name.endswith(INDEX_FILE_SUFFIX)
        or name.endswith(TIME_INDEX_FILE_SUFFIX)
        or name.endswith(TXN_INDEX_FILE_SUFFIX)
    )


def is_producer_snapshot_file(path: Path) -> bool:
    return path.name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX)


def strip_suffix(name: str, suffix: str) -> str:
    return name[: -len(suffix)] if suffix and name.endswith(suffix) else name


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def _unique_dir_name(topic: str, partition: int, suffix: str) -> str:
    unique = uuid.uuid4().hex
    tail = f".{unique}{suffix}"
    prefix = f"{topic}-{partition}"
    return prefix[: _MAX_FILE_NAME - len(tail)] + tail


def log_delete_dir_name(topic: str, partition: int) -> str:
    """`<topic>-<p>.<uuid>-delete`: the rename target of a partition dir scheduled for deletion."""
    return _unique_dir_name(topic, partition, DELETE_DIR_SUFFIX)


def log_future_dir_name(topic: str, partition: int) -> str:
    return _unique_dir_name(topic, partition, FUTURE_DIR_SUFFIX)


def log_stray_dir_name(topic: str, partition: int) -> str:
    return _unique_dir_name(topic, partition, STRAY_DIR_SUFFIX)


def parse_topic_partition_name(dir_name: str) -> tuple[str, int]:
    """(topic, partition) of a partition dir name, including -delete/-future/-stray forms.

    Raises ValueError for names that are not partition dirs.
    """
    if not dir_name:
        raise ValueError("empty directory name")
    for pattern in (_DELETE_DIR_PATTERN, _FUTURE_DIR_PATTERN, _STRAY_DIR_PATTERN):
        m = pattern.match(dir_name)
        if m:
            return m.group(1), _parse_partition(m.group(2), dir_name)
    idx = dir_name.rfind("-")
    if idx <= 0 or idx == len(dir_name) - 1:
        raise ValueError(f"{dir_name!r} is not a partition directory name (<topic>-<partition>)")
    return dir_name[:idx], _parse_partition(dir_name[idx + 1 :], dir_name)


def _parse_partition(text: str, dir_name: str) -> int:
    if not text.isdigit():
        raise ValueError(f"{dir_name!r} does not end in a partition number")
    return int(text)


def is_delete_dir(dir_name: str) -> bool:
    return bool(_DELETE_DIR_PATTERN.match(dir_name))


def is_future_dir(dir_name: str) -> bool:
    return bool(_FUTURE_DIR_PATTERN.match(dir_name))


def is_stray_dir(dir_name: str) -> bool:
    return bool(_STRAY_DIR_PATTERN.match(dir_name))
