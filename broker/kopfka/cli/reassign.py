"""`kopfka reassign` (kafka-reassign-partitions): start, cancel and show partition reassignments.

Moves are given as TOPIC:PARTITION=B1,B2,... (repeatable) or a Kafka reassignment JSON file
(`{"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}`). `--list` shows
each ongoing move with its replica set, the adding and removing replicas and which adding
replicas already are in the ISR — the progress of the move; `--wait` polls until none is left.

`--throttle BYTES_PER_SEC` with --execute throttles the copy as kafka-reassign-partitions does:
`{leader,follower}.replication.throttled.rate` on every broker of the old and new replica sets,
and on the moving topics `leader.replication.throttled.replicas` (the current replicas, which
serve the copy) and `follower.replication.throttled.replicas` (the replicas being added), so
only the move is throttled, not the normal replication. `--verify` reports each given move and,
once all are done, removes those throttles again (unless --preserve-throttles); `--wait`
does the same when it sees the moves finish.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from kopfka.cli.common import add_bootstrap, connect_admin, run_admin
from kopfka.client.admin import Admin, AdminError
from kopfka.protocol.errors import ErrorCode


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    ops = p.add_mutually_exclusive_group(required=True)
    ops.add_argument("--execute", action="store_true", help="start the given moves")
    ops.add_argument("--cancel", action="store_true", help="cancel the given (or every ongoing) move")
    ops.add_argument("--list", action="store_true", help="show ongoing reassignments and their progress")
    ops.add_argument("--verify", action="store_true",
                     help="report whether the given moves are done; once they are, remove their throttles")
    p.add_argument("--move", action="append", default=[], metavar="TOPIC:PARTITION=B1,B2,...")
    p.add_argument("--reassignment-json-file", metavar="FILE")
    p.add_argument("--wait", action="store_true", help="after --execute/--cancel, wait until no move is ongoing")
    p.add_argument("--timeout", type=float, default=300.0, help="--wait limit in seconds")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES_PER_SEC",
                   help="with --execute: throttle the replication of the moving replicas to this rate")
    p.add_argument("--preserve-throttles", action="store_true", help="--verify/--wait: leave the throttles in place")


def _moves(args: argparse.Namespace) -> list[tuple[str, int, list[int]]]:
    out: list[tuple[str, int, list[int]]] = []
    for m in args.move:
        tp, sep, replicas = m.partition("=")
        topic, _, part = tp.rpartition(":")
        if not sep or not topic or not part.isdigit():
            raise ValueError(f"--move {m!r}: expected TOPIC:PARTITION=B1,B2,...")
        out.append((topic, int(part), [int(b) for b in replicas.split(",") if b.strip()]))
    if args.reassignment_json_file:
        with open(args.reassignment_json_file) as f:
            doc = json.load(f)
        out.extend((p["topic"], int(p["partition"]), [int(b) for b in p["replicas"]]) for p in doc["partitions"])
    return out


async def _ongoing(admin: Admin) -> list[Any]:
    resp = await admin.conn.request(46, 0, {"timeout": 30000, "topics": None})
    if resp.error_code != ErrorCode.none:
        raise AdminError(resp.error_code, resp.error_message)
    return [(t.name, p) for t in resp.topics for p in t.partitions]


async def _alter(admin: Admin, items: list[tuple[str, int, list[int] | None]]) -> int:
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, part, replicas in items:
        topics.setdefault(topic, []).append({"partition_index": part, "replicas": replicas})
    body = {"timeout": 30000, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    resp = await admin.conn.request(45, 0, body)
    if resp.error_code != ErrorCode.none:
        raise AdminError(resp.error_code, resp.error_message)
    failed = 0
    for t in resp.responses:
        for p in t.partitions:
            if p.error_code != ErrorCode.none:
                failed += 1
                print(f"{t.name}-{p.partition_index}: {p.error_code.name}: {p.error_message or ''}", file=sys.stderr)
            else:
                print(f"{t.name}-{p.partition_index}: {'cancelled' if items[0][2] is None else 'started'}")
    return 1 if failed else 0


async def _show(admin: Admin) -> int:
    ongoing = await _ongoing(admin)
    if not ongoing:
        print("No partition reassignment is in progress.")
        return 0
    _, topics, _ = await admin.metadata(sorted({t for t, _ in ongoing}))
    isr = {(t.name, p.partition): set(p.isr) for t in topics for p in t.partitions}
    for topic, p in sorted(ongoing, key=lambda x: (x[0], x[1].partition_index)):
        adding = list(p.adding_replicas)
        in_sync = [b for b in adding if b in isr.get((topic, p.partition_index), set())]
        print(f"{topic}-{p.partition_index}\tReplicas: {','.join(map(str, p.replicas))}\t"
              f"Adding: {','.join(map(str, adding))}\tRemoving: {','.join(map(str, p.removing_replicas))}\t"
              f"Progress: {len(in_sync)}/{len(adding)} adding replicas in sync")
    return 0


LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
BROKER, TOPIC = 4, 2  # config resource types
SET, DELETE, APPEND = 0, 1, 2


async def _current_replicas(admin: Admin, topics: set[str]) -> dict[tuple[str, int], list[int]]:
    _, infos, _ = await admin.metadata(sorted(topics))
    return {(t.name, p.partition): list(p.replicas) for t in infos for p in t.partitions}


async def _set_throttles(admin: Admin, moves: list[tuple[str, int, list[int]]], rate: int) -> None:
    """Throttle the copy only: the current replicas serve it (leader side), the added ones fetch it
    (follower side); the rates go on every broker either set involves."""
    current = await _current_replicas(admin, {t for t, _, _ in moves})
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for topic, part, target in moves:
        now = current.get((topic, part), [])
        brokers.update(now, target)
        leader.setdefault(topic, []).extend(f"{part}:{b}" for b in now)
        follower.setdefault(topic, []).extend(f"{part}:{b}" for b in target if b not in now)
    for topic in sorted(leader):
        ops: list[tuple[str, int, str | None]] = [(LEADER_REPLICAS, APPEND, ",".join(leader[topic]))]
        if follower.get(topic):
            ops.append((FOLLOWER_REPLICAS, APPEND, ",".join(follower[topic])))
        await admin.incremental_alter_configs(TOPIC, topic, ops)
    for b in sorted(brokers):
        rates: list[tuple[str, int, str | None]] = [(LEADER_RATE, SET, str(rate)), (FOLLOWER_RATE, SET, str(rate))]
        await admin.incremental_alter_configs(BROKER, str(b), rates)
    print(f"The inter-broker throttle limit was set to {rate} B/s on brokers {','.join(map(str, sorted(brokers)))}.")
    print("Warning: run --verify when the reassignment is done (or use --wait) to remove the throttle.")


async def _clear_throttles(admin: Admin, topics: set[str]) -> None:
    brokers, _, _ = await admin.metadata([])
    for b in sorted(brokers):
        await admin.incremental_alter_configs(BROKER, str(b), [(k, DELETE, None) for k in (LEADER_RATE, FOLLOWER_RATE)])
    for topic in sorted(topics):
        await admin.incremental_alter_configs(TOPIC, topic,
                                              [(k, DELETE, None) for k in (LEADER_REPLICAS, FOLLOWER_REPLICAS)])
    print(f"Cleared the broker-level throttles on brokers {','.join(map(str, sorted(brokers)))}.")
    if topics:
        print(f"Cleared the topic-level throttles on topics {','.join(sorted(topics))}.")


async def _verify(admin: Admin, moves: list[tuple[str, int, list[int]]], preserve: bool) -> int:
    if not moves:
        raise ValueError("--verify needs --move or --reassignment-json-file")
    ongoing = {(t, p.partition_index) for t, p in await _ongoing(admin)}
    current = await _current_replicas(admin, {t for t, _, _ in moves})
    done = True
    for topic, part, target in moves:
        if (topic, part) in ongoing:
            done = False
            print(f"Reassignment of partition {topic}-{part} is still in progress.")
        elif current.get((topic, part)) == target:
            print(f"Reassignment of partition {topic}-{part} is completed.")
        else:
            print(f"There is no active reassignment of partition {topic}-{part}, but the replica set is "
                  f"{current.get((topic, part))} rather than {target}.")
    if done and not preserve:
        await _clear_throttles(admin, {t for t, _, _ in moves})
    return 0


async def _run(args: argparse.Namespace) -> int:
    admin = await connect_admin(args)
    try:
        if args.list:
            return await _show(admin)
        if args.verify:
            return await _verify(admin, _moves(args), args.preserve_throttles)
        items: list[tuple[str, int, list[int] | None]]
        moves = _moves(args)
        if args.execute:
            items = [(t, p, r) for t, p, r in moves]
            if not items:
                raise ValueError("--execute needs --move or --reassignment-json-file")
            if args.throttle >= 0:
                await _set_throttles(admin, moves, args.throttle)
        else:
            items = [(t, p, None) for t, p, _ in moves] or [
                (t, p.partition_index, None) for t, p in await _ongoing(admin)]
            if not items:
                print("No partition reassignment is in progress.")
                return 0
        rc = await _alter(admin, items)
        if args.wait and rc == 0:
            deadline = time.monotonic() + args.timeout
            while await _ongoing(admin):
                if time.monotonic() > deadline:
                    print("Timed out waiting for the reassignments.", file=sys.stderr)
                    return 1
                await asyncio.sleep(0.5)
            print("All reassignments completed.")
            if args.execute and args.throttle >= 0 and not args.preserve_throttles:
                await _clear_throttles(admin, {t for t, _, _ in moves})
        return rc
    finally:
        await admin.close()


def run(args: argparse.Namespace) -> int:
    return run_admin("reassign", _run, args)
