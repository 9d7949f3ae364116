"""Length checks on a request body before kio's native reader sees it.

kio's Rust reader allocates an array for the element count the frame declares before reading
the elements: a fuzzed count (say 2^31) asks for hundreds of GB and the allocator aborts the
whole process — no Python exception to catch. This walker reads only the length prefixes of a
body (strings, bytes, arrays, tagged fields), skipping fixed-size values, and refuses a body in
which any count or length exceeds the bytes that remain. The walk plan of each kio schema class
is derived once from its dataclass fields (`kafka_type` metadata, tuple types for arrays).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any

FIXED = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}
VARIABLE = {"string": 2, "bytes": 4, "records": 4}  # width of the non-flexible length prefix


class BodyError(ValueError):
    """The body declares more than it holds."""


# ("fixed", n) | ("var", prefix width) | ("entity", plan) | ("nullable_entity", plan) | ("array", element step)
Step = tuple[str, Any]


def _unwrap(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if args else tp
    return tp


def _element_step(tp: Any, kafka_type: str | None) -> Step:
    tp = _unwrap(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return ("entity", plan_of(tp))
    if kafka_type in FIXED:
        return ("fixed", FIXED[kafka_type])
    if kafka_type in VARIABLE:
        return ("var", VARIABLE[kafka_type])
    raise TypeError(f"no walk rule for {tp!r} ({kafka_type})")


@cache
def plan_of(cls: type) -> tuple[bool, tuple[Step, ...]]:
    """(flexible, steps) for the non-tagged fields of a kio entity class, in wire order."""
    hints = typing.get_type_hints(cls)
    steps: list[Step] = []
    for f in dataclasses.fields(cls):
        if "tag" in f.metadata:
            continue  # tagged fields are skipped by size in the tagged-field block
        hint = hints[f.name]
        tp = _unwrap(hint)
        kafka_type = f.metadata.get("kafka_type")
        if typing.get_origin(tp) is tuple:
            step = ("array", _element_step(typing.get_args(tp)[0], kafka_type))
        else:
            step = _element_step(tp, kafka_type)
            if step[0] == "entity" and tp is not hint:  # a nullable struct: int8 marker, -1 = null
                step = ("nullable_entity", step[1])
        if step[0] == "fixed" and steps and steps[-1][0] == "fixed":
            steps[-1] = ("fixed", steps[-1][1] + step[1])  # one skip for a run of fixed-size fields
        else:
            steps.append(step)
    return bool(getattr(cls, "__flexible__", False)), tuple(steps)


def _uvarint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end:
            raise BodyError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise BodyError("varint too long")


def _length(buf: memoryview, pos: int, end: int, flexible: bool, width: int) -> tuple[int, int]:
    """A (compact) length or count; -1 for null."""
    if flexible:
        n, pos = _uvarint(buf, pos, end)
        return n - 1, pos
    if pos + width > end:
        raise BodyError("truncated length")
    return int.from_bytes(buf[pos : pos + width], "big", signed=True), pos + width


def _walk(step: Step, flexible: bool, buf: memoryview, pos: int, end: int) -> int:
    kind, arg = step
    if kind == "fixed":
        pos += arg
    elif kind == "var":
        n, pos = _length(buf, pos, end, flexible, arg)
        pos += max(n, 0)
    elif kind == "entity":
        pos = walk(arg, buf, pos, end)
    elif kind == "nullable_entity":
        if pos >= end:
            raise BodyError("truncated struct marker")
        marker = buf[pos]
        pos += 1
        if marker != 0xFF:
            pos = walk(arg, buf, pos, end)
    else:  # array
        count, pos = _length(buf, pos, end, flexible, 4)
        if count > end - pos and not (arg[0] == "fixed" and arg[1] == 0):
            raise BodyError(f"array of {count} elements in {end - pos} bytes")
        for _ in range(max(count, 0)):
            pos = _walk(arg, flexible, buf, pos, end)
            if pos > end:
                break
    if pos > end:
        raise BodyError(f"field runs {pos - end} bytes past the end of the frame")
    return pos


def walk(plan: tuple[bool, tuple[Step, ...]], buf: memoryview, pos: int, end: int) -> int:
    flexible, steps = plan
    for step in steps:
        pos = _walk(step, flexible, buf, pos, end)
    if flexible:
        count, pos = _uvarint(buf, pos, end)
        if count > end - pos:
            raise BodyError(f"{count} tagged fields in {end - pos} bytes")
        for _ in range(count):
            _, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            pos += size
            if pos > end:
                raise BodyError("tagged field runs past the end of the frame")
    return pos


def check_body(cls: type, frame: bytes | bytearray | memoryview, offset: int) -> None:
    """Raise BodyError if the body of `cls` at `offset` declares more than the frame holds."""
    buf = memoryview(frame)
    walk(plan_of(cls), buf, offset, len(buf))
