"""`kopfka transactions` (kafka-transactions): list, describe, describe-producers, abort,
find-hanging — the same subcommands, options and table columns as Kafka's tool."""

from __future__ import annotations

import argparse
import time

from kopfka.cli.common import add_bootstrap, client_security, run_admin
from kopfka.client.transactions import TransactionsClient


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    sub = p.add_subparsers(dest="txn_command", metavar="COMMAND", required=True)
    ls = sub.add_parser("list", help="list transactions")
    ls.add_argument(
        "--duration-filter", type=int, default=-1, metavar="MS", help="only transactions open longer than this"
    )
    d = sub.add_parser("describe", help="describe the state of an active transactional id")
    d.add_argument("--transactional-id", required=True)
    dp = sub.add_parser("describe-producers", help="describe the states of active producers for a partition")
    dp.add_argument("--topic", required=True)
    dp.add_argument("--partition", type=int, required=True)
    a = sub.add_parser("abort", help="abort a hanging transaction (requires administrative privileges)")
    a.add_argument("--topic", required=True)
    a.add_argument("--partition", type=int, required=True)
    a.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
    a.add_argument("--producer-id", type=int)
    a.add_argument("--producer-epoch", type=int)
    a.add_argument("--coordinator-epoch", type=int)
    f = sub.add_parser("find-hanging", help="find hanging transactions")
    f.add_argument("--broker-id", type=int)
    f.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES")
    f.add_argument("--topic")
    f.add_argument("--partition", type=int)


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Kafka's ToolsUtils.prettyPrintTable: left-aligned columns as wide as their widest cell."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=False)]
    return "\n".join(
        "\t".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [headers, *rows]
    )


async def _main(args: argparse.Namespace) -> int:
    client = TransactionsClient(args.bootstrap_server, client_security(args))
    try:
        cmd = args.txn_command
        if cmd == "list":
            rows = [
                [tid, str(node), str(pid), state]
                for tid, node, pid, state in await client.list_transactions(duration_ms=args.duration_filter)
            ]
            print(table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows))
        elif cmd == "describe":
            d = await client.describe(args.transactional_id)
            start = str(d.start_ms) if d.start_ms >= 0 else "None"
            duration = str(int(time.time() * 1000) - d.start_ms) if d.start_ms >= 0 else "None"
            print(
                table(
                    [
                        "CoordinatorId",
                        "TransactionalId",
                        "ProducerId",
                        "ProducerEpoch",
                        "TransactionState",
                        "TransactionTimeoutMs",
                        "CurrentTransactionStartTimeMs",
                        "TransactionDurationMs",
                        "TopicPartitions",
                    ],
                    [
                        [
                            str(d.coordinator_id),
                            d.transactional_id,
                            str(d.producer_id),
                            str(d.producer_epoch),
                            d.state,
                            str(d.timeout_ms),
                            start,
                            duration,
                            ",".join(f"{t}-{p}" for t, p in d.partitions),
                        ]
                    ],
                )
            )
        elif cmd == "describe-producers":
            producers = await client.describe_producers(args.topic, args.partition)
            print(
                table(
                    [
                        "ProducerId",
                        "ProducerEpoch",
                        "LatestCoordinatorEpoch",
                        "LastSequence",
                        "LastTimestamp",
                        "CurrentTransactionStartOffset",
                    ],
                    [
                        [
                            str(p.producer_id),
                            str(p.producer_epoch),
                            str(p.coordinator_epoch),
                            str(p.last_sequence),
                            str(p.last_timestamp),
                            str(p.current_txn_start_offset) if p.current_txn_start_offset >= 0 else "None",
                        ]
                        for p in producers
                    ],
                )
            )
        elif cmd == "abort":
            await client.abort(
                args.topic,
                args.partition,
                start_offset=args.start_offset,
                producer_id=args.producer_id,
                producer_epoch=args.producer_epoch,
                coordinator_epoch=args.coordinator_epoch,
            )
        elif cmd == "find-hanging":
            if args.partition is not None and args.topic is None:
                raise ValueError("--partition needs --topic")
            if args.broker_id is None and args.topic is None:
                raise ValueError("find-hanging needs --broker-id or --topic")
            hanging = await client.find_hanging(
                broker_id=args.broker_id,
                topic=args.topic,
                partition=args.partition,
                max_transaction_timeout_ms=args.max_transaction_timeout * 60_000,
            )
            now = int(time.time() * 1000)
            print(
                table(
                    [
                        "Topic",
                        "Partition",
                        "ProducerId",
                        "ProducerEpoch",
                        "CoordinatorEpoch",
                        "StartOffset",
                        "LastTimestamp",
                        "Duration(min)",
                    ],
                    [
                        [
                            h.topic,
                            str(h.partition),
                            str(h.producer.producer_id),
                            str(h.producer.producer_epoch),
                            str(h.producer.coordinator_epoch),
                            str(h.producer.current_txn_start_offset),
                            str(h.producer.last_timestamp),
                            str((now - h.producer.last_timestamp) // 60_000),
                        ]
                        for h in hanging
                    ],
                )
            )
        return 0
    finally:
        await client.close()


def run(args: argparse.Namespace) -> int:
    return run_admin("transactions", _main, args)
