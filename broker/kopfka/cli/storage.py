"""`kopfka storage`: random-uuid, format, info (kafka-storage).

`format` writes meta.properties into every log dir (and the metadata dir) and
bootstrap.checkpoint into the metadata dir. With --ignore-formatted it is idempotent, which is
what an init container running on every pod start needs; a dir formatted for another cluster
or node is always an error naming the dir.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kopfka import uuids
from kopfka.config.definitions import ConfigError
from kopfka.config.server_config import KafkaConfig, read_properties
from kopfka.log import meta_properties
from kopfka.metadata import bootstrap
from kopfka.metadata import records as mr
from kopfka.security import scram


class FormatError(Exception):
    pass


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="storage_command", metavar="SUBCOMMAND", required=True)
    sub.add_parser("random-uuid", help="print a new random Kafka UUID")
    f = sub.add_parser("format", help="format the log dirs of a node")
    f.add_argument("--cluster-id", "-t", required=True)
    f.add_argument("--config", "-c", type=Path, required=True)
    f.add_argument("--release-version", "-r", default=bootstrap.LATEST_PRODUCTION_RELEASE)
    f.add_argument("--ignore-formatted", "-g", action="store_true")
    f.add_argument(
        "--feature",
        "-f",
        action="append",
        default=[],
        metavar="NAME=LEVEL",
        help="a feature level to finalize (e.g. transaction.version=1); defaults follow the release",
    )
    f.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    q = f.add_mutually_exclusive_group()
    q.add_argument("--standalone", "-s", action="store_true", help="this controller is the whole initial quorum")
    q.add_argument("--initial-controllers", "-I", help="ID@HOST:PORT:DIRECTORY_ID,...")
    q.add_argument("--no-initial-controllers", "-N", action="store_true")
    f.add_argument(
        "--add-scram",
        "-S",
        action="append",
        default=[],
        metavar="MECHANISM=[name=U,password=P[,iterations=N]]",
        help="a SCRAM credential in the bootstrap metadata (e.g. the inter-broker user)",
    )
    i = sub.add_parser("info", help="show how the log dirs are formatted")
    i.add_argument("--config", "-c", type=Path, required=True)
    i.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")


def _load(path: Path, overrides: list[str]) -> KafkaConfig:
    if not path.exists():
        raise ConfigError("--config", str(path), "file not found")
    raw = read_properties(path)
    for ov in overrides:
        key, sep, value = ov.partition("=")
        if not sep:
            raise ConfigError("--override", ov, "expected KEY=VALUE")
        raw[key.strip()] = value
    return KafkaConfig.from_properties(raw)


def parse_features(entries: list[str]) -> dict[str, int]:
    """--feature NAME=LEVEL entries (metadata.version and kraft.version come from the release and
    the quorum options)."""
    from kopfka.metadata.features import KRAFT_VERSION, METADATA_VERSION, SUPPORTED_FEATURES

    settable = {n: r for n, r in SUPPORTED_FEATURES.items() if n not in (METADATA_VERSION, KRAFT_VERSION)}
    out = {}
    for entry in entries:
        name, sep, level = entry.partition("=")
        name = name.strip()
        if not sep or not level.strip().lstrip("-").isdigit():
            raise FormatError(f"--feature {entry!r}: expected NAME=LEVEL")
        if name not in settable:
            raise FormatError(f"--feature {entry!r}: unknown feature; known: {', '.join(settable)}")
        lo, hi = settable[name]
        if not lo <= int(level) <= hi:
            raise FormatError(f"--feature {entry!r}: {name} supports levels {lo} to {hi}")
        out[name] = int(level)
    return out


def parse_initial_controllers(text: str) -> tuple[tuple[int, str, str, int], ...]:
    out = []
    for entry in text.split(","):
        try:
            node, rest = entry.strip().split("@", 1)
            hostport, dir_id = rest.rsplit(":", 1)
            host, port = hostport.rsplit(":", 1)
            uuids.from_str(dir_id)
            out.append((int(node), dir_id, host.strip("[]"), int(port)))
        except ValueError as exc:
            raise FormatError(
                f"Invalid --initial-controllers entry {entry!r}: expected ID@HOST:PORT:DIRECTORY_ID"
            ) from exc
    return tuple(out)


def parse_add_scram(text: str) -> mr.UserScramCredentialRecord:
    """kafka-storage's --add-scram 'SCRAM-SHA-512=[name=alice,password=secret,iterations=8192]'."""
    mech, sep, rest = text.partition("=")
    mech = mech.strip().upper()
    if not sep or mech not in scram.MECHANISMS or not (rest.startswith("[") and rest.endswith("]")):
        raise FormatError(f"--add-scram {mech}: expected SCRAM-SHA-256=[name=...,password=...] or SCRAM-SHA-512=[...]")
    opts = {}
    for part in rest[1:-1].split(","):
        k, eq, v = part.partition("=")
        if not eq:
            raise FormatError(f"--add-scram {mech}: expected key=value inside the brackets")
        opts[k.strip()] = v
    if not opts.get("name") or "password" not in opts or set(opts) - {"name", "password", "iterations"}:
        raise FormatError(f"--add-scram {mech}: needs name= and password= (and optionally iterations=)")
    iterations = int(opts.get("iterations", scram.DEFAULT_ITERATIONS))
    if not scram.MIN_ITERATIONS <= iterations <= scram.MAX_ITERATIONS:
        raise FormatError(f"--add-scram {mech}: iterations must be in [{scram.MIN_ITERATIONS}, {scram.MAX_ITERATIONS}]")
    cred = scram.new_credential(mech, opts["password"], iterations)
    return mr.UserScramCredentialRecord(
        opts["name"], scram.MECHANISMS[mech][0], cred.salt, cred.stored_key, cred.server_key, iterations
    )


