"""`kopfka configs` (kafka-configs): --describe and --alter for topics and brokers."""

from __future__ import annotations

import argparse

from kopfka.cli.common import parse_key_values, run_admin
from kopfka.client.admin import Admin

ENTITY_TYPES = {"topics": 2, "brokers": 4}
SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--entity-type", required=True, choices=sorted(ENTITY_TYPES))
    p.add_argument("--entity-name", default="")
    p.add_argument("--entity-default", action="store_true", help="the cluster-wide broker default")
    ops = p.add_mutually_exclusive_group(required=True)
    ops.add_argument("--describe", action="store_true")
    ops.add_argument("--alter", action="store_true")
    p.add_argument("--all", action="store_true", help="with --describe: every config, not only overrides")
    p.add_argument("--add-config", default="", metavar="K1=V1,K2=V2")
    p.add_argument("--delete-config", default="", metavar="K1,K2")


async def _run(args: argparse.Namespace) -> int:
    rtype = ENTITY_TYPES[args.entity_type]
    name = "" if args.entity_default else args.entity_name
    admin = await Admin.connect(args.bootstrap_server)
    try:
        if args.describe:
            configs = await admin.describe_configs(rtype, name)
            shown = configs if args.all else [c for c in configs if c.config_source in (1, 2, 3)]
            print(
                f"{'All configs' if args.all else 'Dynamic configs'} for "
                f"{args.entity_type[:-1]} {name or '<default>'} are:"
            )
            for c in shown:
                syns = ", ".join(f"{SOURCES.get(s.source, s.source)}:{s.name}={s.value}" for s in c.synonyms)
                print(
                    f"  {c.name}={'<sensitive>' if c.is_sensitive else c.value} "
                    f"sensitive={str(c.is_sensitive).lower()} synonyms={{{syns}}}"
                )
        else:
            ops: list[tuple[str, int, str | None]] = [
                (k, 0, v) for k, v in parse_key_values(args.add_config, "--add-config").items()
            ]
            ops.extend((k.strip(), 1, None) for k in args.delete_config.split(",") if k.strip())
            if not ops:
                raise ValueError("--alter needs --add-config or --delete-config")
            await admin.incremental_alter_configs(rtype, name, ops)
            print(f"Completed updating config for {args.entity_type[:-1]} {name or '<default>'}.")
        return 0
    finally:
        await admin.close()


def run(args: argparse.Namespace) -> int:
    return run_admin("configs", _run, args)
