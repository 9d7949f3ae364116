"""Dynamic quorum (KIP-853): a controller formatted with --no-initial-controllers joins the
voter set by itself, and a voter (the active one, the hard case) is removed with
RemoveRaftVoter — while admin requests through a broker keep succeeding."""

from __future__ import annotations

import shutil
import threading
from typing import Any

from cluster import Cluster, Node, create_topic, describe_quorum, request, run, wait_until
from kopfka import uuids


def voters(c: Cluster) -> list[int]:
    p = run(describe_quorum(c.leader().address)).topics[0].partitions[0]
    return sorted(int(v.replica_id) for v in p.current_voters)


def test_add_fourth_controller_and_remove_one_under_admin_load(make_cluster: Any) -> None:
    c: Cluster = make_cluster(3, 1).start()
    broker = c.brokers[0]
    failures: list[str] = []
    created: list[str] = []
    stop = threading.Event()

    def admin_load() -> None:
        i = 0
        while not stop.is_set():
            name = f"load-{i}"
            try:
                res = run(create_topic(broker.address, name))
                if res.error_code != 0:
                    failures.append(f"{name}: {res.error_code} {res.error_message}")
                else:
                    created.append(name)
            except Exception as exc:
                failures.append(f"{name}: {exc!r}")
            i += 1

    load = threading.Thread(target=admin_load, daemon=True)
    load.start()
    try:
        new = Node(c.root, 1003, "controller", "127.0.0.14", props=c.props)
        new.write_config(c.quorum_props())
        res = new.format(c.cluster_id, "--no-initial-controllers")
        assert res.returncode == 0, res.stderr
        c.controllers.append(new)
        new.start()
        wait_until(lambda: voters(c) == [1000, 1001, 1002, 1003], 30, "controller 1003 to join the voter set")
        new.wait_ready(20)

        leader = c.leader()
        dir_id = leader.directory_id
        resp = run(
            request(
                leader.address,
                81,
                0,
                {"cluster_id": c.cluster_id, "voter_id": leader.node_id, "voter_directory_id": uuids.from_str(dir_id)},
                timeout=15,
            )
        )
        assert resp.error_code == 0, resp.error_message
        wait_until(
            lambda: voters(c) == sorted({1000, 1001, 1002, 1003} - {leader.node_id}),
            20,
            "the removed voter to leave the voter set",
        )
        wait_until(lambda: c.leader().node_id != leader.node_id, 20, "a leader among the remaining voters")
        n = len(created)
        wait_until(lambda: len(created) >= n + 3, 20, "admin requests to keep succeeding after the removal")
    finally:
        stop.set()
        load.join(60)
    assert not failures, failures[:5]
    assert len(created) >= 5


def _voter_keys(c: Cluster) -> dict[int, str]:
    p = run(describe_quorum(c.leader().address)).topics[0].partitions[0]
    return {
        int(v.replica_id): uuids.to_str(v.replica_directory_id) if v.replica_directory_id else ""
        for v in p.current_voters
    }


def test_voter_that_lost_its_disk_rejoins_under_a_new_directory_id(make_cluster: Any) -> None:
    """KIP-853 disk-loss detection: a follower voter whose metadata dir is wiped and
    re-formatted (--no-initial-controllers: a new directory id) is not a voter under its new
    key — it neither votes nor counts for the high watermark with its empty log — until it has
    removed its stale key with RemoveRaftVoter and added itself back with AddRaftVoter."""
    c: Cluster = make_cluster(3, 1).start()
    create = run(create_topic(c.brokers[0].address, "before-loss"))
    assert create.error_code == 0
    leader = c.leader()
    lost = next(n for n in c.controllers if n is not leader)
    old_dir = lost.directory_id
    assert _voter_keys(c)[lost.node_id] == old_dir
    lost.kill()
    shutil.rmtree(lost.dir / "metadata")
    res = lost.format(c.cluster_id, "--no-initial-controllers", "--ignore-formatted")
    assert res.returncode == 0, res.stderr
    new_dir = (lost.dir / "metadata" / "meta.properties").read_text().split("directory.id=")[1].split()[0]
    assert new_dir != old_dir
    lost.start()
    wait_until(lambda: _voter_keys(c).get(lost.node_id) == new_dir, 60, "the wiped voter back under its new key")
    assert sorted(_voter_keys(c)) == [1000, 1001, 1002]
    assert "RemoveRaftVoter of my stale directory" in lost.log_text()
    lost.wait_ready(30)
    # The quorum still serves, and the rejoined voter has the metadata written before the loss.
    assert run(create_topic(c.brokers[0].address, "after-rejoin")).error_code == 0
    other = next(n for n in c.controllers if n is not lost)
    other.kill()
    wait_until(lambda: c.leader().node_id != other.node_id, 30, "a leader without the killed voter")
    assert run(create_topic(c.brokers[0].address, "with-rejoined-voter")).error_code == 0
