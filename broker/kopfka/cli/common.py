"""What every admin subcommand shares: the bootstrap address and `--command-config` (a Kafka
client config: security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config), running its
coroutine with errors turned into a one-line message naming the problem (exit 1), and
parsing KEY=VALUE lists."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from kopfka.client.admin import Admin, AdminError
from kopfka.security.client import ClientSecurity

ADMIN_ERRORS: tuple[type[BaseException], ...] = (AdminError, ValueError, OSError, TimeoutError)


def run_admin(
    name: str, main: Callable[[argparse.Namespace], Coroutine[Any, Any, int]], args: argparse.Namespace
) -> int:
    try:
        return asyncio.run(main(args))
    except ADMIN_ERRORS as exc:
        print(f"kopfka {name}: {exc}", file=sys.stderr)
        return 1


def add_bootstrap(p: argparse.ArgumentParser, flag: str = "--bootstrap-server", metavar: str = "HOST:PORT") -> None:
    p.add_argument(flag, required=True, metavar=metavar)
    p.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="client properties for a secured listener (security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config)",
    )


def client_security(args: argparse.Namespace) -> ClientSecurity | None:
    """The --command-config file as a ClientSecurity (a bad key is a ValueError naming it)."""
    path = getattr(args, "command_config", None)
    if path is None:
        return None
    from kopfka.config.server_config import read_properties

    if not path.exists():
        raise ValueError(f"--command-config {path}: file not found")
    return ClientSecurity.from_properties(read_properties(path))


async def connect_admin(args: argparse.Namespace) -> Admin:
    return await Admin.connect(args.bootstrap_server, security=client_security(args))


def parse_key_values(text: str, option: str) -> dict[str, str]:
    """`k1=v1,k2=v2` → {k1: v1, k2: v2}; a malformed item is a ValueError naming the option."""
    out: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"{option} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out
