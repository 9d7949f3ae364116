"""ClientMetricsManager (KIP-714): hand out subscriptions, accept pushes at the negotiated pace.

Each client instance (a broker-assigned UUID) gets the union of every subscription whose
`match` fits it: metric prefixes merged, the shortest push interval. The subscription id is
CRC32C(metrics + interval) XOR the instance id's hash, so it changes exactly when the effective
subscription does and a client can detect drift. A client may push once per interval — a
push is always accepted right after a GetTelemetrySubscriptions — and anything earlier is
refused with THROTTLING_QUOTA_EXCEEDED and the remaining wait as throttle_time_ms. Pushed
OTLP metrics are kept per instance and exported on the broker's /metrics endpoint
(kopfka.metrics.exposition.TelemetryCollector).
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import crc32c

from kopfka.metadata.image import MetadataDelta, MetadataImage
from kopfka.protocol import compression
from kopfka.protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from kopfka.telemetry.otlp import HISTOGRAM, SUM, TEMPORALITY_DELTA, OtlpError, decode_metrics_data
from kopfka.telemetry.subscriptions import (
    ALL_METRICS,
    CLIENT_METRICS_RESOURCE,
    DEFAULT_INTERVAL_MS,
    Subscription,
    subscription_from_config,
)

log = logging.getLogger(__name__)

CACHE_MAX_SIZE = 16384
MIN_EXPIRY_MS = 60_000
# order of preference, as Kafka offers them
SUPPORTED_COMPRESSION = (compression.ZSTD, compression.LZ4, compression.GZIP, compression.SNAPPY)
ZERO_UUID = uuid.UUID(int=0)
_SANITIZE = re.compile(r"[^a-zA-Z0-9_]")


@dataclass
class ClientInstance:
    """A client instance (KIP-714): identity, effective subscription, push timing and the series it exported."""

    instance_id: uuid.UUID
    identity: dict[str, str]
    metrics: tuple[str, ...]
    push_interval_ms: int
    subscription_id: int
    subscription_version: int
    last_get_ms: float = 0.0
    last_push_ms: float = 0.0
    last_error: ErrorCode = ErrorCode.none
    terminating: bool = False
    last_seen_ms: float = 0.0
    # exported series: (prometheus name, sorted label items) -> value
    series: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)
    pushes: int = 0


def _java_uuid_hash(u: uuid.UUID) -> int:
    hi, lo = u.int >> 64, u.int & ((1 << 64) - 1)
    hilo = hi ^ lo
    return ((hilo >> 32) ^ hilo) & 0xFFFFFFFF


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def subscription_id(metrics: tuple[str, ...], interval_ms: int, instance_id: uuid.UUID) -> int:
    crc = crc32c.crc32c(f"[{', '.join(metrics)}]{interval_ms}".encode())
    return _int32(crc ^ _java_uuid_hash(instance_id))


def prometheus_name(otlp_name: str) -> str:
    return "kafka_client_telemetry_" + _SANITIZE.sub("_", otlp_name)


class ClientMetricsManager:
    """Subscriptions from the metadata image; instances in an LRU cache; their pushed series."""

    name = "ClientMetricsManager"

    def __init__(self, telemetry_max_bytes: int = 1_048_576, clock: Callable[[], float] | None = None) -> None:
        self.telemetry_max_bytes = telemetry_max_bytes
        self.clock = clock or (lambda: time.monotonic() * 1000.0)
        self.subscriptions: dict[str, Subscription] = {}
        self.subscription_version = 0
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        self.throttled_pushes = 0
        self.errors: dict[str, int] = {}

    # --- subscriptions -------------------------------------------------------------------
    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        if any(rtype == CLIENT_METRICS_RESOURCE for rtype, _ in delta.changed_configs) or delta.finished_snapshot:
            self.update_subscriptions(
                {name: values for (rtype, name), values in image.configs.items() if rtype == CLIENT_METRICS_RESOURCE}
            )

    def update_subscriptions(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        self.subscriptions = {name: subscription_from_config(name, values) for name, values in configs.items()}
        self.subscription_version += 1

    def _resolve(self, instance_id: uuid.UUID, identity: dict[str, str]) -> tuple[tuple[str, ...], int, int]:
        metrics: set[str] = set()
        interval = None
        for sub in self.subscriptions.values():
            if not sub.metrics or not sub.matches(identity):
                continue
            metrics.update(sub.metrics)
            interval = sub.interval_ms if interval is None else min(interval, sub.interval_ms)
        ordered = (ALL_METRICS,) if ALL_METRICS in metrics else tuple(sorted(metrics))
        interval = DEFAULT_INTERVAL_MS if interval is None else interval
        return ordered, interval, subscription_id(ordered, interval, instance_id)

    def _instance(self, instance_id: uuid.UUID, ctx: Any, now: float) -> ClientInstance:
        inst = self.instances.get(instance_id)
        identity = {
            "client_instance_id": str(instance_id),
            "client_id": ctx.client_id or "",
            "client_software_name": getattr(ctx, "client_software_name", "") or "",
            "client_software_version": getattr(ctx, "client_software_version", "") or "",
            "client_source_address": ctx.client_host or "",
            "client_source_port": str(getattr(ctx, "client_port", 0) or ""),
        }
        if inst is None:
            metrics, interval, sid = self._resolve(instance_id, identity)
            inst = ClientInstance(instance_id, identity, metrics, interval, sid, self.subscription_version)
            self.instances[instance_id] = inst
            while len(self.instances) > CACHE_MAX_SIZE:
                self.instances.popitem(last=False)
        elif inst.subscription_version < self.subscription_version:
            inst.metrics, inst.push_interval_ms, inst.subscription_id = self._resolve(instance_id, inst.identity)
            inst.subscription_version = self.subscription_version
        self.instances.move_to_end(instance_id)
        inst.last_seen_ms = now
        self._expire(now)
        return inst

    def _expire(self, now: float) -> None:
        while self.instances:
            first = next(iter(self.instances.values()))
            if now - first.last_seen_ms < max(MIN_EXPIRY_MS, 3 * first.push_interval_ms):
                return
            self.instances.popitem(last=False)

    # --- RPCs --------------------------------------------------------------------------------
    def get_subscriptions(self, ctx: Any, client_instance_id: uuid.UUID | None) -> dict[str, Any]:
        now = self.clock()
        iid = client_instance_id if client_instance_id not in (None, ZERO_UUID) else uuid.uuid4()
        assert iid is not None
        inst = self._instance(iid, ctx, now)
        out: dict[str, Any] = {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "client_instance_id": iid,
            "subscription_id": inst.subscription_id,
            "accepted_compression_types": list(SUPPORTED_COMPRESSION),
            "push_interval": inst.push_interval_ms,
            "telemetry_max_bytes": self.telemetry_max_bytes,
            "delta_temporality": True,
            "requested_metrics": ["" if m == ALL_METRICS else m for m in inst.metrics],
        }
        recovering = inst.last_error in (ErrorCode.unknown_subscription_id, ErrorCode.unsupported_compression_type)
        last = max(inst.last_get_ms, inst.last_push_ms)
        if last and not recovering and now - last < inst.push_interval_ms:
            wait = max(1, round(inst.push_interval_ms - (now - last)))
            out.update(error_code=ErrorCode.throttling_quota_exceeded, throttle_time=wait)
            return out
        inst.last_get_ms = now
        inst.last_error = ErrorCode.none
        return out

    def push(
        self,
        ctx: Any,
        client_instance_id: uuid.UUID | None,
        sub_id: int,
        terminating: bool,
        compression_type: int,
        payload: bytes,
    ) -> dict[str, Any]:
        now = self.clock()
        try:
            if client_instance_id in (None, ZERO_UUID):
                raise KafkaError(ErrorCode.invalid_request, "Invalid NULL_UUID client instance id")
            assert client_instance_id is not None
            inst = self._instance(client_instance_id, ctx, now)
            try:
                wait = self._validate(inst, sub_id, terminating, compression_type, payload, now)
            except KafkaError as exc:
                inst.last_error = exc.code
                raise
            if wait:
                inst.last_error = ErrorCode.throttling_quota_exceeded
                self.throttled_pushes += 1
                return {"throttle_time": wait, "error_code": ErrorCode.throttling_quota_exceeded}
            inst.last_error = ErrorCode.none
            if terminating:
                inst.terminating = True
            self._export(inst, compression_type, payload)
        except KafkaError as exc:
            self.errors[exc.code.name] = self.errors.get(exc.code.name, 0) + 1
            return {"throttle_time": 0, "error_code": exc.code}
        return {"throttle_time": 0, "error_code": ErrorCode.none}

    def _validate(
        self, inst: ClientInstance, sub_id: int, terminating: bool, codec: int, payload: bytes, now: float
    ) -> int:
        """Raise for bad pushes; return the remaining wait (ms) of a too-early one, else 0."""
        if inst.terminating:
            raise KafkaError(ErrorCode.invalid_request, "Client instance is terminating; no more pushes accepted")
        if sub_id != inst.subscription_id:
            raise KafkaError(
                ErrorCode.unknown_subscription_id, f"Unknown subscription id {sub_id} (current {inst.subscription_id})"
            )
        if not terminating:
            after_get = inst.last_get_ms > inst.last_push_ms
            elapsed = now - inst.last_push_ms
            if not after_get and inst.last_push_ms and elapsed < inst.push_interval_ms:
                return max(1, round(inst.push_interval_ms - elapsed))
        inst.last_push_ms = now
        if len(payload) > self.telemetry_max_bytes:
            raise KafkaError(
                ErrorCode.telemetry_too_large,
                f"Telemetry request of {len(payload)} bytes exceeds telemetry.max.bytes {self.telemetry_max_bytes}",
            )
        if codec != compression.NONE and codec not in SUPPORTED_COMPRESSION:
            raise KafkaError(ErrorCode.unsupported_compression_type, f"Unknown compression type {codec}")
        return 0

    def _export(self, inst: ClientInstance, codec: int, payload: bytes) -> None:
        try:
            raw = compression.decompress(codec, payload, max_size=16 * self.telemetry_max_bytes)
            batches = decode_metrics_data(raw)
        except (CorruptRecordError, OtlpError) as exc:
            raise KafkaError(ErrorCode.invalid_record, f"Cannot decode the telemetry payload: {exc}") from None
        inst.pushes += 1
        base = {"client_instance_id": str(inst.instance_id), "client_id": inst.identity["client_id"]}
        for md in batches:
            for m in md.metrics:
                name = prometheus_name(m.name)
                for p in m.points:
                    labels = dict(base)
                    for k, v in p.attributes.items():
                        key = _SANITIZE.sub("_", k)
                        if key not in ("client_instance_id", "client_id"):
                            labels[key] = v
                    items = tuple(sorted(labels.items()))
                    if m.kind == HISTOGRAM:
                        for suffix, value in (("_count", float(p.count)), ("_sum", p.value)):
                            key2 = (name + suffix, items)
                            prior = inst.series.get(key2, 0.0) if m.temporality == TEMPORALITY_DELTA else 0.0
                            inst.series[key2] = prior + value
                    elif m.kind == SUM and m.temporality == TEMPORALITY_DELTA:
                        inst.series[(name, items)] = inst.series.get((name, items), 0.0) + p.value
                    else:
                        inst.series[(name, items)] = p.value

    # --- export ------------------------------------------------------------------------------
    def series(self) -> Iterator[tuple[str, dict[str, str], float]]:
        """Each known instance's pushed series as (Prometheus name, labels, value), for /metrics."""
        for inst in list(self.instances.values()):
            for (name, items), value in list(inst.series.items()):
                yield name, dict(items), value
