"""Just enough protobuf to read OTLP `MetricsData` (opentelemetry/proto/metrics/v1).

A push carries a few kilobytes of metrics; decoding them with a small wire-format reader
avoids a protobuf/opentelemetry dependency. Gauge, Sum and Histogram points are read
(exponential histograms and summaries are skipped), with their attributes and the resource
attributes the client attached.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

_F64 = struct.Struct("<d")
_I64 = struct.Struct("<q")

GAUGE, SUM, HISTOGRAM = "gauge", "sum", "histogram"
TEMPORALITY_DELTA, TEMPORALITY_CUMULATIVE = 1, 2


class OtlpError(ValueError):
    """Not a decodable OTLP MetricsData payload."""


@dataclass
class Point:
    """One OTLP data point: attributes, value (a histogram's sum), histogram count and time."""

    attributes: dict[str, str]
    value: float  # gauge/sum value; histogram sum
    count: int = 0  # histogram count
    time_unix_nano: int = 0


@dataclass
class Metric:
    """One OTLP metric (gauge, sum or histogram) with its description, unit, temporality and points."""

    name: str
    kind: str
    description: str = ""
    unit: str = ""
    temporality: int = 0
    monotonic: bool = False
    points: list[Point] = field(default_factory=list)


@dataclass
class MetricsData:
    """One OTLP ResourceMetrics: the resource attributes and the metrics read under them."""

    resource: dict[str, str]
    metrics: list[Metric]


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise OtlpError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise OtlpError("varint too long")


def _fields(buf: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) — value is an int, or a memoryview for length-delimited."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _varint(buf, pos)
            yield num, wt, v
        elif wt == 1:
            if pos + 8 > end:
                raise OtlpError("truncated fixed64")
            yield num, wt, int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wt == 2:
            n, pos = _varint(buf, pos)
            if pos + n > end:
                raise OtlpError("truncated length-delimited field")
            yield num, wt, buf[pos : pos + n]
            pos += n
        elif wt == 5:
            if pos + 4 > end:
                raise OtlpError("truncated fixed32")
            yield num, wt, int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise OtlpError(f"unsupported wire type {wt}")


def _str(v: int | memoryview) -> str:
    return bytes(v).decode("utf-8", "replace") if isinstance(v, memoryview) else str(v)


def _any_value(buf: memoryview) -> str:
    for num, _wt, v in _fields(buf):
        if num == 1:
            return _str(v)
        if num == 2:
            return "true" if v else "false"
        if num == 3 and isinstance(v, int):
            return str(v - (1 << 64) if v >= 1 << 63 else v)
        if num == 4 and isinstance(v, int):
            return repr(_F64.unpack(v.to_bytes(8, "little"))[0])
    return ""


def _attributes(into: dict[str, str], kv: memoryview) -> None:
    key, value = "", ""
    for num, _wt, v in _fields(kv):
        if num == 1:
            key = _str(v)
        elif num == 2 and isinstance(v, memoryview):
            value = _any_value(v)
    if key:
        into[key] = value


def _number_point(buf: memoryview) -> Point:
    p = Point({}, 0.0)
    for num, _wt, v in _fields(buf):
        if num == 7 and isinstance(v, memoryview):
            _attributes(p.attributes, v)
        elif num == 3 and isinstance(v, int):
            p.time_unix_nano = v
        elif num == 4 and isinstance(v, int):
            p.value = _F64.unpack(v.to_bytes(8, "little"))[0]
        elif num == 6 and isinstance(v, int):
            p.value = float(_I64.unpack(v.to_bytes(8, "little"))[0])
    return p


def _histogram_point(buf: memoryview) -> Point:
    p = Point({}, 0.0)
    for num, _wt, v in _fields(buf):
        if num == 9 and isinstance(v, memoryview):
            _attributes(p.attributes, v)
        elif num == 3 and isinstance(v, int):
            p.time_unix_nano = v
        elif num == 4 and isinstance(v, int):
            p.count = v
        elif num == 5 and isinstance(v, int):
            p.value = _F64.unpack(v.to_bytes(8, "little"))[0]
    return p


def _data(metric: Metric, buf: memoryview) -> None:
    for num, _wt, v in _fields(buf):
        if num == 1 and isinstance(v, memoryview):
            metric.points.append(_histogram_point(v) if metric.kind == HISTOGRAM else _number_point(v))
        elif num == 2 and isinstance(v, int):
            metric.temporality = v
        elif num == 3 and isinstance(v, int):
            metric.monotonic = bool(v)


def _metric(buf: memoryview) -> Metric | None:
    m = Metric("", "")
    body: memoryview | None = None
    for num, _wt, v in _fields(buf):
        if num == 1:
            m.name = _str(v)
        elif num == 2:
            m.description = _str(v)
        elif num == 3:
            m.unit = _str(v)
        elif num in (5, 7, 9) and isinstance(v, memoryview):
            m.kind = {5: GAUGE, 7: SUM, 9: HISTOGRAM}[num]
            body = v
    if body is None or not m.name:
        return None
    _data(m, body)
    return m


def decode_metrics_data(payload: bytes | bytearray | memoryview) -> list[MetricsData]:
    """One MetricsData per ResourceMetrics in the payload."""
    out: list[MetricsData] = []
    for num, _wt, rm in _fields(memoryview(payload)):
        if num != 1 or not isinstance(rm, memoryview):
            continue
        md = MetricsData({}, [])
        for rnum, _rwt, rv in _fields(rm):
            if not isinstance(rv, memoryview):
                continue
            if rnum == 1:
                for anum, _awt, av in _fields(rv):
                    if anum == 1 and isinstance(av, memoryview):
                        _attributes(md.resource, av)
            elif rnum == 2:
                for snum, _swt, sv in _fields(rv):
                    if snum == 2 and isinstance(sv, memoryview):
                        metric = _metric(sv)
                        if metric is not None:
                            md.metrics.append(metric)
        out.append(md)
    return out


# --- encoding (tests and tools: build a payload the way a client would) ------------------
def _key(num: int, wt: int) -> bytes:
    return _enc_varint(num << 3 | wt)


def _enc_varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(num: int, body: bytes) -> bytes:
    return _key(num, 2) + _enc_varint(len(body)) + body


def _kv(key: str, value: str) -> bytes:
    return _ld(1, key.encode()) + _ld(2, _ld(1, value.encode()))


def encode_metrics_data(resource: dict[str, str], metrics: list[Metric]) -> bytes:
    """MetricsData with one ResourceMetrics / ScopeMetrics (gauge and sum points only)."""
    body = b""
    for m in metrics:
        pts = b""
        for p in m.points:
            pt = b"".join(_ld(7, _kv(k, v)) for k, v in p.attributes.items())
            pt += _key(3, 1) + p.time_unix_nano.to_bytes(8, "little") + _key(4, 1) + _F64.pack(p.value)
            pts += _ld(1, pt)
        if m.kind == SUM:
            pts += _key(2, 0) + _enc_varint(m.temporality) + _key(3, 0) + _enc_varint(int(m.monotonic))
        body += _ld(2, _ld(1, m.name.encode()) + _ld(7 if m.kind == SUM else 5, pts))
    res = b"".join(_ld(1, _kv(k, v)) for k, v in resource.items())
    return _ld(1, _ld(1, res) + _ld(2, body))
