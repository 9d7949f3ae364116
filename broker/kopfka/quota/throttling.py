"""The calls the request path makes into quotas and metrics, each a no-op when unused.

Throttling is backpressure, not failure: the response goes out at once carrying
throttle_time_ms, then the network layer holds the connection (processes none of its further
requests) for that long. Handlers report their own bandwidth/mutation throttle in
`ctx.throttle_ms`; `finish_request` adds the request-time quota, writes the larger figure into
the response and returns how long to mute.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from kopfka.protocol.errors import ErrorCode
from kopfka.quota.client_quota_manager import ControllerMutationQuota, QuotaExceeded
from kopfka.quota.connection_quotas import ConnectionRejected
from kopfka.quota.manager import STRICT_SINCE, QuotaManagers, user_of

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")

# Requests the cluster itself sends: recorded as exempt, never throttled (KIP-124).
EXEMPT_APIS = frozenset({4, 5, 6, 7, 52, 53, 54, 55, 59, 62, 63, 64, 67, 73, 80, 81})


def _client_id(ctx: Any) -> str:
    return ctx.client_id or ""


def finish_request(ctx: Any, result: Any, handler_ns: int) -> int:
    """After the handler: metrics, request quota; puts the throttle in `result`; returns mute ms."""
    svc = ctx.services
    metrics = getattr(svc, "metrics", None)
    spent = getattr(ctx, "work_ns", handler_ns)  # work, not waits (ISR, rebalance, controller)
    if metrics is not None:
        metrics.record_request(ctx.api_key, ctx.api_version, handler_ns / 1e6, work_ns=spent)
    qm: QuotaManagers | None = svc.quota_manager
    throttle = getattr(ctx, "throttle_ms", 0)
    if qm is not None:
        if ctx.api_key in EXEMPT_APIS:
            qm.request.record_exempt(spent)
        elif qm.request.quota_types_enabled:
            throttle = max(throttle, qm.request.record_time_and_get_throttle_ms(user_of(ctx), _client_id(ctx), spent))
    if throttle > 0:
        if isinstance(result, dict) and "throttle_time" in result:
            result["throttle_time"] = max(int(result["throttle_time"] or 0), throttle)
        if metrics is not None:
            metrics.count_throttled("any")
    return throttle


def produce_throttle_ms(ctx: Any, entries: Sequence[tuple[tuple[str, int], Any]], results: Mapping[Any, Any]) -> int:
    """Produce: count bytes/messages in, charge the request size to producer_byte_rate."""
    svc = ctx.services
    metrics = getattr(svc, "metrics", None)
    if metrics is not None:
        for tp, records in entries:
            r = results.get(tp)
            if r is not None and r.error == ErrorCode.none:
                metrics.record_produce(tp[0], records)
            else:
                metrics.record_failed_produce(tp[0])
    qm: QuotaManagers | None = svc.quota_manager
    if qm is None or not qm.produce.quota_types_enabled:
        return 0
    delay = qm.produce.record_and_get_throttle_ms(user_of(ctx), _client_id(ctx), ctx.request_size)
    ctx.throttle_ms = max(getattr(ctx, "throttle_ms", 0), delay)
    return delay


def fetch_max_bytes(ctx: Any, max_bytes: int) -> int:
    """Pre-cap a consumer fetch to what one quota window can carry (replica fetches: no cap)."""
    qm: QuotaManagers | None = ctx.services.quota_manager
    if qm is None or not qm.fetch.quota_types_enabled:
        return max_bytes
    cap = qm.fetch.max_value_in_quota_window(user_of(ctx), _client_id(ctx))
    return max_bytes if cap == float("inf") else max(1, min(max_bytes, int(cap)))


def fetch_throttle_ms(ctx: Any, results: Mapping[tuple[str, int], Any], is_follower: bool = False) -> int:
    """Charge a consumer's response to consumer_byte_rate. Returns > 0 only when the response must
    go out empty (the entity was already over quota); a response that is sent may still hold the
    channel, through `ctx.throttle_ms` (see ClientFetchQuotaManager). Counts bytes out when sent."""
    svc = ctx.services
    size = 0
    for data in results.values():
        size += data.size
    qm: QuotaManagers | None = svc.quota_manager
    if qm is not None and qm.fetch.quota_types_enabled and not is_follower:
        send, delay = qm.fetch.record_fetch(user_of(ctx), _client_id(ctx), size)
        if delay > 0:
            ctx.throttle_ms = max(getattr(ctx, "throttle_ms", 0), delay)
        if not send:
            return delay
    metrics = getattr(svc, "metrics", None)
    if metrics is not None and size:
        for (topic, _p), data in results.items():
            if data.size:
                metrics.record_bytes_out(topic, data.size)
    return 0


def mutation_quota(ctx: Any) -> ControllerMutationQuota:
    """The controller-mutation quota of a CreateTopics/DeleteTopics/CreatePartitions request."""
    qm: QuotaManagers | None = ctx.services.quota_manager
    strict_since = STRICT_SINCE.get(ctx.api_key, 1 << 15)
    if qm is None:
        return ControllerMutationQuota(None, None, ctx.api_version >= strict_since)
    return qm.controller_mutation.new_quota_for(user_of(ctx), _client_id(ctx), ctx.api_version, strict_since)


async def admit_connection(services: Any, listener: str, ip: str) -> bool:
    """Connection quotas at accept time; False means close the socket now."""
    qm: QuotaManagers | None = services.quota_manager
    if qm is None:
        return True
    try:
        await qm.connections.acquire(listener, ip)
    except ConnectionRejected as exc:
        log.info("Rejected connection from %s on %s: %s", ip, listener, exc.reason)
        metrics = getattr(services, "metrics", None)
        if metrics is not None:
            reason = "rate" if "rate" in exc.reason else "count"
            metrics.count_rejected_connection(listener, reason)
        return False
    return True


def release_connection(services: Any, listener: str, ip: str) -> None:
    qm: QuotaManagers | None = services.quota_manager
    if qm is not None:
        qm.connections.release(listener, ip)


async def run_with_mutation_quota(
    ctx: Any,
    items: Sequence[T],
    permits: Callable[[T], int],
    call: Callable[[list[T]], Awaitable[list[R]]],
    rejected: Callable[[T, ErrorCode, str], R],
    failed: Callable[[R], bool],
) -> list[R]:
    """Charge each item's partition mutations in order before the controller sees it.

    Strict (new request versions): items arriving once the bucket is exhausted fail alone with
    THROTTLING_QUOTA_EXCEEDED and never reach the controller. Permissive: everything goes
    through and the client is throttled. Items that fail for other reasons are refunded.
    """
    quota = mutation_quota(ctx)
    admitted: list[T] = []
    charged: list[int] = []
    slots: list[R | None] = []
    for item in items:
        n = permits(item)
        try:
            quota.record(n)
        except QuotaExceeded as exc:
            slots.append(rejected(item, ErrorCode.throttling_quota_exceeded, str(exc)))
            continue
        admitted.append(item)
        charged.append(n)
        slots.append(None)
    results = iter(zip(await call(admitted), charged, strict=True)) if admitted else iter(())
    merged: list[R] = []
    for slot in slots:
        if slot is None:
            r, n = next(results)
            if failed(r):
                quota.refund(n)
            merged.append(r)
        else:
            merged.append(slot)
    ctx.throttle_ms = max(getattr(ctx, "throttle_ms", 0), quota.throttle_time_ms())
    return merged


def topic_permits(ctx: Any, spec: Any) -> int:
    """Partitions a CreateTopics entry will create (its assignment, count or the default)."""
    if spec.assignments:
        return len(spec.assignments)
    if spec.num_partitions > 0:
        return int(spec.num_partitions)
    return int(ctx.services.config["num.partitions"])


def partition_permits(ctx: Any, topic: str, count: int) -> int:
    """Partitions a CreatePartitions entry adds."""
    t = ctx.image.topics_by_name.get(topic)
    return max(0, count - len(t.partitions)) if t is not None else 0


def delete_permits(ctx: Any, name: str | None, topic_id: str | None) -> int:
    """Partitions a DeleteTopics entry removes (unknown topics cost nothing and fail on their own)."""
    image = ctx.image
    t = image.topics_by_name.get(name) if name is not None else image.topics_by_id.get(topic_id or "")
    return len(t.partitions) if t is not None else 0
