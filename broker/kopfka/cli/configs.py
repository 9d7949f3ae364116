"""`kopfka configs` (kafka-configs): --describe and --alter for topics, brokers and users.

For users, SCRAM credentials as kafka-configs sets them:
  --entity-type users --entity-name alice --alter --add-config 'SCRAM-SHA-512=[iterations=8192,password=s3cret]'
  --entity-type users --entity-name alice --alter --delete-config SCRAM-SHA-512
and client quota keys (producer_byte_rate, ...) as `kopfka quotas` does for a user.
"""

from __future__ import annotations

import argparse

from kopfka.cli.common import add_bootstrap, connect_admin, parse_key_values, run_admin
from kopfka.client.admin import Admin
from kopfka.client.quotas import MATCH_EXACT, alter_client_quotas, describe_client_quotas
from kopfka.client.user_scram import alter_user_scram_credentials, describe_user_scram_credentials
from kopfka.security import scram

ENTITY_TYPES = {"topics": 2, "brokers": 4, "users": -1}
SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    p.add_argument("--entity-type", required=True, choices=sorted(ENTITY_TYPES))
    p.add_argument("--entity-name", default="")
    p.add_argument("--entity-default", action="store_true", help="the cluster-wide broker default")
    ops = p.add_mutually_exclusive_group(required=True)
    ops.add_argument("--describe", action="store_true")
    ops.add_argument("--alter", action="store_true")
    p.add_argument("--all", action="store_true", help="with --describe: every config, not only overrides")
    p.add_argument("--add-config", default="", metavar="K1=V1,K2=V2")
    p.add_argument("--delete-config", default="", metavar="K1,K2")


def split_config(text: str) -> list[str]:
    """Split K1=V1,K2=[a=1,b=2] on the commas outside brackets (kafka-configs' syntax)."""
    items, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        if depth < 0:
            raise ValueError(f"--add-config {text!r}: unbalanced ']'")
        cur += ch
    if depth:
        raise ValueError(f"--add-config {text!r}: unclosed '['")
    items.append(cur)
    return [i.strip() for i in items if i.strip()]


def parse_scram(key: str, value: str) -> tuple[str, int]:
    """`[iterations=N,password=P]` → (password, iterations)."""
    if not (value.startswith("[") and value.endswith("]")):
        raise ValueError(f"{key} expects [password=...] or [iterations=N,password=...]")
    opts: dict[str, str] = {}
    for part in value[1:-1].split(","):
        k, sep, v = part.partition("=")
        if not sep:
            raise ValueError(f"{key}: expected key=value inside the brackets")
        opts[k.strip()] = v
    unknown = set(opts) - {"password", "iterations"}
    if unknown or "password" not in opts:
        raise ValueError(f"{key}: only password=... and iterations=N are allowed, and password is required")
    try:
        iterations = int(opts.get("iterations", str(scram.DEFAULT_ITERATIONS)))
    except ValueError:
        raise ValueError(f"{key}: iterations must be a number") from None
    return opts["password"], iterations


async def _users(admin: Admin, args: argparse.Namespace) -> int:
    user = args.entity_name
    if args.describe:
        creds = await describe_user_scram_credentials(admin, [user] if user else None)
        for name, mechs in creds.items():
            if mechs:
                shown = ",".join(f"{m}=iterations={i}" for m, i in mechs)
                print(f"SCRAM credential configs for user-principal '{name}' are {shown}")
        if user:
            filters = [("user", MATCH_EXACT, user)]
            for _entity, values in await describe_client_quotas(admin, filters, True):
                vals = ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
                print(f"Quota configs for user-principal '{user}' are {vals}")
        return 0
    if not user:
        raise ValueError("--alter --entity-type users needs --entity-name")
    upsert: list[tuple[str, str, str, int]] = []
    quota_set: dict[str, float] = {}
    for item in split_config(args.add_config):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise ValueError(f"--add-config {item!r}: expected KEY=VALUE")
        if key.upper() in scram.MECHANISMS:
            password, iterations = parse_scram(key, value.strip())
            upsert.append((user, key.upper(), password, iterations))
        else:
            quota_set[key] = float(value)
    deletes = [k.strip() for k in args.delete_config.split(",") if k.strip()]
    scram_delete = [(user, k.upper()) for k in deletes if k.upper() in scram.MECHANISMS]
    quota_delete = [k for k in deletes if k.upper() not in scram.MECHANISMS]
    if not (upsert or scram_delete or quota_set or quota_delete):
        raise ValueError("--alter needs --add-config or --delete-config")
    # one request per credential: the controller refuses a user twice in one request (as Kafka's)
    for d in scram_delete:
        await alter_user_scram_credentials(admin, [], [d])
    for u in upsert:
        await alter_user_scram_credentials(admin, [u], [])
    if quota_set or quota_delete:
        await alter_client_quotas(admin, [("user", user)], quota_set, quota_delete)
    print(f"Completed updating config for user {user}.")
    return 0


async def _run(args: argparse.Namespace) -> int:
    rtype = ENTITY_TYPES[args.entity_type]
    name = "" if args.entity_default else args.entity_name
    admin = await connect_admin(args)
    try:
        if args.entity_type == "users":
            return await _users(admin, args)
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
