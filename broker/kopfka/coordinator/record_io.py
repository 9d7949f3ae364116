"""Readers and writers of Kafka's generated-message encoding, for coordinator records.

`__consumer_offsets`, `__transaction_state` and `__share_group_state` keys and values are version-prefixed messages
(Kafka's MessageUtil.toVersionPrefixedBytes): classic versions use int16 string lengths and
int32 array lengths; flexible versions use unsigned-varint "compact" lengths (+1, 0 = null)
and end every struct with a tagged-field section.
"""

from __future__ import annotations

import struct
import uuid


class RecordFormatError(ValueError):
    """A coordinator record key or value does not parse."""


class Writer:
    def __init__(self, flexible: bool = False) -> None:
        self.buf = bytearray()
        self.flexible = flexible

    def i8(self, v: int) -> Writer:
        self.buf += struct.pack(">b", v)
        return self

    def i16(self, v: int) -> Writer:
        self.buf += struct.pack(">h", v)
        return self

    def i32(self, v: int) -> Writer:
        self.buf += struct.pack(">i", v)
        return self

    def i64(self, v: int) -> Writer:
        self.buf += struct.pack(">q", v)
        return self

    def uuid(self, v: uuid.UUID) -> Writer:
        self.buf += v.bytes
        return self

    def uvarint(self, v: int) -> Writer:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)
        return self

    def _length(self, n: int, wide: bool) -> Writer:
        if self.flexible:
            return self.uvarint(n + 1)
        return self.i32(n) if wide else self.i16(n)

    def string(self, s: str | None) -> Writer:
        if s is None:
            return self._length(-1, False)
        b = s.encode()
        self._length(len(b), False)
        self.buf += b
        return self

    def bytes_(self, b: bytes | None) -> Writer:
        if b is None:
            return self._length(-1, True)
        self._length(len(b), True)
        self.buf += b
        return self

    def array_len(self, n: int | None) -> Writer:
        return self._length(-1 if n is None else n, True)

    def tags(self, fields: dict[int, bytes] | None = None) -> Writer:
        """A struct's tagged-field section (flexible versions only): tag -> encoded value."""
        if self.flexible:
            items = sorted((fields or {}).items())
            self.uvarint(len(items))
            for tag, data in items:
                self.uvarint(tag).uvarint(len(data))
                self.buf += data
        return self


class Reader:
    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError("record runs past its end")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def i8(self) -> int:
        return int(struct.unpack(">b", self._take(1))[0])

    def i16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def i32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def i64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint too long")

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.i32() if wide else self.i16()

    def string(self) -> str | None:
        n = self._length(False)
        return None if n < 0 else self._take(n).decode("utf-8", "replace")

    def bytes_(self) -> bytes | None:
        n = self._length(True)
        return None if n < 0 else self._take(n)

    def array_len(self) -> int:
        return self._length(True)

    def tags(self) -> dict[int, bytes]:
        """The tagged fields of the current struct (empty for classic versions)."""
        out: dict[int, bytes] = {}
        if self.flexible:
            for _ in range(self.uvarint()):
                tag = self.uvarint()
                out[tag] = self._take(self.uvarint())
        return out

    def skip_tags(self) -> None:
        self.tags()
