"""Topic operator benchmark (issue 14): N Topic resources applied at once -> time until every one
is Ready (target: 1,000 in <= 60 s on 2 cores), and the operator's memory.

The operator (kopf, the Topic/Quota handlers only) runs in a child process, so its RSS is its
own; it talks to an in-memory Kubernetes API (kmock, as the unit tests use) served by this
process, and to a real `kopfka serve` broker. Figures printed:

  (1) floor: the same N topics created straight from the admin client in one CreateTopics and
      the same N objects written to the API with a status patch each (no operator): what the
      batch cannot go below;
  (2) operator: N Topics created at once, time until all Ready=True (and the Kafka topics
      verified), the ratio to the floor, and the operator's RSS (current and peak);
  (3) resync: the time until a config change made outside to every topic is put back.

Usage: python benchmarks/topics_operator.py [--topics 1000] [--partitions 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "tests" / "operator"))

NS = "bench"
TARGET_SECONDS = 60.0


def serve_operator(server_url: str, bootstrap: str, resync: float) -> None:
    """The child process: a kopf operator with the Topic/Quota handlers, until stdin closes."""
    import threading

    import kopf
    from kopfka_operator.handlers import configure_settings
    from kopfka_operator.resource_handlers import ResourceConfig, register_topics

    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=server_url)

    register_topics(registry, ResourceConfig(resync_seconds=resync, bootstrap=lambda _body: bootstrap))
    settings = kopf.OperatorSettings()
    settings.peering.standalone = True
    settings.scanning.disabled = True
    configure_settings(settings)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    asyncio.run(kopf.operator(registry=registry, settings=settings, standalone=True, namespaces=[NS], stop_flag=stop))


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"]


def topic(name: str, partitions: int) -> dict[str, Any]:
    return {
        "apiVersion": "kopfka.io/v1alpha1",
        "kind": "Topic",
        "metadata": {"name": name, "namespace": NS, "labels": {"kopfka.io/cluster": "demo"}},
        "spec": {"partitions": partitions, "replicationFactor": 1, "config": {"retention.ms": "86400000"}},
    }


async def bench(args: argparse.Namespace, bootstrap: str) -> None:
    import kmock
    from kopfka.client.admin import Admin, NewTopic
    from kopfka_operator import GROUP, VERSION
    from operator_testlib import Emulator

    n = args.topics
    kinds = (("kafkaclusters", "KafkaCluster"), ("topics", "Topic"), ("quotas", "Quota"))
    async with Emulator() as emulator, kmock.Server(emulator) as server:
        emulator.resources.load_bundled()
        for plural, kind in kinds:
            emulator.resources[f"{GROUP}/{VERSION}/{plural}"] = kmock.ResourceInfo(
                kind=kind,
                namespaced=True,
                verbs=["list", "watch", "get", "create", "patch", "update", "delete"],
                subresources=["status"],
            )
        import kopf
        from kopfka_operator.kube import KubeApi

        api = KubeApi(kopf.ConnectionInfo(server=str(server.url)))

        # (1) the floor: Kafka alone, then the API alone.
        admin = await Admin.connect(bootstrap)
        t0 = time.perf_counter()
        created = await admin.create_topics([NewTopic(f"floor-{i:05d}", args.partitions, 1) for i in range(n)])
        kafka_floor = time.perf_counter() - t0
        assert all(not isinstance(r, Exception) for r in created.values())
        t0 = time.perf_counter()
        sem = asyncio.Semaphore(64)

        async def write(i: int) -> None:
            async with sem:
                body = topic(f"floor-{i:05d}", args.partitions)
                body["metadata"]["namespace"] = "floor"
                await api.create("floor", body)
                await api.patch("Topic", "floor", f"floor-{i:05d}", {"status": {"observedGeneration": 1}}, "status")

        await asyncio.gather(*(write(i) for i in range(n)))
        api_floor = time.perf_counter() - t0
        floor = kafka_floor + api_floor
        print(
            f"(1) floor: CreateTopics x{n} in one request {kafka_floor:6.2f} s; API create + status patch x{n} "
            f"{api_floor:6.2f} s; sum {floor:6.2f} s"
        )

        await api.create(
            NS,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "KafkaCluster",
                "metadata": {"name": "demo", "namespace": NS},
                "spec": {},
            },
        )
        child = subprocess.Popen(
            [sys.executable, __file__, "--serve-operator", str(server.url), bootstrap, str(args.resync)],
            stdin=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        try:
            await asyncio.sleep(3)  # kopf up and watching
            idle_rss, _ = rss_kib(child.pid)
            names = [f"t-{i:05d}" for i in range(n)]
            t0 = time.perf_counter()
            await asyncio.gather(*(_create(api, sem, topic(name, args.partitions)) for name in names))
            applied = time.perf_counter() - t0

            async def ready_count() -> int:
                items = await api.list("Topic", NS, "")
                return sum(
                    1
                    for o in items
                    if any(
                        c["type"] == "Ready" and c["status"] == "True"
                        for c in (o.get("status") or {}).get("conditions", [])
                    )
                )

            while (count := await ready_count()) < n:
                if time.perf_counter() - t0 > 10 * TARGET_SECONDS:
                    raise SystemExit(f"only {count}/{n} Ready after {10 * TARGET_SECONDS:.0f} s")
                await asyncio.sleep(0.25)
            all_ready = time.perf_counter() - t0
            rss, hwm = rss_kib(child.pid)
            found = await admin.describe_topics(names)
            missing = [k for k, v in found.items() if isinstance(v, Exception)]
            assert not missing, missing[:5]
            verdict = "ok" if all_ready <= TARGET_SECONDS else "MISSED"
            print(
                f"(2) operator: {n} Topics applied in {applied:5.2f} s, all Ready after {all_ready:6.2f} s "
                f"(target <= {TARGET_SECONDS:.0f} s: {verdict}); ratio to floor {all_ready / floor:5.1f}"
            )
            print(
                f"    operator RSS: idle {idle_rss / 1024:6.1f} MiB, with {n} Topics {rss / 1024:6.1f} MiB, "
                f"peak {hwm / 1024:6.1f} MiB ({(rss - idle_rss) / n:5.1f} KiB per Topic)"
            )

            # (3) drift on every topic, put back by the next resync.
            await admin.incremental_alter_configs_many({(2, name): [("retention.ms", 0, "1000")] for name in names})
            t0 = time.perf_counter()
            while True:
                configs = await admin.describe_config_entries([(2, name) for name in names], ["retention.ms"])
                wrong = sum(
                    1 for v in configs.values() if isinstance(v, Exception) or any(e.value != "86400000" for e in v)
                )
                if not wrong:
                    break
                if time.perf_counter() - t0 > args.resync + 120:
                    raise SystemExit(f"{wrong} topics still drifted")
                await asyncio.sleep(0.5)
            print(
                f"(3) resync every {args.resync:.0f} s: drift on {n} topics put back {time.perf_counter() - t0:6.2f} s "
                "after it was made"
            )
        finally:
            assert child.stdin is not None
            child.stdin.close()
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
            await admin.close()
            await api.close()


async def _create(api: Any, sem: asyncio.Semaphore, body: dict[str, Any]) -> None:
    async with sem:
        await api.create(NS, body)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-operator":
        serve_operator(sys.argv[2], sys.argv[3], float(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--resync", type=float, default=20.0, help="the operator's resync interval (s)")
    args = parser.parse_args()
    from kopfka_process import KopfkaProcess

    with tempfile.TemporaryDirectory(prefix="kopfka-bench-topics-") as tmp:
        broker = KopfkaProcess(Path(tmp) / "data").start()
        try:
            asyncio.run(bench(args, broker.bootstrap))
        finally:
            broker.kill()


if __name__ == "__main__":
    main()
