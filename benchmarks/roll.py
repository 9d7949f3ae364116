"""Rolling restart figures on the Kubernetes test bed (issue 13):

- time per pod restart and for a full roll of 3 controllers + 3 brokers (manual roll);
- producer latency (acks=all, RF=3, min.insync.replicas=2, idempotent, fixed rate) p50/p99
  during the roll against the same producer in the minute before it (target: p99 <= 3x);
- leadership balance afterwards: partitions led by their preferred replica (target: all).

    python benchmarks/roll.py [--rate 200] [--keep]

Needs root and the test bed binaries (e2e/testbed.sh build); brings the test bed up when it is
down and leaves it as it found it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "e2e")]

import testbed  # noqa: E402
from conftest import install_operator  # noqa: E402
from kafka_pods import client_pod, cluster_ready, create_topic, kopfka_cli  # noqa: E402
from kube_env import Kube  # noqa: E402
from testbed import build as buildlib  # noqa: E402
from testbed import cluster as bed  # noqa: E402
from testbed import components, processes  # noqa: E402
from testbed import images as imageslib  # noqa: E402

PROBE = """
import sys, time, json, os
if os.path.exists("/tmp/probe.stop"):
    os.remove("/tmp/probe.stop")
from confluent_kafka import Producer
rate, seconds, topic, bootstrap = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 0})
out = []
def done(err, msg, sent):
    out.append((sent, (time.time() - sent) * 1000, err is None))
import os
end = time.time() + seconds
i = 0
while time.time() < end and not os.path.exists("/tmp/probe.stop"):
    sent = time.time()
    p.produce(topic, str(i).encode(), on_delivery=lambda e, m, s=sent: done(e, m, s))
    i += 1
    p.poll(0)
    delay = i / rate - (time.time() - (end - seconds))
    if delay > 0:
        time.sleep(delay)
p.flush(60)
for sent, ms, ok in out:
    print(json.dumps([sent, ms, ok]))
"""


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=200.0, help="producer records per second")
    ap.add_argument("--baseline", type=float, default=60.0, help="seconds measured before the roll")
    ap.add_argument("--keep", action="store_true", help="leave the namespace and the test bed up")
    args = ap.parse_args()

    p = testbed.paths()
    images = imageslib.Images.current()
    up_here = False
    probe_up = processes.http_ok(f"{components.API_URL}/readyz", components._tls(p)) if p.pki.exists() else None
    if not (probe_up and probe_up()):
        bed.up(p, images=images)
        up_here = True
    else:
        imageslib.ensure(p, buildlib.bin_dir(p), images)
    bins = buildlib.bin_dir(p)
    kube = Kube(p.admin_kubeconfig, str(bins / "kubectl"), str(bins / "helm"), images.kopfka, images.client, "testbed")
    install_operator(kube)
    ns = kube.namespace(f"bench-roll-{uuid.uuid4().hex[:4]}")
    try:
        cluster = {
            "apiVersion": "kopfka.io/v1alpha1",
            "kind": "KafkaCluster",
            "metadata": {"name": "bench"},
            "spec": {
                "mode": "dedicated",
                "controllers": {"replicas": 3, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
                "brokers": {"replicas": 3, "storage": {"volumes": [{"id": 0, "size": "2Gi"}]}},
                "config": {"min.insync.replicas": "2", "offsets.topic.replication.factor": "3"},
            },
        }
        kube.apply(json.dumps(cluster), ns)
        bootstrap = cluster_ready(kube, "bench", ns)["status"]["bootstrapServers"]
        client = client_pod(kube, ns)
        create_topic(kube, ns, client, bootstrap, "latency", 6, 3, **{"min.insync.replicas": "2"})
        time.sleep(5)

        samples: list[tuple[float, float, bool]] = []
        total = args.baseline + 600

        def probe() -> None:
            out = kube.kubectl(
                "-n",
                ns,
                "exec",
                "-i",
                client,
                "--",
                "python3",
                "-",
                str(args.rate),
                str(total),
                "latency",
                bootstrap,
                input=PROBE,
                timeout=total + 120,
                check=False,
            )
            for line in out.splitlines():
                try:
                    samples.append(tuple(json.loads(line)))  # type: ignore[arg-type]
                except ValueError:
                    pass

        # the probe's arguments come after "-": kubectl passes them to python3
        thread = threading.Thread(target=probe, daemon=True)
        thread.start()
        time.sleep(args.baseline)
        roll_start = time.time()
        kube.kubectl("-n", ns, "annotate", "kafkacluster", "bench", "kopfka.io/manual-rolling-update=true")
        per_pod: list[tuple[str, float]] = []
        current: tuple[str, float] | None = None
        while True:
            obj = kube.get("kafkacluster", "bench", ns) or {}
            roll = (obj.get("status") or {}).get("roll") or {}
            pod = roll.get("pod")
            now = time.time()
            if pod and (current is None or current[0] != pod):
                if current is not None:
                    per_pod.append((current[0], now - current[1]))
                current = (pod, now)
            if roll.get("phase") == "Done" and (roll.get("finishedAt") or "") >= time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(roll_start)
            ):
                if current is not None:
                    per_pod.append((current[0], now - current[1]))
                break
            if now - roll_start > 900:
                raise SystemExit("the roll did not finish in 15 minutes")
            time.sleep(0.5)
        roll_end = time.time()
        kube.kubectl("-n", ns, "exec", client, "--", "touch", "/tmp/probe.stop")  # the probe stops and reports
        thread.join(180)
        before = [ms for sent, ms, ok in samples if sent < roll_start and ok]
        during = [ms for sent, ms, ok in samples if roll_start <= sent <= roll_end and ok]
        failed = sum(1 for _, _, ok in samples if not ok)
        describe = kopfka_cli(kube, ns, client, "topics", "--bootstrap-server", bootstrap, "--describe")
        preferred = led = 0
        for line in describe.splitlines():
            if "Leader:" in line and "Replicas:" in line:
                fields = line.split()
                leader = int(fields[fields.index("Leader:") + 1])
                first = int(fields[fields.index("Replicas:") + 1].split(",")[0])
                led += 1
                preferred += leader == first
        brokers = [s for n, s in per_pod if "broker" in n]
        print(f"full roll of 3 controllers + 3 brokers: {roll_end - roll_start:.1f} s")
        print("per pod (deleted -> whole again, incl. gates): " + ", ".join(f"{n} {s:.1f} s" for n, s in per_pod))
        if brokers:
            print(f"per broker restart: mean {statistics.mean(brokers):.1f} s, max {max(brokers):.1f} s")
        p99_before, p99_during = percentile(before, 0.99), percentile(during, 0.99)
        print(
            f"producer acks=all at {args.rate:.0f}/s: before p50 {percentile(before, 0.5):.1f} ms p99 "
            f"{p99_before:.1f} ms ({len(before)}); during p50 {percentile(during, 0.5):.1f} ms p99 "
            f"{p99_during:.1f} ms ({len(during)}); ratio p99 {p99_during / p99_before:.2f} (target <= 3); "
            f"failed deliveries {failed}"
        )
        print(f"leadership afterwards: {preferred}/{led} partitions led by their preferred replica")
        print(f"load average: {open('/proc/loadavg').read().split()[:3]}")
    finally:
        if not args.keep:
            kube.kubectl("delete", "namespace", ns, "--wait=false", check=False)
            if up_here:
                bed.down(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
