"""DescribeLogDirs and AlterReplicaLogDirs (seed 001): inspect the broker's log dirs and
drain a disk by moving replicas to another dir through `-future` logs. A replica not hosted yet
gets the dir as its preferred one (created there when a reassignment brings it)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from kopfka.log.log_manager import disk_usage
from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import AclOperation, authorize_cluster
from kopfka.server.request_context import RequestContext

EXTRA_APIS.setdefault(34, (1, 2))  # AlterReplicaLogDirs
EXTRA_APIS.setdefault(35, (1, 5))  # DescribeLogDirs (v5: is_cordoned, KIP-1066)


@api(35)
async def handle_describe_log_dirs(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "results": []}
    lm = ctx.services.log_manager
    wanted: dict[str, set[int]] | None = None
    if req.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in req.topics}
    by_dir: dict[Path, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for (topic, p), ulog in lm.all_logs():
        if wanted is not None and p not in wanted.get(topic, ()):
            continue
        is_future = lm.future_logs.get((topic, p)) is ulog
        if is_future:
            current = lm.current_logs.get((topic, p))
            lag = max(0, current.log_end_offset - ulog.log_end_offset) if current is not None else 0
        else:
            lag = max(0, ulog.high_watermark - ulog.log_end_offset)
        by_dir[ulog.dir.parent][topic].append(
            {
                "partition_index": p,
                "partition_size": ulog.size_in_bytes,
                "offset_lag": lag,
                "is_future_key": is_future,
            }
        )
    results = []
    offline = lm.failure_channel.offline_dirs
    for d in lm.log_dirs:
        total, usable = disk_usage(d)
        if d in offline or d not in lm.live_log_dirs:
            results.append(
                {
                    "error_code": ErrorCode.kafka_storage_error,
                    "log_dir": str(d),
                    "topics": [],
                    "total_bytes": -1,
                    "usable_bytes": -1,
                }
            )
            continue
        in_dir: dict[str, list[dict[str, Any]]] = by_dir[d] if d in by_dir else {}
        topics: list[dict[str, Any]] = [
            {"name": name, "partitions": sorted(parts, key=lambda x: int(x["partition_index"]))}
            for name, parts in sorted(in_dir.items())
        ]
        results.append(
            {
                "error_code": ErrorCode.none,
                "log_dir": str(d),
                "topics": topics,
                "total_bytes": total,
                "usable_bytes": usable,
                "is_cordoned": d in lm.cordoned,
            }
        )
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results": results}


@api(34)
async def handle_alter_replica_log_dirs(ctx: RequestContext, req: Any) -> dict[str, Any]:
    lm = ctx.services.log_manager
    rm = ctx.services.replica_manager
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    may_alter = authorize_cluster(ctx, AclOperation.ALTER)
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                tp = (t.name, p)
                if not may_alter:
                    code = ErrorCode.cluster_authorization_failed
                elif tp not in rm.partitions and tp not in lm.offline_logs:
                    code = lm.maybe_update_preferred_log_dir(tp, d.path)
                else:
                    code = lm.alter_replica_log_dir(tp, d.path)
                out[t.name].append({"partition_index": p, "error_code": code})
    return {
        "throttle_time": 0,
        "results": [{"topic_name": name, "partitions": parts} for name, parts in out.items()],
    }
