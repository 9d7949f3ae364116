"""Failed disks: which broker has a log dir offline, which volume it is, and its partitions.

A broker whose log dir fails keeps running on its other dirs (seed 001, JBOD) and reports the
dir to the controller; from then on Metadata names that broker in the `offline_replicas` of
every partition it held there. That is the only place a client sees the failure, so the
operator reads it there, then asks just those brokers DescribeLogDirs for the dir's path (an
offline dir answers KAFKA_STORAGE_ERROR), and puts both in `status.logDirs.offline`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kopfka.client.admin import Admin, TopicInfo
from kopfka.protocol.errors import ErrorCode

from .naming import DATA_ROOT
from .roll.kafka_view import AdminKafkaView

# A whole disk can hold thousands of partitions: status names this many, and counts them all.
LISTED_PARTITIONS = 100


@dataclass(frozen=True)
class OfflineDirs:
    broker: int
    dirs: tuple[str, ...]  # the broker's offline log dirs ("" when it could not be asked)
    partitions: tuple[str, ...]  # "<topic>-<partition>" the broker holds offline, sorted


def offline_partitions(live_brokers: Iterable[int], topics: Sequence[TopicInfo]) -> dict[int, list[str]]:
    """Live broker -> its replicas Metadata calls offline. A dead broker's replicas are offline
    too, but that is a missing pod, not a failed disk: only live brokers are counted."""
    live = set(live_brokers)
    found: dict[int, list[str]] = {}
    for t in topics:
        for p in t.partitions:
            for broker in p.offline:
                if broker in live:
                    found.setdefault(broker, []).append(f"{t.name}-{p.partition}")
    return {b: sorted(ps, key=_partition_key) for b, ps in sorted(found.items())}


def _partition_key(name: str) -> tuple[str, int]:
    topic, _, index = name.rpartition("-")
    return topic, int(index)


def volume_of(path: str) -> str | None:
    """The spec volume a dir under the operator's data root is mounted from (data-<id>)."""
    prefix = DATA_ROOT.rstrip("/") + "/"
    if not path.startswith(prefix):
        return None
    return path[len(prefix) :].split("/", 1)[0] or None


def status_entry(found: OfflineDirs) -> dict[str, Any]:
    volumes = sorted({v for v in (volume_of(d) for d in found.dirs) if v})
    return {
        "broker": found.broker,
        "dirs": list(found.dirs),
        "volumes": volumes,
        "partitionCount": len(found.partitions),
        "partitions": list(found.partitions[:LISTED_PARTITIONS]),
    }


def warning_text(entries: Sequence[Mapping[str, Any]]) -> str:
    """One line for the Warning condition: a broker, its dirs and how many partitions are down."""
    parts = []
    for e in entries:
        where = ", ".join(e.get("dirs") or []) or "a log dir"
        parts.append(f"broker {e['broker']} has {where} offline ({e['partitionCount']} partitions offline there)")
    return "; ".join(parts)


async def _offline_dirs_of(address: str, view: AdminKafkaView) -> tuple[str, ...]:
    admin = await Admin.connect(address, view.security)
    try:
        dirs = await admin.describe_log_dirs({})
    finally:
        await admin.close()
    return tuple(sorted(d.path for d in dirs if d.error == ErrorCode.kafka_storage_error))


async def read_offline_dirs(view: AdminKafkaView) -> tuple[frozenset[int], list[OfflineDirs]]:
    """The live brokers and the cluster's failed disks now: one Metadata, then DescribeLogDirs of
    each broker that has offline replicas (none in a healthy cluster: the usual cost is one
    Metadata)."""
    brokers, topics = await view.metadata()
    out = []
    for broker, partitions in offline_partitions(brokers, topics).items():
        host, port, _rack = brokers[broker]
        dirs: tuple[str, ...] = ()
        with contextlib.suppress(OSError, TimeoutError, ConnectionError):
            dirs = await _offline_dirs_of(f"{host}:{port}", view)
        out.append(OfflineDirs(broker, dirs, tuple(partitions)))
    return frozenset(brokers), out


def log_dirs_status(
    found: Sequence[OfflineDirs], live: Iterable[int] | None = None, before: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """status.logDirs. A broker reported before that is not live now (its pod restarting, say)
    keeps its entry: whether the disk is back is known only once the broker is."""
    entries = [status_entry(f) for f in found]
    if live is not None:
        up = set(live)
        entries += [dict(e) for e in before if int(e["broker"]) not in up]
    return {"offline": sorted(entries, key=lambda e: int(e["broker"]))}


def changes(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """Events for a dir that went offline or came back (by broker and dir), as (type, reason, text)."""

    def keyed(entries: Sequence[Mapping[str, Any]]) -> dict[tuple[int, str], Mapping[str, Any]]:
        return {(int(e["broker"]), d): e for e in entries for d in (e.get("dirs") or [""])}

    old, new = keyed(before), keyed(after)
    events = []
    for (broker, path), e in sorted(new.items()):
        if (broker, path) not in old:
            where = path or "a log dir"
            events.append(
                (
                    "Warning",
                    "LogDirOffline",
                    f"broker {broker}: {where} offline, {e['partitionCount']} partitions offline",
                )
            )
    for broker, path in sorted(old.keys() - new.keys()):
        events.append(("Normal", "LogDirOnline", f"broker {broker}: {path or 'its log dirs'} no longer offline"))
    return events
