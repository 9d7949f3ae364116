"""`kopfka metadata-quorum`: inspect and change the KRaft controller quorum (kafka-metadata-quorum).

kopfka metadata-quorum --bootstrap-controller H:P describe --status | --replication
kopfka metadata-quorum --bootstrap-controller H:P add-controller --config controller.properties
kopfka metadata-quorum --bootstrap-controller H:P remove-controller --controller-id N --controller-directory-id D

Requests go to the quorum leader: any controller answers DescribeQuorum with the leader's id and
the voters' endpoints, so one reachable controller is enough (the operator scales the quorum
through this). `add-controller` reads the node's id, metadata-dir directory id and advertised
CONTROLLER endpoint from its config, the way Kafka's tool does; the node must already be running
as a caught-up observer (formatted with --no-initial-controllers, auto-join disabled).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from kopfka import uuids
from kopfka.cli.common import add_bootstrap, client_security
from kopfka.client.connection import KafkaConnection
from kopfka.protocol.errors import ErrorCode
from kopfka.security.client import ClientSecurity

METADATA_TOPIC = "__cluster_metadata"
DESCRIBE_QUORUM, ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 55, 80, 81


class QuorumToolError(Exception):
    pass


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p, "--bootstrap-controller", "HOST:PORT[,HOST:PORT]")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each request")
    sub = p.add_subparsers(dest="quorum_command", metavar="SUBCOMMAND", required=True)
    d = sub.add_parser("describe", help="describe the quorum: --status or --replication")
    g = d.add_mutually_exclusive_group(required=True)
    g.add_argument("--status", action="store_true")
    g.add_argument("--replication", action="store_true")
    d.add_argument("--human-readable", action="store_true", help="with --replication: ages instead of timestamps")
    a = sub.add_parser("add-controller", help="add the controller described by --config to the voter set")
    a.add_argument("--config", "-c", type=Path, required=True)
    r = sub.add_parser("remove-controller", help="remove a controller from the voter set")
    r.add_argument("--controller-id", type=int, required=True)
    r.add_argument("--controller-directory-id", required=True)


# --command-config of this invocation (a context variable: the helpers are shared with the operator)
SECURITY: ContextVar[ClientSecurity | None] = ContextVar("metadata_quorum_security", default=None)


async def _request(addr: str, api_key: int, version: int, body: dict[str, Any], timeout: float) -> Any:
    conn = await KafkaConnection.open(addr, timeout=timeout, security=SECURITY.get())
    try:
        return await conn.request(api_key, version, body, timeout=timeout)
    finally:
        await conn.close()


async def _describe_any(bootstrap: list[str], timeout: float) -> tuple[str, Any, Any]:
    """DescribeQuorum at the leader: (leader address, partition data, response)."""
    last = "no controller reachable"
    body = {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]}
    tried: set[str] = set()
    queue = list(bootstrap)
    while queue:
        addr = queue.pop(0)
        if addr in tried:
            continue
        tried.add(addr)
        try:
            resp = await _request(addr, DESCRIBE_QUORUM, 2, body, timeout)
        except (OSError, ConnectionError, TimeoutError, asyncio.IncompleteReadError) as exc:
            last = f"{addr}: {exc or type(exc).__name__}"
            continue
        p = resp.topics[0].partitions[0]
        if p.error_code == ErrorCode.none:
            return addr, p, resp
        endpoints = {int(n.node_id): f"{ls.host}:{ls.port}" for n in resp.nodes for ls in n.listeners[:1]}
        if p.leader_id >= 0 and p.leader_id in endpoints:
            queue.insert(0, endpoints[p.leader_id])  # ask the leader itself
        last = f"{addr}: {ErrorCode(p.error_code).name} (leader {p.leader_id})"
    raise QuorumToolError(f"cannot describe the quorum: {last}")


async def describe_leader(bootstrap: list[str], timeout: float) -> tuple[str, Any, Any]:
    """Retry briefly: right after a leader change no node may know the new leader yet."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await _describe_any(bootstrap, min(timeout, 5.0))
        except QuorumToolError:
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.3)


def _dir(d: Any) -> str:
    return uuids.to_str(d) if d is not None else uuids.to_str(uuids.ZERO_UUID)


def format_status(p: Any, resp: Any) -> str:
    endpoints = {
        int(n.node_id): [f"{ls.name}://{ls.host}:{ls.port}" for ls in n.listeners] for n in resp.nodes
    }
    leader_leo = next((int(v.log_end_offset) for v in p.current_voters if v.replica_id == p.leader_id), -1)
    followers = [v for v in p.current_voters if v.replica_id != p.leader_id]
    max_lag = max((leader_leo - int(v.log_end_offset) for v in followers), default=0)
    now = int(time.time() * 1000)
    caught = [int(v.last_caught_up_timestamp) for v in followers if v.last_caught_up_timestamp >= 0]
    max_lag_ms = max((now - t for t in caught), default=0) if len(caught) == len(followers) else -1
    voters = [
        {
            "id": int(v.replica_id),
            "directoryId": _dir(v.replica_directory_id),
            "endpoints": endpoints.get(v.replica_id, []),
        }
        for v in p.current_voters
    ]
    observers = [{"id": int(o.replica_id), "directoryId": _dir(o.replica_directory_id)} for o in p.observers]
    rows = [
        ("LeaderId", p.leader_id),
        ("LeaderEpoch", p.leader_epoch),
        ("HighWatermark", p.high_watermark),
        ("MaxFollowerLag", max_lag),
        ("MaxFollowerLagTimeMs", max_lag_ms),
        ("CurrentVoters", json.dumps(voters)),
        ("CurrentObservers", json.dumps(observers)),
    ]
    return "\n".join(f"{k + ':':<24}{v}" for k, v in rows)


