"""kcat (librdkafka 2.0) consumes as a group member, and `kopfka groups` shows the group:
listing, members with their assignment, committed offsets and lag, state, and deletion."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kopfka_process import KopfkaProcess

from groups.harness import Producer, Worker, create_topic, describe, wait_for

PARTITIONS = 3


def groups_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kopfka.cli.main", "groups", "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=60)


def offsets_table(out: str) -> dict[int, tuple[str, str, str, str]]:
    """partition -> (current, end, lag, consumer id) from `--describe --offsets` output."""
    rows = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 9 and cols[2].isdigit():
            rows[int(cols[2])] = (cols[3], cols[4], cols[5], cols[6])
    return rows


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_group_and_groups_cli(broker: KopfkaProcess, tmp_path: Path) -> None:
    bs, topic = broker.bootstrap, "kc"
    create_topic(bs, topic, PARTITIONS)
    producer = Producer(bs)
    producer.send(topic, 90, PARTITIONS)

    kcat = ["kcat", "-b", bs, "-G", "kcat-group", "-X", "auto.offset.reset=earliest", "-e", "-q",
            "-f", "%p:%o\\n", topic]
    out = subprocess.run(kcat, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    consumed = {tuple(map(int, line.split(":"))) for line in out.stdout.split()}
    assert consumed == producer.acked
    again = subprocess.run(kcat, capture_output=True, text=True, timeout=60)
    assert again.stdout.split() == [], "kcat did not resume from its group's committed offsets"

    listed = groups_cli(bs, "--list")
    assert listed.returncode == 0 and "kcat-group" in listed.stdout.split(), listed
    desc = groups_cli(bs, "--describe", "--group", "kcat-group")
    assert desc.returncode == 0, desc.stderr
    rows = offsets_table(desc.stdout)
    assert rows == {p: ("30", "30", "0", "-") for p in range(PARTITIONS)}, desc.stdout
    assert "has no active members" in desc.stdout

    producer.send(topic, 30, PARTITIONS)
    rows = offsets_table(groups_cli(bs, "--describe", "--group", "kcat-group", "--offsets").stdout)
    assert {p: r[2] for p, r in rows.items()} == {p: "10" for p in range(PARTITIONS)}

    # a live member in a second group: members view, owner column, state, refused deletion
    w = Worker("kafka-python", bs, topic, "live-group", tmp_path / "live.jsonl", "live").start()
    try:
        wait_for(lambda: w.owned() == set(range(PARTITIONS)), 60, "the live member's assignment", lambda: describe([w]))
        wait_for(lambda: {r[2] for r in offsets_table(groups_cli(bs, "--describe", "--group", "live-group").stdout)
                          .values()} == {"0"}, 30, "the live member to commit")
        members = groups_cli(bs, "--describe", "--group", "live-group", "--members")
        line = next(ln for ln in members.stdout.splitlines() if "kp-live" in ln)
        assert re.search(rf"\s{PARTITIONS}\s+{topic}\(0,1,2\)$", line), members.stdout
        rows = offsets_table(groups_cli(bs, "--describe", "--group", "live-group").stdout)
        assert all(r[3].startswith("kp-live-") for r in rows.values()), rows
        state = groups_cli(bs, "--describe", "--group", "live-group", "--state")
        assert re.search(r"live-group\s+\S+ \(1\)\s+classic\s+range\s+Stable\s+1", state.stdout), state.stdout
        refused = groups_cli(bs, "--delete", "--group", "live-group")
        assert refused.returncode == 1 and "NON_EMPTY_GROUP" in refused.stderr
    finally:
        w.stop()
    deleted = groups_cli(bs, "--delete", "--group", "live-group")
    assert deleted.returncode == 0, deleted.stderr
    assert "live-group" not in groups_cli(bs, "--list").stdout.split()
    gone = groups_cli(bs, "--describe", "--group", "live-group")
    assert gone.returncode == 1 and "GROUP_ID_NOT_FOUND" in gone.stderr
