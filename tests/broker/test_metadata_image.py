"""MetadataImage/Delta: replaying in pieces equals one full replay; a snapshot (the image
written back as records) plus the tail equals replaying the whole log."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from kopfka import uuids
from kopfka.metadata import records as r
from kopfka.metadata.image import MetadataDelta, MetadataImage, Provenance, replay

TOPICS = ["a", "b", "c"]
IDS = {t: uuids.to_str(uuid.UUID(int=101 + i)) for i, t in enumerate(TOPICS)}  # as Kafka would write them


@st.composite
def record_logs(draw: st.DrawFn) -> list[r.MetadataRecord]:
    """Valid record sequences: partitions only for live topics, changes only for existing ones."""
    out: list[r.MetadataRecord] = [r.FeatureLevelRecord("metadata.version", 30)]
    live: dict[str, int] = {}
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(
            st.sampled_from(["topic", "partition", "change", "remove", "config", "broker", "fence", "quota", "pid"])
        )
        name = draw(st.sampled_from(TOPICS))
        if kind == "topic" and name not in live:
            out.append(r.TopicRecord(name, IDS[name]))
            live[name] = 0
        elif kind == "partition" and name in live:
            out.append(r.PartitionRecord(live[name], IDS[name], (1, 2), (1, 2), 1))
            live[name] += 1
        elif kind == "change" and live.get(name):
            pid = draw(st.integers(0, live[name] - 1))
            out.append(
                r.PartitionChangeRecord(
                    pid,
                    IDS[name],
                    isr=draw(st.sampled_from([(1,), (1, 2), None])),
                    leader=draw(st.sampled_from([1, 2, None])),
                )
            )
        elif kind == "remove" and name in live:
            out.append(r.RemoveTopicRecord(IDS[name]))
            del live[name]
        elif kind == "config":
            out.append(
                r.ConfigRecord(
                    2,
                    name,
                    draw(st.sampled_from(["retention.ms", "segment.ms"])),
                    draw(st.sampled_from(["1", "2", None])),
                )
            )
        elif kind == "broker":
            bid = draw(st.integers(1, 3))
            out.append(
                r.RegisterBrokerRecord(
                    bid,
                    f"00000000-0000-0000-0000-{bid:012d}",
                    draw(st.integers(0, 2)),
                    (r.Endpoint("PLAINTEXT", "h", bid),),
                )
            )
        elif kind == "fence":
            out.append(
                r.BrokerRegistrationChangeRecord(
                    draw(st.integers(1, 3)), draw(st.integers(0, 2)), fenced=draw(st.booleans())
                )
            )
        elif kind == "quota":
            out.append(
                r.ClientQuotaRecord(
                    (("user", draw(st.sampled_from(["u1", None]))),),
                    "producer_byte_rate",
                    draw(st.sampled_from([1024.0, None])),
                )
            )
        elif kind == "pid":
            out.append(r.ProducerIdsRecord(1, 0, draw(st.integers(0, 5000))))
    return out


def comparable(img: MetadataImage) -> tuple[object, ...]:
    return (
        dict(img.features),
        dict(img.brokers),
        {k: (v.name, dict(v.partitions)) for k, v in img.topics_by_id.items()},
        set(img.topics_by_name),
        {k: dict(v) for k, v in img.configs.items()},
        {k: dict(v) for k, v in img.client_quotas.items()},
        img.next_producer_id,
    )


@settings(max_examples=150, deadline=None)
@given(record_logs(), st.lists(st.integers(1, 10), min_size=1, max_size=8))
def test_incremental_deltas_equal_full_replay(log: list[r.MetadataRecord], cuts: list[int]) -> None:
    full = replay(log)
    img = MetadataImage()
    pos = 0
    for size in cuts * (len(log) // max(sum(cuts), 1) + 1):
        if pos >= len(log):
            break
        delta = MetadataDelta(img)
        delta.replay_all(log[pos : pos + size])
        img = delta.apply(Provenance(pos + size - 1))
        pos += size
    assert comparable(img) == comparable(full)


@settings(max_examples=150, deadline=None)
@given(record_logs(), st.integers(0, 40))
def test_snapshot_then_tail_equals_whole_log(log: list[r.MetadataRecord], cut: int) -> None:
    cut = min(cut, len(log))
    head = replay(log[:cut])
    snapshot_records = list(head.to_records())
    assert all(r.decode(r.encode(rec)) == rec for rec in snapshot_records)
    from_snapshot = replay(log[cut:], replay(snapshot_records))
    assert comparable(from_snapshot) == comparable(replay(log))


def test_structural_sharing_keeps_untouched_topics() -> None:
    base = replay(
        [
            r.TopicRecord("a", IDS["a"]),
            r.PartitionRecord(0, IDS["a"], (1,), (1,), 1),
            r.TopicRecord("b", IDS["b"]),
            r.PartitionRecord(0, IDS["b"], (1,), (1,), 1),
        ]
    )
    delta = MetadataDelta(base)
    delta.replay(r.PartitionChangeRecord(0, IDS["b"], isr=(1,), leader=1))
    nxt = delta.apply(Provenance(5))
    assert nxt.topics_by_id[IDS["a"]] is base.topics_by_id[IDS["a"]]
    assert nxt.topics_by_id[IDS["b"]].partitions[0].leader_epoch == 1
    assert nxt.brokers is base.brokers
