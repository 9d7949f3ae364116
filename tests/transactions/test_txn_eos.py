"""Exactly-once consume-transform-produce through crashes (SIGKILL), on one broker: the worker
process killed with half a transaction in the log, and the broker killed under a running worker.
Each time the output read with read_committed holds every input record exactly once and the
group's committed offsets are the input's end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kopfka_process import KopfkaProcess

from transactions.eos import IN, OUT, Worker, audit, feed
from transactions.helpers import create_topic

N = 300
OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


def _broker(root: Path) -> KopfkaProcess:
    k = KopfkaProcess(root / "data", overrides=OVERRIDES).start()
    create_topic(k.bootstrap, IN, 2)
    create_topic(k.bootstrap, OUT, 2)
    feed(k.bootstrap, N, 2)
    return k


def test_worker_killed_mid_transaction(tmp_path: Path, workers: Callable[..., Worker]) -> None:
    k = _broker(tmp_path)
    try:
        first = workers(k.bootstrap, tmp_path, "first")
        first.wait_for("mid 3")
        first.kill()  # transaction 3 has records in the log, uncommitted
        second = workers(k.bootstrap, tmp_path, "second")  # fences the first and aborts its transaction
        second.wait_done()
        audit(k.bootstrap, N, 2, aborted_in_log=True)
    finally:
        k.kill()


def test_broker_killed_under_a_running_worker(tmp_path: Path, workers: Callable[..., Worker]) -> None:
    k = _broker(tmp_path)
    try:
        worker = workers(k.bootstrap, tmp_path, "worker")
        worker.wait_for("mid 3")
        k.kill()  # the coordinator, the partitions and the group die together
        k.start()  # same port and data: transaction state, producer state and txn index are reloaded
        worker.wait_done()
        audit(k.bootstrap, N, 2)
    finally:
        k.kill()
