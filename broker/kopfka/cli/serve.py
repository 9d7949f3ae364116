"""`kopfka serve`: run a node. Without --config, the embedded default: a single-node
broker + controller on 127.0.0.1:9092 with data in ./kopfka-data, formatted on first start."""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
from pathlib import Path

from kopfka.config.definitions import ConfigError
from kopfka.config.server_config import KafkaConfig, read_properties


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, help="server.properties (Kafka keys)")
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="override the client listener address (the embedded default's controller listener moves to a free port)",
    )
    p.add_argument("--data-dir", type=Path, help="override log.dirs with one directory")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="override any config key")
    p.add_argument("--log-level", default="INFO")


def embedded_defaults() -> dict[str, str]:
    return {
        "node.id": "1",
        "process.roles": "broker,controller",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:9092",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "log.dirs": "kopfka-data",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
    }


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host.strip("[]"), 0))
        return int(s.getsockname()[1])


def _move_embedded_quorum(raw: dict[str, str]) -> None:
    """`--listen` on the embedded default: its quorum (one voter, itself) moves too, to a free port on
    the controller listener's host, so that several embedded nodes can run side by side."""
    names = {n.strip() for n in raw.get("controller.listener.names", "CONTROLLER").split(",")}
    out = []
    for lst in raw.get("listeners", "").split(","):
        name, sep, hostport = lst.partition("://")
        if sep and name in names:
            host = hostport.rpartition(":")[0] or "127.0.0.1"
            hostport = f"{host}:{_free_port(host)}"
            raw["controller.quorum.voters"] = f"{raw['node.id']}@{hostport}"
            lst = f"{name}://{hostport}"
        out.append(lst)
    raw["listeners"] = ",".join(out)


def load_config(args: argparse.Namespace) -> tuple[dict[str, str], bool]:
    embedded = args.config is None
    if embedded:
        raw = embedded_defaults()
    else:
        if not args.config.exists():
            raise ConfigError("--config", str(args.config), "file not found")
        raw = read_properties(args.config)
    if args.listen:
        host, sep, port = args.listen.rpartition(":")
        if not sep or not port.isdigit():
            raise ConfigError("--listen", args.listen, "expected HOST:PORT")
        listeners = [x for x in raw.get("listeners", "").split(",") if x and not x.startswith("PLAINTEXT://")]
        raw["listeners"] = ",".join([f"PLAINTEXT://{host}:{port}", *listeners])
        adv = [x for x in raw.get("advertised.listeners", "").split(",") if x and not x.startswith("PLAINTEXT://")]
        raw["advertised.listeners"] = ",".join([f"PLAINTEXT://{host or '127.0.0.1'}:{port}", *adv])
    if args.data_dir:
        raw["log.dirs"] = str(args.data_dir)
    overridden = set()
    for ov in args.override:
        key, sep, value = ov.partition("=")
        if not sep:
            raise ConfigError("--override", ov, "expected KEY=VALUE")
        raw[key.strip()] = value
        overridden.add(key.strip())
    if embedded and args.listen and "controller.quorum.voters" not in overridden:
        _move_embedded_quorum(raw)
    return raw, embedded


def format_embedded(config: KafkaConfig) -> None:
    """First start of the embedded default: format the data dir with a random cluster id."""
    from kopfka.cli.storage import format_dirs
    from kopfka.log import meta_properties
    from kopfka.metadata import bootstrap
    from kopfka.uuids import random_uuid, to_str

    dirs = list(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
    if all(meta_properties.read(d) is None for d in dirs):
        cluster_id = to_str(random_uuid())
        format_dirs(config, cluster_id, bootstrap.bootstrap_records(), ignore_formatted=False)
        logging.getLogger("kopfka").info("Formatted %s for new cluster %s", ", ".join(map(str, dirs)), cluster_id)


def run(args: argparse.Namespace) -> int:
    from kopfka.server.heap import pause_collection_for_startup

    pause_collection_for_startup()  # the started server collects once and freezes its startup heap
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
    )
    log = logging.getLogger("kopfka")
    try:
        raw, embedded = load_config(args)
        config = KafkaConfig.from_properties(raw)
    except ConfigError as exc:
        print(f"kopfka serve: {exc}", file=sys.stderr)
        return 1
    for key in config.unknown_keys:
        log.warning("The configuration '%s' was supplied but isn't a known config.", key)
    if embedded:
        format_embedded(config)
    from kopfka.log.log_manager import LogDirLockedError
    from kopfka.metadata.records import MetadataRecordError
    from kopfka.metrics.broker_metrics import BrokerMetrics
    from kopfka.metrics.load import IdleClock, timed_loop_factory
    from kopfka.server.kafka_server import KafkaServer, StartupError

    server = KafkaServer(config)
    network_idle = IdleClock(records_idle=True)  # the event loop's select() time, on /metrics
    BrokerMetrics.shared().network_idle = network_idle
    try:
        with asyncio.Runner(loop_factory=timed_loop_factory(network_idle)) as runner:
            runner.run(server.run_until_signalled())
    except (StartupError, LogDirLockedError, MetadataRecordError) as exc:
        print(f"kopfka serve: {exc}", file=sys.stderr)
        return 1
    return 0
