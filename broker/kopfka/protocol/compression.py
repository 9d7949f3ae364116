"""Batch payload codecs: none, gzip, snappy (raw and xerial-framed), lz4 (frame), zstd.

Placeholder surface: `compress(codec, data, level)` and `decompress(codec, data)`. The
codec ids are the batch attribute values (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
"""

from __future__ import annotations

import gzip as _gzip

from kopfka.protocol.errors import CorruptRecordError


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return _gzip.compress(data, compresslevel=6 if level in (None, -1) else level)
    raise CorruptRecordError(message=f"compression codec {codec} not implemented yet")


def decompress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    try:
        if codec == 1:
            return _gzip.decompress(data)
    except Exception as exc:  # any codec failure is a corrupt batch, never a crash
        raise CorruptRecordError(message=f"cannot decompress batch: {exc}") from exc
    raise CorruptRecordError(message=f"unknown compression codec {codec}")
