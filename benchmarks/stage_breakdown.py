"""Where a replicated write's time goes: joins the brokers' stage stamps
(kopfka.server.replication_trace, collected from /debug/replication-trace) with the records a
benchmark produced and consumed, and splits each record's end-to-end latency into stages.

All stamps are time.perf_counter() (CLOCK_MONOTONIC): the clients' and every broker's compare
directly. For an RF=3 write the follower on the critical path is the one whose fetch moved the
high watermark past the record (the later of the two); its wake-up, transfer, append and next
fetch are the replication stages.
"""

from __future__ import annotations

import bisect
import json
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kopfka.server.replication_trace import STALL_TICK_S

STAGES = (
    ("client→leader", "produce call until the leader's produce handler starts (client, network)"),
    ("leader append", "the produce handler until its records are appended"),
    ("follower wake-up", "append until the follower's parked fetch is answered with the records"),
    ("to follower", "the fetch answer until the follower's fetcher holds it"),
    ("follower append", "the answer in hand until the follower appended it"),
    ("follower next fetch", "follower appended until its next fetch reaches the leader"),
    ("ack→HW", "that fetch until the high watermark passes the record"),
    ("HW→produce answer", "HW moved until the acks=all produce is answered"),
    ("HW→consumer answer", "HW moved (RF=1: appended) until a consumer's fetch carries the record"),
    ("to consumer", "that fetch answer until the consumer's poll returns the record"),
    ("end-to-end", "produce call until the consumer's poll returns the record"),
)


class _Series:
    """Events of one stage for one partition (and replica): time order, running max of hi."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.his: list[int] = []
        self.extras: list[float] = []

    def add(self, t: float, hi: int, extra: float) -> None:
        self.times.append(t)
        self.his.append(max(hi, self.his[-1]) if self.his else hi)
        self.extras.append(extra)

    def first_past(self, offset: int) -> tuple[float, float] | None:
        """(time, extra) of the first event whose hi passes `offset`."""
        i = bisect.bisect_right(self.his, offset)
        return (self.times[i], self.extras[i]) if i < len(self.times) else None


@dataclass
class Trace:
    # (stage, topic, partition, replica or -1) -> series; replica: the follower's id for
    # fetch_out/ack (stamped on the leader) and the stamping node for follower_append
    series: dict[tuple[str, str, int, int], _Series] = field(default_factory=lambda: defaultdict(_Series))
    # node -> [(end time, late µs, loop thread's CPU µs, its run-queue wait µs or -1)] of its
    # event loop's late wake-ups (over the tick that came late: STALL_TICK_S + late)
    stalls: dict[int, list[tuple[float, int, int, float]]] = field(default_factory=lambda: defaultdict(list))

    def add(self, node_id: int, events: Iterable[Sequence[Any]]) -> None:
        """One node's events as /debug/replication-trace gives them (JSON arrays)."""
        self.stalls.setdefault(node_id, [])
        for stage, topic, partition, lo, hi, t, extra in sorted(events, key=lambda e: float(e[5])):
            if stage == "stall":
                self.stalls[node_id].append((float(t), int(lo), int(hi), float(extra)))
                continue
            replica = -1
            if stage in ("fetch_out", "ack"):
                replica = int(extra)
            elif stage == "follower_append":
                replica = node_id
            self.series[(str(stage), str(topic), int(partition), replica)].add(float(t), int(hi), float(extra))

    def replicas(self, topic: str, partition: int) -> list[int]:
        return sorted({k[3] for k in self.series if k[0] == "follower_append" and k[1:3] == (topic, partition)})

    def first(
        self, stage: str, topic: str, partition: int, offset: int, replica: int = -1
    ) -> tuple[float, float] | None:
        s = self.series.get((stage, topic, partition, replica))
        return s.first_past(offset) if s is not None else None


def collect(http_addresses: Iterable[str]) -> Trace:
    """Take (and clear) every broker's stamps."""
    trace = Trace()
    for addr in http_addresses:
        with urllib.request.urlopen(f"http://{addr}/debug/replication-trace", timeout=30) as r:
            doc = json.loads(r.read())
        trace.add(int(doc["node_id"]), doc["events"])
    return trace