def format_replication(p: Any, human: bool) -> str:
    leader_leo = next((int(v.log_end_offset) for v in p.current_voters if v.replica_id == p.leader_id), -1)
    now = int(time.time() * 1000)

    def ts(t: int) -> str:
        if not human:
            return str(t)
        return "-1" if t < 0 else f"{max(0, now - t)} ms ago"

    rows = [("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status")]
    ordered = sorted(p.current_voters, key=lambda v: (v.replica_id != p.leader_id, v.replica_id))
    for status, reps in (("Voter", ordered), ("Observer", sorted(p.observers, key=lambda o: o.replica_id))):
        for v in reps:
            st = status if status == "Observer" else ("Leader" if v.replica_id == p.leader_id else "Follower")
            rows.append(
                (
                    str(v.replica_id),
                    _dir(v.replica_directory_id),
                    str(v.log_end_offset),
                    str(max(0, leader_leo - int(v.log_end_offset))),
                    ts(int(v.last_fetch_timestamp)),
                    ts(int(v.last_caught_up_timestamp)),
                    st,
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def controller_identity(config_path: Path) -> tuple[int, str, str, str, int]:
    """(node id, cluster id, metadata-dir directory id, host, port) of the controller in `config_path`."""
    from kopfka.config.server_config import KafkaConfig, read_properties
    from kopfka.log import meta_properties
    from kopfka.server.kraft_node import controller_endpoint

    cfg = KafkaConfig.from_properties(read_properties(config_path))
    if not cfg.is_controller:
        raise QuorumToolError(f"{config_path}: process.roles does not include controller")
    meta = meta_properties.read(cfg.metadata_log_dir)
    if meta is None or not meta.directory_id:
        raise QuorumToolError(
            f"{cfg.metadata_log_dir} is not formatted: run `kopfka storage format --no-initial-controllers` first"
        )
    ep = controller_endpoint(cfg)
    if ep is None:
        raise QuorumToolError(f"{config_path}: no listener named in controller.listener.names")
    return int(cfg["node.id"]), meta.cluster_id, meta.directory_id, ep[0], ep[1]


async def _voter_change(bootstrap: list[str], api_key: int, body: dict[str, Any], timeout: float) -> None:
    """Send AddRaftVoter / RemoveRaftVoter to the leader, following a leader change once."""
    deadline = time.monotonic() + timeout
    while True:
        leader, _, _ = await describe_leader(bootstrap, max(1.0, deadline - time.monotonic()))
        resp = await _request(leader, api_key, 0, body, max(1.0, deadline - time.monotonic()))
        code = ErrorCode(resp.error_code)
        if code == ErrorCode.none:
            return
        retriable = code in (ErrorCode.not_leader_or_follower, ErrorCode.request_timed_out)
        if not retriable or time.monotonic() >= deadline:
            raise QuorumToolError(f"{code.name}: {resp.error_message or ''}".rstrip(": "))
        await asyncio.sleep(0.5)


async def _run(args: argparse.Namespace) -> int:
    SECURITY.set(client_security(args))
    bootstrap = [b.strip() for b in args.bootstrap_controller.split(",") if b.strip()]
    if args.quorum_command == "describe":
        _, p, resp = await describe_leader(bootstrap, args.timeout)
        print(format_status(p, resp) if args.status else format_replication(p, args.human_readable))
        return 0
    if args.quorum_command == "add-controller":
        node_id, cluster_id, dir_id, host, port = controller_identity(args.config)
        body = {
            "cluster_id": cluster_id,
            "timeout": int(args.timeout * 1000),
            "voter_id": node_id,
            "voter_directory_id": uuids.from_str(dir_id),
            "listeners": [{"name": "CONTROLLER", "host": host, "port": port}],
        }
        await _voter_change(bootstrap, ADD_RAFT_VOTER, body, args.timeout)
        print(f"Added controller {node_id} with directory id {dir_id} and endpoint CONTROLLER://{host}:{port}")
        return 0
    try:
        dir_uuid = uuids.from_str(args.controller_directory_id)
    except ValueError as exc:
        raise QuorumToolError(f"--controller-directory-id: not a Kafka UUID: {args.controller_directory_id}") from exc
    body = {"cluster_id": None, "voter_id": args.controller_id, "voter_directory_id": dir_uuid}
    await _voter_change(bootstrap, REMOVE_RAFT_VOTER, body, args.timeout)
    print(f"Removed controller {args.controller_id} with directory id {args.controller_directory_id}")
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except (QuorumToolError, OSError, ConnectionError, TimeoutError, ValueError) as exc:
        print(f"kopfka metadata-quorum: {exc}", file=sys.stderr)
        return 1
