"""Example pipeline: JSON events from a kopfka topic -> 1-minute windows -> Parquet + a topic.

    pip install 'kopfka[spark]'
    python examples/spark_pipeline.py --bootstrap 127.0.0.1:9092 --demo --available-now

Events look like {"user": "u1", "action": "click", "amount": 3.5, "ts": "2024-05-01T12:00:03Z"}.
The same code runs on Spark's built-in connector by changing FORMAT to "kafka" (with
--packages org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>): options and columns are
the same.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from datetime import UTC, datetime, timedelta

FORMAT = "kopfka"


def produce_demo_events(bootstrap: str, topic: str, count: int) -> None:
    """Write ``count`` random events (creating the topic if needed) so the demo has input."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        try:
            fut.result(30)
        except Exception as e:  # already exists is fine for a demo
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    start = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    for i in range(count):
        event: dict[str, str | float] = {
            "user": f"u{random.randint(1, 5)}",
            "action": random.choice(["click", "view", "buy"]),
            "amount": round(random.uniform(0, 10), 2),
            "ts": (start + timedelta(seconds=i * 3)).isoformat().replace("+00:00", "Z"),
        }
        producer.produce(topic, json.dumps(event).encode(), key=str(event["user"]).encode())
        producer.poll(0)
    producer.flush(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--input-topic", default="events")
    ap.add_argument("--output-topic", default="events-per-minute")
    ap.add_argument("--parquet", default="/tmp/kopfka-pipeline/parquet")
    ap.add_argument("--checkpoints", default="/tmp/kopfka-pipeline/checkpoints")
    ap.add_argument("--available-now", action="store_true",
                    help="process what is in the topic now, then stop (default: run forever)")
    ap.add_argument("--demo", action="store_true", help="first produce 200 sample events")
    args = ap.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import kopfka.spark
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    if args.demo:
        produce_demo_events(args.bootstrap, args.input_topic, 200)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": args.bootstrap})
        for fut in admin.create_topics([NewTopic(args.output_topic, 1, 1)]).values():
            try:
                fut.result(30)
            except Exception as e:
                if "TOPIC_ALREADY_EXISTS" not in str(e):
                    raise

    spark = SparkSession.builder.appName("kopfka-pipeline").getOrCreate()
    kopfka.spark.register(spark)

    events = (
        spark.readStream.format(FORMAT)
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input_topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10000")
        .load()
        .select(F.from_json(F.col("value").cast("string"),
                            "user string, action string, amount double, ts timestamp").alias("e"))
        .select("e.*")
        .withWatermark("ts", "2 minutes")
    )
    per_minute = (
        events.groupBy(F.window("ts", "1 minute").alias("w"), "action")
        .agg(F.count("*").alias("events"), F.round(F.sum("amount"), 2).alias("amount"))
        .select(F.col("w.start").alias("minute"), "action", "events", "amount")
    )

    def trigger(writer):  # type: ignore[no-untyped-def]
        return (writer.trigger(availableNow=True) if args.available_now
                else writer.trigger(processingTime="10 seconds"))

    # Sink 1: Parquet files (append mode: a window is written once the watermark passes it).
    to_parquet = trigger(
        per_minute.writeStream.format("parquet").outputMode("append")
        .option("path", args.parquet)
        .option("checkpointLocation", f"{args.checkpoints}/parquet")
    ).start()
    # Sink 2: a result topic, one JSON record per (minute, action), keyed by the action.
    to_topic = trigger(
        per_minute.select(F.col("action").alias("key"),
                          F.to_json(F.struct("minute", "action", "events", "amount"))
                          .alias("value"))
        .writeStream.format(FORMAT).outputMode("append")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.output_topic)
        .option("checkpointLocation", f"{args.checkpoints}/topic")
    ).start()

    if args.available_now:
        to_parquet.awaitTermination()
        to_topic.awaitTermination()
        spark.read.parquet(args.parquet).orderBy("minute", "action").show(10, truncate=False)
        written = (spark.read.format(FORMAT).option("kafka.bootstrap.servers", args.bootstrap)
                   .option("subscribe", args.output_topic).load().count())
        print(f"{written} records in topic {args.output_topic}")
    else:
        while to_parquet.isActive and to_topic.isActive:
            time.sleep(5)
    spark.stop()


if __name__ == "__main__":
    main()