def format_dirs(
    config: KafkaConfig,
    cluster_id: str,
    records: list[mr.MetadataRecord],
    *,
    ignore_formatted: bool,
    metadata_directory_id: str | None = None,
) -> list[Path]:
    """Format every dir; returns the dirs newly formatted. Raises FormatError naming a bad dir."""
    try:
        uuids.from_str(cluster_id)
    except ValueError as exc:
        raise FormatError(f"Cluster ID string {cluster_id} does not appear to be a valid UUID: {exc}") from exc
    dirs = list(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
    to_format = []
    for d in dirs:
        try:
            existing = meta_properties.read(d)
        except meta_properties.MetaPropertiesError as exc:
            raise FormatError(str(exc)) from exc
        if existing is None:
            if d.exists() and any(p.name != "lost+found" for p in d.iterdir()):
                raise FormatError(f"Log directory {d} is not empty but has no meta.properties; refusing to format it")
            to_format.append(d)
            continue
        if existing.cluster_id != cluster_id:
            raise FormatError(
                f"Log directory {d} is already formatted for cluster {existing.cluster_id}, "
                f"not {cluster_id}; it belongs to another cluster"
            )
        if existing.node_id != config.node_id:
            raise FormatError(
                f"Log directory {d} is already formatted for node {existing.node_id}, not node {config.node_id}"
            )
        if not ignore_formatted:
            raise FormatError(
                f"Log directory {d} is already formatted. "
                "Use --ignore-formatted to ignore this directory and format the others."
            )
    for d in to_format:
        dir_id = (
            metadata_directory_id
            if (d == config.metadata_log_dir and metadata_directory_id)
            else meta_properties.new_directory_id()
        )
        meta_properties.write(d, meta_properties.MetaProperties(cluster_id, config.node_id, dir_id))
    if config.metadata_log_dir in to_format:
        bootstrap.write_bootstrap(config.metadata_log_dir, records)
    return to_format


def run(args: argparse.Namespace) -> int:
    try:
        if args.storage_command == "random-uuid":
            print(uuids.to_str(uuids.random_uuid()))
            return 0
        config = _load(args.config, args.override)
        if args.storage_command == "info":
            dirs = list(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
            for d in dirs:
                meta = meta_properties.read(d)
                print(
                    f"{d}: "
                    + (
                        "not formatted"
                        if meta is None
                        else f"cluster.id={meta.cluster_id} node.id={meta.node_id} directory.id={meta.directory_id}"
                    )
                )
            return 0
        voters: tuple[tuple[int, str, str, int], ...] = ()
        metadata_dir_id = None
        if args.standalone or args.initial_controllers:
            if not config.is_controller:
                raise FormatError("--standalone/--initial-controllers only apply to controllers")
            if args.standalone:
                ctl = next(lst for lst in config.listeners if lst.name in config.controller_listener_names)
                metadata_dir_id = meta_properties.new_directory_id()
                voters = ((config.node_id, metadata_dir_id, ctl.host or "localhost", ctl.port),)
            else:
                voters = parse_initial_controllers(args.initial_controllers)
                mine = [v for v in voters if v[0] == config.node_id]
                metadata_dir_id = mine[0][1] if mine else None
        records = bootstrap.bootstrap_records(
            args.release_version,
            kraft_version=1 if voters else 0,
            voters=voters,
            features=parse_features(args.feature),
            controller_listener=(config.controller_listener_names or ["CONTROLLER"])[0],
        )
        records.extend(parse_add_scram(s) for s in args.add_scram)
        formatted = format_dirs(
            config,
            args.cluster_id,
            records,
            ignore_formatted=args.ignore_formatted,
            metadata_directory_id=metadata_dir_id,
        )
        for d in formatted:
            print(f"Formatting {d} with metadata.version {records[0].feature_level}.")  # type: ignore[attr-defined]
        if not formatted:
            print("All of the log directories are already formatted.")
        return 0
    except (ConfigError, FormatError, ValueError) as exc:
        print(f"kopfka storage: {exc}", file=sys.stderr)
        return 1
