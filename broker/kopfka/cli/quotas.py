"""`kopfka quotas`: describe and alter client quotas (kafka-configs --entity-type users/clients/ips).

kopfka quotas --bootstrap-server H:P --describe [--user U | --user-default] [--client-id C | --client-id-default]
kopfka quotas --bootstrap-server H:P --alter --client-id C --add producer_byte_rate=1048576 --delete consumer_byte_rate
"""

from __future__ import annotations

import argparse

from kopfka.cli.common import add_bootstrap, connect_admin, parse_key_values, run_admin
from kopfka.client.quotas import MATCH_DEFAULT, MATCH_EXACT, alter_client_quotas, describe_client_quotas

TYPES = (("user", "user"), ("client_id", "client-id"), ("ip", "ip"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    ops = p.add_mutually_exclusive_group(required=True)
    ops.add_argument("--describe", action="store_true")
    ops.add_argument("--alter", action="store_true")
    for attr, etype in TYPES:
        g = p.add_mutually_exclusive_group()
        g.add_argument(f"--{etype}", dest=attr, metavar=etype.upper().replace("-", "_"))
        g.add_argument(f"--{etype}-default", dest=f"{attr}_default", action="store_true", help=f"the <default> {etype}")
    p.add_argument("--add", default="", metavar="K1=V1,K2=V2", help="quota values to set")
    p.add_argument("--delete", default="", metavar="K1,K2", help="quota keys to remove")
    p.add_argument("--validate-only", action="store_true")
    p.add_argument("--strict", action="store_true", help="with --describe: only entities of exactly these types")


def _entity(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for attr, etype in TYPES:
        if getattr(args, f"{attr}_default"):
            out.append((etype, None))
        elif getattr(args, attr) is not None:
            out.append((etype, getattr(args, attr)))
    return out


def _fmt(entity: list[tuple[str, str | None]]) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


async def _run(args: argparse.Namespace) -> int:
    entity = _entity(args)
    admin = await connect_admin(args)
    try:
        if args.describe:
            filters = [(t, MATCH_DEFAULT if n is None else MATCH_EXACT, n) for t, n in entity]
            for ent, values in await describe_client_quotas(admin, filters, args.strict):
                vals = ", ".join(f"{k}={v:g}" for k, v in sorted(values.items()))
                print(f"Quota configs for {_fmt(ent)} are {vals}")
            return 0
        if not entity:
            raise ValueError("--alter needs an entity: --user/--client-id/--ip or their -default forms")
        set_values = {k: float(v) for k, v in parse_key_values(args.add, "--add").items()}
        remove = [k.strip() for k in args.delete.split(",") if k.strip()]
        if not set_values and not remove:
            raise ValueError("--alter needs --add or --delete")
        await alter_client_quotas(admin, entity, set_values, remove, args.validate_only)
        print(f"{'Validated' if args.validate_only else 'Completed updating'} quotas for {_fmt(entity)}.")
        return 0
    finally:
        await admin.close()


def run(args: argparse.Namespace) -> int:
    return run_admin("quotas", _run, args)