def clear(http_addresses: Iterable[str]) -> None:
    """Drop every broker's stamps unread (a GET would make each broker encode them as JSON on its
    event loop, a stall at the start of the measured records)."""
    for addr in http_addresses:
        req = urllib.request.Request(f"http://{addr}/debug/replication-trace", method="DELETE")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                r.read()
        except urllib.error.HTTPError as exc:  # a broker from before the DELETE: take them instead
            if exc.code != 405:
                raise
            collect([addr])


def split(trace: Trace, topic: str, rows: Iterable[tuple[float, float, int, int]]) -> dict[str, list[float]]:
    """rows: (produce call time, receive time, partition, offset) → stage name → durations (ms)."""
    out: dict[str, list[float]] = defaultdict(list)
    replicas_of: dict[int, list[int]] = {}
    for sent, received, partition, offset in rows:
        d: dict[str, float] = {"end-to-end": received - sent}
        app = trace.first("append", topic, partition, offset)
        hw = trace.first("hw", topic, partition, offset)
        co = trace.first("consumer_out", topic, partition, offset)
        if app is None or hw is None:
            continue
        t_append, t_handler = app
        d["client→leader"] = t_handler - sent
        d["leader append"] = t_append - t_handler
        if partition not in replicas_of:
            replicas_of[partition] = trace.replicas(topic, partition)
        critical: tuple[float, int] | None = None
        for r in replicas_of[partition]:
            ack = trace.first("ack", topic, partition, offset, r)
            if ack is not None and ack[0] <= hw[0] and (critical is None or ack[0] > critical[0]):
                critical = (ack[0], r)
        if critical is not None:
            t_ack, r = critical
            fo = trace.first("fetch_out", topic, partition, offset, r)
            fa = trace.first("follower_append", topic, partition, offset, r)
            if fo is not None and fa is not None:
                d["follower wake-up"] = fo[0] - t_append
                d["to follower"] = fa[1] - fo[0]
                d["follower append"] = fa[0] - fa[1]
                d["follower next fetch"] = t_ack - fa[0]
                d["ack→HW"] = hw[0] - t_ack
        pd = trace.first("produce_done", topic, partition, offset)
        if pd is not None:
            d["HW→produce answer"] = pd[0] - hw[0]
        if co is not None:
            d["HW→consumer answer"] = co[0] - max(hw[0], t_append)
            d["to consumer"] = received - co[0]
        for k, v in d.items():
            out[k].append(v * 1000)
    return out


def quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * q))] if s else float("nan")


def table(stages: dict[str, list[float]], title: str) -> str:
    lines = [f"  {title}: stage                 p50 ms   p99 ms   (records)"]
    for name, _ in STAGES:
        v = stages.get(name)
        if v:
            lines.append(f"    {name:<22} {quantile(v, 0.5):8.2f} {quantile(v, 0.99):8.2f}   ({len(v)})")
    return "\n".join(lines)


def stall_table(trace: Trace, seconds: float) -> str:
    """Per broker: how often its event loop woke more than 5 ms late, and what its thread did in
    those stalls' ticks (kopfka.server.replication_trace): ready but waiting for a CPU (the
    machine ran others), on a CPU (the tick's ordinary work, or a callback that blocked the
    loop), or neither (idle in the loop's own wait before the tick was due, or blocked in a
    system call). The tick is STALL_TICK_S + the lateness, so the ordinary share of a short
    stall is large."""
    lines = ["  event-loop stalls > 5 ms:  node  count  total ms  max ms  CPU wait  on CPU  asleep"]
    for node, rows in sorted(trace.stalls.items()):
        late = sum(r[1] for r in rows) / 1000
        worst = max((r[1] for r in rows), default=0) / 1000
        tick = int(STALL_TICK_S * 1e6)
        window = sum(r[1] + tick for r in rows)
        cols = ["-", "-", "-"]
        if rows and all(r[3] >= 0 for r in rows):  # schedstat on that node
            waited = sum(min(r[3], r[1] + tick) for r in rows)
            ran = sum(min(r[2], r[1] + tick) for r in rows)
            cols = [f"{100 * x / window:.0f}%" for x in (waited, ran, max(window - waited - ran, 0))]
        elif rows:
            cols = ["?", "?", "?"]
        lines.append(
            f"    {node:>25}  {len(rows):5d}  {late:8.1f}  {worst:6.1f}  {cols[0]:>8}  {cols[1]:>6}  {cols[2]:>6}"
            f"  (in {seconds:.0f} s)"
        )
    return "\n".join(lines)
