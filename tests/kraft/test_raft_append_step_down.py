"""A leader that steps down while an appended batch is still being flushed fails that append
with NOT_CONTROLLER instead of leaving its waiter orphaned: the QuorumController awaits appends
under its lock, so an orphaned waiter wedged every later controller request on that node (seen as
a restarted broker's BrokerRegistration hanging on a controller that had resigned mid-write)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from kopfka.metadata import records as mr
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.raft.kafka_raft import KafkaRaftClient


def test_append_fails_when_leadership_is_lost_during_the_flush(tmp_path: Path) -> None:
    async def scenario() -> None:
        # two voters, the other unreachable: nothing this leader appends can commit
        raft = KafkaRaftClient(
            node_id=1,
            cluster_id="c",
            metadata_dir=tmp_path,
            directory_id="",
            static_voters={1: ("127.0.0.1", 1), 2: ("127.0.0.1", 1)},
        )
        raft.epoch = 1
        await raft._become_leader()
        assert raft.role == "leader"
        entered, release = threading.Event(), threading.Event()
        real_flush = raft.log.flush

        def held_flush(*args: object, **kw: object) -> None:
            entered.set()
            release.wait(10)
            real_flush(*args, **kw)  # type: ignore[arg-type]

        raft.log.flush = held_flush  # type: ignore[method-assign]
        append = asyncio.create_task(raft.append([mr.NoOpRecord()]))
        assert await asyncio.to_thread(entered.wait, 10), "the append never reached the flush"
        raft._become_unattached(raft.epoch + 1)  # e.g. a Vote from a higher epoch arrived meanwhile
        assert raft.role == "unattached"
        release.set()
        try:
            with pytest.raises(KafkaError) as err:
                await asyncio.wait_for(append, 5)
            assert err.value.code == ErrorCode.not_controller
            assert not raft._waiters
        finally:
            raft.log.flush = real_flush  # type: ignore[method-assign]
            await raft.close()

    asyncio.run(scenario())
