"""`kopfka topics` (kafka-topics): --create, --list, --describe, --alter, --delete."""

from __future__ import annotations

import argparse

from kopfka.cli.common import add_bootstrap, connect_admin, run_admin
from kopfka.client.admin import Admin, AdminError

UNDER_REPLICATED = "under-replicated"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    ops = p.add_mutually_exclusive_group(required=True)
    for op in ("create", "list", "describe", "alter", "delete"):
        ops.add_argument(f"--{op}", action="store_true")
    p.add_argument("--topic")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--under-replicated-partitions", action="store_true")
    p.add_argument("--unavailable-partitions", action="store_true")


def _configs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep:
            raise ValueError(f"--config {item!r}: expected KEY=VALUE")
        out[k.strip()] = v
    return out


async def _reassignments(admin: Admin) -> dict[tuple[str, int], tuple[list[int], list[int]]]:
    """(adding, removing) replicas of each partition being reassigned (ListPartitionReassignments),
    as kafka-topics --describe shows them; Metadata carries only the full replica set."""
    resp = await admin.conn.request(46, 0, {"timeout": 30000, "topics": None})
    if int(resp.error_code) != 0:
        return {}
    return {(t.name, p.partition_index): (list(p.adding_replicas), list(p.removing_replicas))
            for t in resp.topics for p in t.partitions}


async def _run(args: argparse.Namespace) -> int:
    admin = await connect_admin(args)
    try:
        if args.create:
            if not args.topic:
                raise ValueError("--create needs --topic")
            try:
                await admin.create_topic(
                    args.topic, args.partitions or -1, args.replication_factor or -1, _configs(args.config)
                )
                print(f"Created topic {args.topic}.")
            except AdminError as exc:
                if not (args.if_not_exists and exc.code.name == "topic_already_exists"):
                    raise
        elif args.list:
            _, topics, _ = await admin.metadata(None)
            for t in sorted(topics, key=lambda t: t.name):
                print(t.name)
        elif args.describe:
            brokers, topics, _ = await admin.metadata([args.topic] if args.topic else None)
            moving = await _reassignments(admin)
            for t in sorted(topics, key=lambda t: t.name):
                parts = t.partitions
                if args.under_replicated_partitions:
                    parts = [p for p in parts if len(p.isr) < len(p.replicas)]
                if args.unavailable_partitions:
                    parts = [p for p in parts if p.leader not in brokers]
                configs = await admin.describe_configs(2, t.name)
                overrides = ",".join(f"{c.name}={c.value}" for c in configs if c.config_source == 1)
                rf = len(t.partitions[0].replicas) if t.partitions else 0
                tid = "" if t.topic_id is None else __import__("kopfka.uuids", fromlist=["to_str"]).to_str(t.topic_id)
                print(
                    f"Topic: {t.name}\tTopicId: {tid}\tPartitionCount: {len(t.partitions)}\t"
                    f"ReplicationFactor: {rf}\tConfigs: {overrides}"
                )
                for p in parts:
                    flags = []
                    if len(p.isr) < len(p.replicas):
                        flags.append(UNDER_REPLICATED)
                    if p.leader not in brokers:
                        flags.append("offline")
                    move = moving.get((t.name, p.partition))
                    print(
                        f"\tTopic: {t.name}\tPartition: {p.partition}\t"
                        f"Leader: {p.leader if p.leader in brokers else 'none'}\t"
                        f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
                        + (f"\tAdding Replicas: {','.join(map(str, move[0]))}"
                           f"\tRemoving Replicas: {','.join(map(str, move[1]))}" if move else "")
                        + (f"\t({', '.join(flags)})" if flags else "")
                    )
        elif args.alter:
            if not args.topic or not args.partitions:
                raise ValueError("--alter needs --topic and --partitions")
            await admin.create_partitions(args.topic, args.partitions)
            print(f"Topic {args.topic} now has {args.partitions} partitions.")
        elif args.delete:
            if not args.topic:
                raise ValueError("--delete needs --topic")
            try:
                await admin.delete_topic(args.topic)
                print(f"Deleted topic {args.topic}.")
            except AdminError as exc:
                if not (args.if_exists and exc.code.name == "unknown_topic_or_partition"):
                    raise
        return 0
    finally:
        await admin.close()


def run(args: argparse.Namespace) -> int:
    return run_admin("topics", _run, args)
