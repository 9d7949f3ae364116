"""`kopfka groups` (kafka-consumer-groups): --list, --describe [--members | --offsets | --state], --delete.

Describe finds the group's coordinator, asks ConsumerGroupDescribe (KIP-848 groups) and falls
back to DescribeGroups (classic groups, whose assignments are decoded from the consumer
protocol), then joins committed offsets with the partition leaders' log end offsets for lag.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass, field
from typing import Any

from kopfka.cli.common import add_bootstrap, client_security
from kopfka.client.admin import Admin, AdminError
from kopfka.client.cluster import GROUP, ClusterClient
from kopfka.coordinator.group.consumer_protocol import parse_assignment
from kopfka.protocol.errors import ErrorCode


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    ops = p.add_mutually_exclusive_group(required=True)
    for op in ("list", "describe", "delete"):
        ops.add_argument(f"--{op}", action="store_true")
    p.add_argument("--group", action="append", default=[], help="group id (repeatable)")
    p.add_argument("--all-groups", action="store_true")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="members and their assignments")
    view.add_argument("--offsets", action="store_true", help="committed offsets and lag (the default)")
    view.add_argument("--state", action="store_true", help="group state, protocol and coordinator")


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class GroupInfo:
    group_id: str
    state: str
    kind: str
    protocol: str
    coordinator: tuple[int, str, int]
    members: list[Member]
    epoch: int = -1


class GroupsClient(ClusterClient):
    """Group admin over kopfka's small client: one connection per broker, opened on demand."""

    async def coordinator(self, group: str) -> tuple[int, str, int]:
        return await self.find_coordinator(group, GROUP)

    async def list_groups(self) -> list[tuple[str, str, str, str]]:
        out: dict[str, tuple[str, str, str, str]] = {}
        for address in (await self.brokers()).values():
            resp = await (await self.conn(address)).request(16, 5, {"states_filter": [], "types_filter": []})
            for g in resp.groups:
                out[g.group_id] = (g.group_id, g.group_state, g.group_type, g.protocol_type)
        return sorted(out.values())

    async def describe(self, group: str) -> GroupInfo:
        coord = await self.coordinator(group)
        c = await self.conn(f"{coord[1]}:{coord[2]}")
        resp = await c.request(69, 1, {"group_ids": [group], "include_authorized_operations": False})
        g = resp.groups[0]
        if ErrorCode(int(g.error_code)) == ErrorCode.none:
            members = [
                Member(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    {t.topic_name: sorted(t.partitions) for t in m.assignment.topic_partitions},
                )
                for m in g.members
            ]
            return GroupInfo(group, g.group_state, "consumer", g.assignor_name, coord, members, g.group_epoch)
        resp = await c.request(15, 6, {"groups": [group], "include_authorized_operations": False})
        d = resp.groups[0]
        if ErrorCode(int(d.error_code)) != ErrorCode.none:
            raise AdminError(ErrorCode(int(d.error_code)), d.error_message)
        members = [
            Member(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                parse_assignment(m.member_assignment) or {},
            )
            for m in d.members
        ]
        return GroupInfo(group, d.group_state, "classic", d.protocol_data, coord, members)

    async def committed(self, group: str, coord: tuple[int, str, int]) -> dict[tuple[str, int], int]:
        c = await self.conn(f"{coord[1]}:{coord[2]}")
        resp = await c.request(9, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": False})
        g = resp.groups[0]
        if ErrorCode(int(g.error_code)) != ErrorCode.none:
            raise AdminError(ErrorCode(int(g.error_code)), None)
        return {
            (t.name, p.partition_index): int(p.committed_offset)
            for t in g.topics
            for p in t.partitions
            if p.committed_offset >= 0
        }

    async def end_offsets(self, partitions: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
        if not partitions:
            return {}
        brokers = await self.brokers()
        admin = Admin(await self.conn(self.bootstrap))
        _, topics, _ = await admin.metadata(sorted({t for t, _ in partitions}))
        by_leader: dict[tuple[int, str], list[int]] = {}
        for t in topics:
            for info in t.partitions:
                if (t.name, info.partition) in partitions:
                    by_leader.setdefault((info.leader, t.name), []).append(info.partition)
        out = {}
        for (leader, topic), parts in by_leader.items():
            if leader not in brokers:
                continue
            leader_admin = Admin(await self.conn(brokers[leader]))
            for p, (off, _) in (await leader_admin.list_offsets(topic, parts, -1)).items():
                out[(topic, p)] = off
        return out

    async def delete(self, group: str) -> ErrorCode:
        coord = await self.coordinator(group)
        resp = await (await self.conn(f"{coord[1]}:{coord[2]}")).request(42, 2, {"groups_names": [group]})
        return ErrorCode(int(resp.results[0].error_code))


def _table(rows: list[list[Any]]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _fmt_assignment(a: dict[str, list[int]]) -> str:
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(a.items())) or "-"


async def describe_text(client: GroupsClient, group: str, view: str) -> str:
    info = await client.describe(group)
    rows: list[list[Any]]
    if view == "state":
        host = f"{info.coordinator[1]}:{info.coordinator[2]} ({info.coordinator[0]})"
        rows = [
            ["GROUP", "COORDINATOR (ID)", "TYPE", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
            [group, host, info.kind, info.protocol or "-", info.state, len(info.members)],
        ]
        return _table(rows)
    if view == "members":
        rows = [["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]]
        for m in sorted(info.members, key=lambda m: m.member_id):
            rows.append(
                [
                    group,
                    m.member_id,
                    m.instance_id or "-",
                    m.host,
                    m.client_id,
                    sum(len(p) for p in m.assignment.values()),
                    _fmt_assignment(m.assignment),
                ]
            )
        text = _table(rows)
        return text if info.members else f"Consumer group '{group}' has no active members.\n" + text
    committed = await client.committed(group, info.coordinator)
    owner: dict[tuple[str, int], Member] = {}
    for m in info.members:
        for t, ps in m.assignment.items():
            for p in ps:
                owner[(t, p)] = m
    parts = set(committed) | set(owner)
    ends = await client.end_offsets(parts)
    rows = [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    ]
    for tp in sorted(parts):
        cur = committed.get(tp)
        end = ends.get(tp)
        lag = end - cur if cur is not None and end is not None else "-"
        who = owner.get(tp)
        rows.append(
            [
                group,
                tp[0],
                tp[1],
                "-" if cur is None else cur,
                "-" if end is None else end,
                lag,
                who.member_id if who else "-",
                who.host if who else "-",
                who.client_id if who else "-",
            ]
        )
    prefix = "" if info.members else f"Consumer group '{group}' has no active members.\n\n"
    return prefix + _table(rows)


async def _run(args: argparse.Namespace) -> int:
    client = GroupsClient(args.bootstrap_server, client_security(args))
    try:
        if args.list:
            for gid, _state, _kind, _ptype in await client.list_groups():
                print(gid)
            return 0
        groups = list(args.group)
        if args.all_groups:
            groups = [g[0] for g in await client.list_groups()]
        if not groups:
            print("kopfka groups: --describe and --delete need --group or --all-groups", file=sys.stderr)
            return 2
        if args.delete:
            rc = 0
            for g in groups:
                code = await client.delete(g)
                if code == ErrorCode.none:
                    print(f"Deletion of requested consumer groups ('{g}') was successful.")
                else:
                    print(f"Error: deletion of group '{g}' failed: {code.name.upper()}", file=sys.stderr)
                    rc = 1
            return rc
        view = "members" if args.members else "state" if args.state else "offsets"
        for i, g in enumerate(groups):
            if i:
                print()
            print(await describe_text(client, g, view))
        return 0
    finally:
        await client.close()


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except AdminError as exc:
        print(f"kopfka groups: {exc}", file=sys.stderr)
        return 1
    except (OSError, TimeoutError) as exc:
        print(f"kopfka groups: cannot reach {args.bootstrap_server}: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # a bad --command-config
        print(f"kopfka groups: {exc}", file=sys.stderr)
        return 1
