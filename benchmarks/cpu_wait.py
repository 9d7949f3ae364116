"""How long a process waited for a CPU each time it woke up (Linux schedstat).

A replicated write crosses four processes; on a busy machine each hop pays the time the
woken process sits runnable in the run queue before a CPU takes it. /proc/<pid>/task/<tid>/
schedstat has, per thread: ns on a CPU, ns waiting on a run queue, and timeslices run. Their
difference over a run says whether a latency came from the broker's own work or from waiting
for the machine (other processes, or another broker of the same cluster).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Sched:
    on_cpu_ns: int = 0
    wait_ns: int = 0
    slices: int = 0


def read(pid: int) -> Sched:
    """The event-loop thread's counters (the main thread: the loop runs there)."""
    try:
        fields = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
    except OSError:
        return Sched()
    return Sched(int(fields[0]), int(fields[1]), int(fields[2]))


def snapshot(pids: dict[str, int]) -> dict[str, Sched]:
    return {name: read(pid) for name, pid in pids.items()}


def table(before: dict[str, Sched], after: dict[str, Sched], seconds: float) -> str:
    lines = ["  event-loop thread:          on CPU   run-queue wait   wake-ups   wait per wake-up"]
    for name in before:
        a, b = before[name], after[name]
        slices = b.slices - a.slices
        wait = (b.wait_ns - a.wait_ns) / 1e6
        lines.append(
            f"    {name:<22} {(b.on_cpu_ns - a.on_cpu_ns) / 1e6:8.0f} ms {wait:12.0f} ms {slices:10d}"
            f" {wait / max(slices, 1):12.2f} ms   (in {seconds:.0f} s)"
        )
    return "\n".join(lines)
