"""What an exactly-once audit prints when it fails: each replica's on-disk batches of the
partitions that miss records (offsets, producer, control type, values), its transaction index,
and what its broker logged about them -- enough to tell a replica that lost records from a
reader that skipped them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kopfka.protocol.record_codec import decode_records
from kopfka.protocol.records import iter_batches
from kopfka.storage.producer_state import read_end_txn_marker
from kopfka.storage.transaction_index import TransactionIndex

CONTROL = {0: "ABORT", 1: "COMMIT"}


def _batches(log: Path, wanted: set[str]) -> list[str]:
    """Batches that hold a wanted value, three either side of them, and every ABORT marker."""
    data = log.read_bytes()
    lines: list[tuple[bool, bool, str]] = []  # (holds a wanted value, is an ABORT marker, line)
    for h in iter_batches(data, allow_partial_tail=True):  # the brokers are still writing
        kind = ""
        if h.is_control:
            values = []
            marker = read_end_txn_marker(data[h.position : h.position + h.size])
            kind = CONTROL.get(marker[0], "?") if marker is not None else "?"
            what = f"{kind} marker"
        else:
            values = [r.value.decode(errors="replace") for r in decode_records(data, h) if r.value is not None]
            what = " ".join(values[:6]) + (f" ... ({len(values)})" if len(values) > 6 else "")
        txn = " txn" if h.is_transactional else ""
        line = (
            f"    {h.base_offset}-{h.last_offset} pid {h.producer_id} epoch {h.producer_epoch}"
            f" leader epoch {h.partition_leader_epoch}{txn}: {what}"
        )
        lines.append((bool(wanted.intersection(values)), kind == "ABORT", line))
    near = {j for i, (hit, _, _) in enumerate(lines) if hit for j in range(i - 3, i + 4)}
    out, elided = [], False
    for i, (_, abort, line) in enumerate(lines):
        if i in near or abort:
            out.append(line)
            elided = False
        elif not elided:
            out.append("    ...")
            elided = True
    return out


def replica_report(node_dirs: Iterable[Path], topic: str, partitions: Iterable[int], wanted: Iterable[str]) -> str:
    out = []
    values = set(wanted)
    for node_dir in node_dirs:
        logged = (node_dir / "server.log").read_text(errors="replace") if (node_dir / "server.log").exists() else ""
        for p in sorted(set(partitions)):
            name = f"{topic}-{p}"
            for part_dir in sorted(node_dir.rglob(name)):
                out.append(f"{part_dir}:")
                for log in sorted(part_dir.glob("*.log")):
                    out.append(f"  {log.name}")
                    out += _batches(log, values)
                for index in sorted(part_dir.glob("*.txnindex")):
                    aborted = TransactionIndex(int(index.stem), index).all_aborted_txns()
                    out.append(f"  {index.name}: {aborted}")
            out += [f"  log: {line}" for line in logged.splitlines() if name in line or f"{topic} {p}" in line][-30:]
    return "\n".join(out)
