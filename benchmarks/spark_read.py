"""Spark batch-read benchmark (issue 9): format("kopfka") vs. a plain Kafka client.

Fills a topic with N MiB of 1 KiB records on a fresh `kopfka serve`, then measures
  (1) a plain confluent-kafka consumer in one process reading every record (assign, no group),
  (2) spark.read.format("kopfka")...load().count() on local[2] (first run: cold Python workers;
      second run: warm), and
  (3) the same DataFrame aggregated over the value bytes (sum(length(value))),
and prints records/s, MB/s and the ratio Spark / plain client.

and, when Spark's own Kafka source can be installed (scripts/get-kafka --spark), (4) the same
count() and aggregate through format("kafka") on the same data: its rate, the ratio
format("kopfka") / format("kafka") (target >= 0.8) and whether both give identical results.

Usage: python benchmarks/spark_read.py [--mb 1024] [--partitions 4] [--record-size 1024]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "kafkaref"))

from kopfka_process import KopfkaProcess

MiB = 1 << 20


def fill(bootstrap: str, topic: str, partitions: int, total: int, record: int) -> int:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)
    time.sleep(1)
    errors: list[object] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20,
                  "batch.size": MiB, "enable.idempotence": False,
                  "queue.buffering.max.kbytes": 512 * 1024, "message.timeout.ms": 120_000,
                  "on_delivery": lambda err, msg: errors.append(err) if err else None})
    value = os.urandom(record)
    n = total // record
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, key=b"%010d" % i, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
                if errors:
                    raise RuntimeError(f"produce failed: {errors[0]}") from None
    assert p.flush(600) == 0
    if errors:
        raise RuntimeError(f"produce failed for {len(errors)} records: {errors[0]}")
    print(f"filled {n} records ({n * (record + 10) / MiB:.0f} MiB of keys+values) in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    return n


def plain_client(bootstrap: str, topic: str, partitions: int) -> tuple[int, int, float]:
    """One process, one consumer: every record of every partition, from 0 to the end."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "enable.partition.eof": True, "auto.offset.reset": "error"})
    t0 = time.perf_counter()
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records = size = 0
    eof: set[int] = set()
    while len(eof) < partitions:
        for m in c.consume(4096, 1.0):
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition() or 0)
                    continue
                raise RuntimeError(err.str())
            records += 1
            size += len(m.value() or b"") + len(m.key() or b"")
    dt = time.perf_counter() - t0
    c.close()
    return records, size, dt


def compare_with_kafka_source(spark: object, bootstrap: str, topic: str, n: int, size: int, ours: object) -> None:
    """The same reads through Spark's format("kafka"): rate, ratio, identical results."""
    from pyspark.sql import functions as F

    theirs = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)  # type: ignore[attr-defined]
              .option("subscribe", topic).load())
    rates = {}
    for name, df in (("kafka", theirs), ("kopfka", ours)):
        best = 0.0
        for _ in range(2):  # cold, then warm: the better of the two
            t0 = time.perf_counter()
            got = df.count()  # type: ignore[attr-defined]
            dt = time.perf_counter() - t0
            assert got == n, (name, got, n)
            best = max(best, got / dt)
        rates[name] = best
        print(f"spark format('{name}') count(): {best:,.0f} records/s, {best * size / n / MiB:.1f} MB/s", flush=True)
    print(f"format('kopfka') / format('kafka') read throughput: {rates['kopfka'] / rates['kafka']:.2f} "
          "(target >= 0.8)", flush=True)

    def digest(df: object) -> list[object]:
        return sorted(tuple(r) for r in df.groupBy("partition").agg(  # type: ignore[attr-defined]
            F.count("*"), F.min("offset"), F.max("offset"), F.sum(F.crc32("value")), F.sum(F.crc32("key"))
        ).collect())

    same = digest(theirs) == digest(ours)
    print(f"identical results (per partition: count, offsets, value and key checksums): {same}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mb", type=int, default=1024, help="topic size in MiB (default 1024)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--data-dir", type=Path, default=None)
    args = ap.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    tmp = Path(args.data_dir or tempfile.mkdtemp(prefix="kopfka-spark-bench-"))
    broker = KopfkaProcess(tmp / "data").start()
    try:
        topic = "spark-bench"
        n = fill(broker.bootstrap, topic, args.partitions, args.mb * MiB, args.record_size)

        records, size, dt = plain_client(broker.bootstrap, topic, args.partitions)
        assert records == n, (records, n)
        base_rps, base_mbs = records / dt, size / dt / MiB
        print(f"plain confluent-kafka consumer (1 process): {records} records in {dt:.1f} s = "
              f"{base_rps:,.0f} records/s, {base_mbs:.1f} MB/s", flush=True)

        import kopfka.spark
        from kafka_ref import KafkaUnavailable, spark_kafka_jars
        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F

        try:
            kafka_jars = [str(j) for j in spark_kafka_jars()]
        except KafkaUnavailable as exc:
            kafka_jars = []
            print(f"Spark's Kafka source unavailable ({exc}): format('kafka') not measured", flush=True)
        spark = (SparkSession.builder.master("local[2]").appName("kopfka-spark-bench")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.memory", "2g").config("spark.jars", ",".join(kafka_jars))
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        kopfka.spark.register(spark)
        df = (spark.read.format("kopfka").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).load())
        for label in ("count(), cold workers", "count(), warm workers"):
            t0 = time.perf_counter()
            got = df.count()
            dt = time.perf_counter() - t0
            assert got == n, (got, n)
            print(f"spark format('kopfka') {label}: {got} records in {dt:.1f} s = "
                  f"{got / dt:,.0f} records/s, {size / dt / MiB:.1f} MB/s; ratio to plain "
                  f"client {got / dt / base_rps:.2f}", flush=True)
        t0 = time.perf_counter()
        row = df.agg(F.count("*").alias("n"),
                     F.sum(F.length("value") + F.length("key")).alias("bytes")).collect()[0]
        dt = time.perf_counter() - t0
        assert row.n == n and row.bytes == size, (row, n, size)
        print(f"spark sum(length(key)+length(value)): {row.n} records in {dt:.1f} s = "
              f"{row.n / dt:,.0f} records/s, {size / dt / MiB:.1f} MB/s; ratio to plain client "
              f"{row.n / dt / base_rps:.2f}", flush=True)
        if kafka_jars:
            compare_with_kafka_source(spark, broker.bootstrap, topic, n, size, df)
        spark.stop()
    finally:
        broker.kill()
        if args.data_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
