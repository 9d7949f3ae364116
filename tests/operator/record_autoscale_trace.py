"""Record tests/operator/autoscale_trace.json: a real 3-broker cluster (tests/replication/harness:
1 controller + 3 brokers, separate `kopfka serve` processes) under a steady confluent-kafka
producer that bursts and comes back, scraped by the autoscaler's BrokerScraper every few
seconds. test_autoscale_trace.py replays it through the policy. Run it by hand to re-record:

    python tests/operator/record_autoscale_trace.py [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "replication")]

from harness import create_topic, new_cluster  # noqa: E402
from kopfka_operator.autoscale.metrics import BrokerScraper, ScrapeTarget  # noqa: E402
from kopfka_operator.autoscale.samples import BYTES_IN  # noqa: E402
from load_testlib import SteadyProducer  # noqa: E402

INTERVAL = 3.0  # seconds between scrapes
PHASES = (("baseline", 45.0, 300_000.0), ("burst", 60.0, 1_500_000.0), ("after", 120.0, 300_000.0))
TOPIC = "load"


async def scrape_phases(targets: list[ScrapeTarget], producer: SteadyProducer) -> dict[str, Any]:
    scraper = BrokerScraper()
    samples, produced, phases = [], [], []
    try:
        t0 = time.time()
        m0 = last = time.monotonic()
        await scraper.sample(targets)  # the baseline for the first rates
        for name, seconds, rate in PHASES:
            producer.rate = rate
            phases.append({"name": name, "start": round(time.monotonic() - m0, 3), "bytesPerSecond": rate})
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                await asyncio.sleep(INTERVAL - (time.monotonic() - m0) % INTERVAL)
                sample = await scraper.sample(targets)
                now = time.monotonic()
                row = sample.to_json()
                row["at"] = round(sample.at - t0, 3)
                samples.append(row)
                produced.append(round(producer.acked_bytes(last, now) / (now - last)))
                last = now
                print(f"{row['at']:7.1f}s {name:8s} produced {produced[-1] / 1e6:.2f} MB/s", row["values"])
    finally:
        await scraper.close()
    return {
        "description": (
            "3 brokers (1 controller), topic of 6 partitions RF 3, a steady producer of 1000-byte values "
            "at each phase's rate; each sample is BrokerScraper.sample() of the brokers' /metrics, `at` "
            "in seconds from the start; producedBytesPerSecond: the producer's acknowledged value bytes "
            "per second over the interval before each sample."
        ),
        "interval": INTERVAL,
        "phases": phases,
        "producedBytesPerSecond": produced,
        "samples": samples,
    }


def record(out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="autoscale-trace-") as tmp:
        cluster = new_cluster(Path(tmp), 3).start()
        producer: SteadyProducer | None = None
        try:
            create_topic(cluster, TOPIC, 6, 3)
            targets = [
                ScrapeTarget(b.node_id, f"kc-broker-{b.node_id}", f"http://{b.host}:{b.http_port}/metrics")
                for b in cluster.brokers
            ]
            producer = SteadyProducer(cluster.bootstrap(), TOPIC, PHASES[0][2]).start()
            time.sleep(5)  # leaders elected, the producer's pace settled
            trace = asyncio.run(scrape_phases(targets, producer))
        finally:
            if producer is not None:
                producer.stop()
            cluster.stop()
    write_trace(trace, out)


def write_trace(trace: dict[str, Any], out: Path) -> None:
    """Values rounded (bytes/s to units, ratios and percents to 4 decimals), one sample a line."""
    for row in trace["samples"]:
        row["values"] = {
            metric: {b: round(v) if metric == BYTES_IN else round(v, 4) for b, v in per.items()}
            for metric, per in row["values"].items()
        }
    head = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in trace.items() if k != "samples"]
    text = "{\n" + ",\n".join(head) + ',\n "samples": [\n'
    text += ",\n".join("  " + json.dumps(row) for row in trace["samples"]) + "\n ]\n}\n"
    json.loads(text)
    out.write_text(text)
    print(f"wrote {out} ({len(trace['samples'])} samples)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=HERE / "autoscale_trace.json")
    record(p.parse_args().out)


if __name__ == "__main__":
    main()
