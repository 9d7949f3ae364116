"""Format and start errors exit non-zero with a message naming the problem (and the fix)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from cluster import Cluster, Node, wait_until
from kopfka import uuids


def serve(node: Node, timeout: float = 40) -> subprocess.CompletedProcess[str]:
    return node.kopfka("serve", "--config", str(node.config), timeout=timeout)


def test_format_requires_a_cluster_id(tmp_path: Path) -> None:
    n = Node(tmp_path, 1000, "controller", "127.0.0.31", props={})
    n.write_config({"controller.quorum.voters": f"1000@{n.address}"})
    res = n.kopfka("storage", "format", "--config", str(n.config))
    assert res.returncode != 0
    assert "--cluster-id" in res.stderr


def test_unformatted_dir_refuses_to_start(tmp_path: Path) -> None:
    n = Node(tmp_path, 1000, "controller", "127.0.0.32", props={})
    n.write_config({"controller.quorum.voters": f"1000@{n.address}"})
    res = serve(n)
    assert res.returncode == 1
    assert "kopfka storage format" in res.stderr and "meta.properties" in res.stderr


def test_reformat_for_another_cluster_names_the_dir(tmp_path: Path) -> None:
    n = Node(tmp_path, 1000, "controller", "127.0.0.33", props={})
    n.write_config({"controller.quorum.voters": f"1000@{n.address}"})
    first, other = (uuids.to_str(uuids.random_uuid()) for _ in range(2))
    assert n.format(first).returncode == 0
    res = n.format(other, "--ignore-formatted")
    assert res.returncode == 1
    assert str(n.dir / "logs") in res.stderr or str(n.dir / "metadata") in res.stderr
    assert first in res.stderr


def test_dirs_formatted_for_different_clusters_refuse_to_start(tmp_path: Path) -> None:
    n = Node(tmp_path, 1000, "controller", "127.0.0.34", props={})
    n.write_config({"controller.quorum.voters": f"1000@{n.address}"})
    assert n.format(uuids.to_str(uuids.random_uuid())).returncode == 0
    meta = n.dir / "metadata" / "meta.properties"
    text = meta.read_text().splitlines()
    meta.write_text(
        "\n".join(
            line if not line.startswith("cluster.id=") else f"cluster.id={uuids.to_str(uuids.random_uuid())}"
            for line in text
        )
        + "\n"
    )
    res = serve(n)
    assert res.returncode == 1
    assert "different clusters" in res.stderr


def test_broker_of_another_cluster_exits_naming_the_mismatch(make_cluster: Any) -> None:
    c: Cluster = make_cluster(1, 0).start()
    b = Node(c.root, 7, "broker", "127.0.0.35", props=c.props)
    b.write_config(c.quorum_props())
    assert b.format(uuids.to_str(uuids.random_uuid())).returncode == 0
    res = serve(b)
    assert res.returncode == 1
    assert "cluster id mismatch" in res.stderr


def test_duplicate_node_id_exits_naming_the_problem(make_cluster: Any) -> None:
    c: Cluster = make_cluster(1, 1).start()
    dup = Node(
        c.root / "dup", 0, "broker", "127.0.0.36", props={**c.props, "initial.broker.registration.timeout.ms": "4000"}
    )
    dup.write_config(c.quorum_props())
    assert dup.format(c.cluster_id).returncode == 0
    res = serve(dup)
    assert res.returncode == 1
    assert "duplicate node id" in res.stderr and "node.id 0" in res.stderr
    wait_until(lambda: c.brokers[0].ready(), 5, "the original broker to stay ready")


def test_garbage_in_the_metadata_log_stops_the_start_in_one_line(tmp_path: Path) -> None:
    """Record bytes that are no metadata record (here in the log's second batch) stop `kopfka
    serve` with one line naming the segment and the offset: no traceback, no retry loop."""
    from kopfka.metadata import records as mr
    from kopfka.protocol.record_codec import Record, encode_batch

    n = Node(tmp_path, 1000, "controller", "127.0.0.35", props={})
    n.write_config({"controller.quorum.voters": f"1000@{n.address}"})
    assert n.format(uuids.to_str(uuids.random_uuid())).returncode == 0
    seg = n.dir / "metadata" / "__cluster_metadata-0" / "00000000000000000000.log"
    seg.parent.mkdir(exist_ok=True)
    good = encode_batch([Record(0, 0, None, mr.encode(mr.NoOpRecord()))], partition_leader_epoch=1)
    bad = encode_batch([Record(0, 0, None, b"\x01\x02\x00garbage")], base_offset=1, partition_leader_epoch=1)
    seg.write_bytes(good + bad)
    res = serve(n)
    assert res.returncode == 1, res.stderr[-2000:]
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    assert f"kopfka serve: {seg} (offset 1): bad metadata record: " in res.stderr, res.stderr[-2000:]
