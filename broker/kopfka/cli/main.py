"""The `kopfka` console script: one entry point, subcommands mirroring Kafka's tools.

Each subcommand lives in its own module and is imported lazily, so `kopfka storage
format` in an init container does not pay for importing the broker or the operator.
"""

from __future__ import annotations

import importlib
import sys

# subcommand -> (module, help). Each module exposes `add_arguments(parser)` and `run(args) -> int`.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("kopfka.cli.serve", "run a broker and/or controller (kafka-server-start)"),
    "storage": ("kopfka.cli.storage", "format and inspect log dirs (kafka-storage)"),
    "topics": ("kopfka.cli.topics", "create, list, describe, alter and delete topics (kafka-topics)"),
    "configs": ("kopfka.cli.configs", "describe and alter configs (kafka-configs)"),
    "quotas": ("kopfka.cli.quotas", "describe and alter client quotas (kafka-configs for users/clients/ips)"),
    "acls": ("kopfka.cli.acls", "add, remove and list ACLs (kafka-acls)"),
    "reassign": ("kopfka.cli.reassign", "start, cancel and show partition reassignments (kafka-reassign-partitions)"),
    "metadata-quorum": ("kopfka.cli.metadata_quorum", "show and resize the controller quorum (kafka-metadata-quorum)"),
    "groups": ("kopfka.cli.groups", "list, describe and delete consumer groups, with lag (kafka-consumer-groups)"),
    "transactions": ("kopfka.cli.transactions", "list, describe and abort transactions (kafka-transactions)"),
    "operator": ("kopfka_operator.cli", "run the Kubernetes operator (kopf)"),
}


def main(argv: list[str] | None = None) -> int:
    import argparse

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="kopfka", description="kopfka: Kafka-compatible broker and operator")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = argv[0] if argv and not argv[0].startswith("-") else None
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        if name == wanted:
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                print(f"kopfka {name}: unavailable ({exc}); install the matching extra", file=sys.stderr)
                return 2
            module.add_arguments(p)
            p.set_defaults(_run=module.run)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    return int(args._run(args) or 0)


def console_main() -> int:
    """The `kopfka` console script and `python -m kopfka.cli.main`: a process of its own.

    kio registers hypothesis strategies for its types at import whenever hypothesis is importable
    (kio.static._phantom): ~0.2 s of CPU at every start of a node, spent on property-test support
    a node never uses. Where hypothesis is installed (a test environment), this process does
    without it. The dataclasses its command builds come from compiled code cached by an earlier
    run (kopfka.dataclass_cache)."""
    if "hypothesis" not in sys.modules:
        sys.modules["hypothesis"] = None  # type: ignore[assignment]  # `import hypothesis` raises ImportError
    from kopfka import dataclass_cache

    argv = sys.argv[1:]
    dataclass_cache.install(argv[0] if argv and argv[0] in SUBCOMMANDS else "kopfka")
    try:
        return main(argv)
    finally:
        dataclass_cache.save()


if __name__ == "__main__":
    sys.exit(console_main())
