"""The four Kafka clients (kafka-python, aiokafka, confluent-kafka, kcat) against a secured
listener: one `Security` description (Kafka client keys, librdkafka spelling) mapped to each
client's own options, and a produce-then-read-back round trip per client."""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import dataclass
from typing import Any

CLIENTS = ("kafka-python", "aiokafka", "confluent", "kcat")


@dataclass(frozen=True)
class Security:
    protocol: str = "PLAINTEXT"
    ca: str | None = None  # PEM CA file that signed the broker certificate
    cert: str | None = None  # client certificate (mutual TLS)
    key: str | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    def librdkafka(self) -> dict[str, str]:
        out = {"security.protocol": self.protocol.lower()}
        if self.ca:
            out["ssl.ca.location"] = self.ca
        if self.cert and self.key:
            out["ssl.certificate.location"] = self.cert
            out["ssl.key.location"] = self.key
        if self.mechanism:
            out["sasl.mechanism"] = self.mechanism
            out["sasl.username"] = self.username or ""
            out["sasl.password"] = self.password or ""
        return out

    def kafka_python(self) -> dict[str, object]:
        out: dict[str, object] = {"security_protocol": self.protocol}
        if self.protocol.endswith("SSL"):
            out.update(ssl_cafile=self.ca, ssl_check_hostname=True)
            if self.cert:
                out.update(ssl_certfile=self.cert, ssl_keyfile=self.key)
        if self.mechanism:
            out.update(
                sasl_mechanism=self.mechanism, sasl_plain_username=self.username, sasl_plain_password=self.password
            )
        return out

    def aiokafka(self) -> dict[str, object]:
        from aiokafka.helpers import create_ssl_context

        out: dict[str, object] = {"security_protocol": self.protocol}
        if self.protocol.endswith("SSL"):
            out["ssl_context"] = create_ssl_context(cafile=self.ca, certfile=self.cert, keyfile=self.key)
        if self.mechanism:
            out.update(
                sasl_mechanism=self.mechanism, sasl_plain_username=self.username, sasl_plain_password=self.password
            )
        return out


def values(n: int, big_every: int = 7) -> list[bytes]:
    """Small values and, every few, one of 100 KB: a fetch then carries >= 64 KiB of file bytes,
    which a plaintext connection sends with sendfile and a TLS one through its read/encrypt path."""
    return [(b"%05d-" % i) + (b"x" * 100_000 if i % big_every == 3 else b"v" * (i % 50)) for i in range(n)]


def roundtrip(client: str, bootstrap: str, topic: str, sec: Security, n: int = 20, timeout: float = 60) -> None:
    """Produce n values with `client`, read them back with the same client, compare."""
    sent = values(n)
    if client == "kafka-python":
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=2_000_000, **sec.kafka_python())
        try:
            for v in sent:
                p.send(topic, v)
            p.flush(timeout)
        finally:
            p.close(5)
        c = KafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            consumer_timeout_ms=int(timeout * 1000),
            **sec.kafka_python(),
        )
        try:
            c.assign([TopicPartition(topic, 0)])
            c.seek(TopicPartition(topic, 0), 0)
            got = [m.value for _, m in zip(range(n), c, strict=False)]
        finally:
            c.close()
    elif client == "aiokafka":
        got = asyncio.run(_aiokafka(bootstrap, topic, sec, sent, timeout))
    elif client == "confluent":
        from confluent_kafka import Consumer, Producer, TopicPartition

        conf = {"bootstrap.servers": bootstrap, **sec.librdkafka()}
        p = Producer({**conf, "message.max.bytes": 2_000_000})
        for v in sent:
            p.produce(topic, v)
        assert p.flush(timeout) == 0, "confluent-kafka did not deliver everything"
        c = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False})
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            got = []
            while len(got) < n:
                m = c.poll(timeout)
                assert m is not None, f"confluent-kafka consumer timed out after {len(got)}"
                assert m.error() is None, m.error()
                got.append(m.value())
        finally:
            c.close()
    elif client == "kcat":
        x = [a for k, v in sec.librdkafka().items() for a in ("-X", f"{k}={v}")]
        prod = subprocess.run(
            ["kcat", "-b", bootstrap, "-P", "-t", topic, "-X", "message.max.bytes=2000000", *x],
            input=b"\n".join(sent) + b"\n",
            capture_output=True,
            timeout=timeout,
        )
        assert prod.returncode == 0, prod.stderr.decode()
        cons = subprocess.run(
            ["kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-c", str(n), "-f", "%s\n", *x],
            capture_output=True,
            timeout=timeout,
        )
        assert cons.returncode == 0, cons.stderr.decode()
        got = cons.stdout.split(b"\n")[:n]
    else:
        raise ValueError(client)
    assert len(got) == n, f"{client}: read {len(got)} of {n}"
    assert got == sent, f"{client}: values read back differ"


async def _aiokafka(bootstrap: str, topic: str, sec: Security, sent: list[bytes], timeout: float) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=2_000_000, **sec.aiokafka())
    await p.start()
    try:
        for v in sent:
            await p.send(topic, v)
        await p.flush()
    finally:
        await p.stop()
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **sec.aiokafka())
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got: list[bytes] = []
        while len(got) < len(sent):
            batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), timeout)
            for msgs in batch.values():
                got.extend(m.value for m in msgs if m.value is not None)
        return got
    finally:
        await c.stop()


def produce_body(topic: str, value: bytes = b"v") -> dict[str, Any]:
    """A ProduceRequest v9 body with one record (for raw requests through kopfka's client)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    b.append(0, timestamp=None, key=b"k", value=value, headers=[])
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": bytes(b.build())}]}],
    }
