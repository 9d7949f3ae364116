"""What every admin subcommand shares: running its coroutine with errors turned into a
one-line message naming the problem (exit 1), and parsing KEY=VALUE lists."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from kopfka.client.admin import AdminError

ADMIN_ERRORS: tuple[type[BaseException], ...] = (AdminError, ValueError, OSError, TimeoutError)


def run_admin(
    name: str, main: Callable[[argparse.Namespace], Coroutine[Any, Any, int]], args: argparse.Namespace
) -> int:
    try:
        return asyncio.run(main(args))
    except ADMIN_ERRORS as exc:
        print(f"kopfka {name}: {exc}", file=sys.stderr)
        return 1


def parse_key_values(text: str, option: str) -> dict[str, str]:
    """`k1=v1,k2=v2` → {k1: v1, k2: v2}; a malformed item is a ValueError naming the option."""
    out: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"{option} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out
