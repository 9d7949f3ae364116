"""Apache Kafka as a reference peer: its tool classes and a KRaft Kafka on loopback.

`scripts/get-kafka` installs Kafka's jars into a cache directory; this module runs them the way
Kafka's bin/ scripts do (`java -cp 'libs/*' <main class> ...`) and starts 1- or 3-node combined
(broker+controller) KRaft clusters formatted with `kafka-storage format`. Tests and benchmarks
import it (tests put this directory on sys.path); `KafkaUnavailable` carries the reason the
install failed so callers can skip with it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

from kopfka_process import free_port  # noqa: E402

KAFKA_VERSION = os.environ.get("KAFKA_VERSION", "4.3.1")

# Tool name (as in Kafka's bin/, without .sh) -> main class in Kafka 4.3.
TOOLS: dict[str, str] = {
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-metadata-shell": "org.apache.kafka.shell.MetadataShell",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-replica-verification": "org.apache.kafka.tools.ReplicaVerificationTool",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-share-consumer": "org.apache.kafka.tools.VerifiableShareConsumer",
}

# Short-lived tools: small heap, serial GC and C1 only start fastest and spare the 2 shared cores.
TOOL_JVM = ("-Xmx256M", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
# What kafka-server-start.sh and kafka-run-class.sh give the broker: for fair benchmark figures.
SERVER_JVM_KAFKA_DEFAULTS = (
    "-Xmx1G",
    "-Xms1G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)
# For tests: a smaller heap and less JIT work; behaviour is the same.
SERVER_JVM_TEST = ("-Xmx512M", "-Xms64M", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")


class KafkaUnavailable(RuntimeError):
    """Kafka cannot be installed or run here; the message says why (tests skip with it)."""


@functools.cache
def kafka_home() -> Path:
    """Install (once per process; the script itself is idempotent and locked) and return the home."""
    if shutil.which("java") is None:
        raise KafkaUnavailable("no `java` on PATH: Apache Kafka needs a JRE 17+")
    try:
        out = subprocess.run(
            [str(REPO / "scripts" / "get-kafka")],
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "KAFKA_VERSION": KAFKA_VERSION},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KafkaUnavailable(f"scripts/get-kafka failed to run: {exc}") from exc
    if out.returncode != 0:
        raise KafkaUnavailable(
            f"scripts/get-kafka could not install Kafka {KAFKA_VERSION}: {out.stderr.strip()[-600:]}"
        )
    home = Path(out.stdout.strip().splitlines()[-1])
    if not (home / "libs" / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file():
        raise KafkaUnavailable(f"scripts/get-kafka reported {home} but its libs/ lack kafka_2.13-{KAFKA_VERSION}.jar")
    return home


@functools.cache
def spark_kafka_jars() -> list[Path]:
    """Spark's built-in Kafka source (spark-sql-kafka-0-10 for the installed pyspark, from Maven
    Central via `scripts/get-kafka --spark`) with its runtime dependencies, for `spark.jars`."""
    home = kafka_home()
    try:
        import pyspark
    except ImportError as exc:
        raise KafkaUnavailable(f"pyspark is not installed: {exc}") from exc
    out = subprocess.run(
        [str(REPO / "scripts" / "get-kafka"), "--spark"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "KAFKA_VERSION": KAFKA_VERSION, "PYTHON": sys.executable},
    )
    if out.returncode != 0:
        raise KafkaUnavailable(
            f"spark-sql-kafka-0-10 for pyspark {pyspark.__version__} is not available: {out.stderr.strip()[-600:]}"
        )
    jars = sorted((home / f"spark-{pyspark.__version__}" / "jars").glob("*.jar"))
    if not any(j.name.startswith("spark-sql-kafka-0-10") for j in jars):
        raise KafkaUnavailable(f"scripts/get-kafka --spark left no spark-sql-kafka-0-10 jar in {home}")
    return jars


def java_command(
    main: str, args: Sequence[str], *, jvm: Sequence[str] = TOOL_JVM, log_config: str = "tools"
) -> list[str]:
    home = kafka_home()
    return [
        "java",
        *jvm,
        f"-Dlog4j2.configurationFile={HERE / f'log4j2-{log_config}.properties'}",
        "-cp",
        str(home / "libs" / "*"),
        main,
        *args,
    ]


@functools.cache
def _tools_archive() -> Path:
    """Where the class-data-sharing archive of the tools lives: one per JVM and jar set (a JVM
    refuses an archive made by another JVM or for other jars)."""
    home = kafka_home()
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    jars = "\n".join(sorted(p.name for p in (home / "libs").glob("*.jar")))
    return home / f"tools-{hashlib.sha1((java + jars).encode()).hexdigest()[:12]}.jsa"


def _with_class_sharing(jvm: Sequence[str], talks_to_a_broker: bool) -> tuple[list[str], Path | None]:
    """The tool JVM with the shared class archive (tools start in about half the time), or, the
    first time a tool talks to a broker (so the admin client's classes are in it), options that
    write it at exit; returns the temporary file to move into place."""
    archive = _tools_archive()
    quiet = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    if archive.exists():
        return [*jvm, f"-XX:SharedArchiveFile={archive}", *quiet], None
    if not talks_to_a_broker:
        return list(jvm), None
    tmp = archive.with_suffix(f".{os.getpid()}.tmp")
    return [*jvm, f"-XX:ArchiveClassesAtExit={tmp}", *quiet], tmp


def run_tool(
    tool: str,
    *args: str,
    timeout: float = 120,
    check: bool = True,
    input: str | None = None,
    jvm: Sequence[str] = TOOL_JVM,
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools by its bin/ name, e.g. run_tool("kafka-topics", "--list", ...)."""
    main = TOOLS.get(tool, tool)
    archive_tmp = None
    if jvm is TOOL_JVM:
        jvm, archive_tmp = _with_class_sharing(jvm, "--bootstrap-server" in args)
    proc = subprocess.run(
        java_command(main, args, jvm=jvm),
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
    )
    if archive_tmp is not None and archive_tmp.exists():
        os.replace(archive_tmp, _tools_archive())
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{tool} {' '.join(args)} exited {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}"
            f"\n--- stderr\n{proc.stderr[-3000:]}"
        )
    return proc


def random_cluster_id() -> str:
    return run_tool("kafka-storage", "random-uuid").stdout.strip()


# Broker settings that make a 1-node cluster usable (internal topics at RF 1) and tests quick.
BASE_PROPS: dict[str, str] = {
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
}


class KafkaNode:
    """One combined broker+controller `kafka.Kafka` process on loopback."""

    def __init__(self, root: Path, node_id: int, host: str = "127.0.0.1") -> None:
        self.node_id = node_id
        self.host = host
        self.dir = root / f"kafka-{node_id}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port(host)
        self.controller_port = free_port(host)
        self.config = self.dir / "server.properties"
        self.log_dir = self.dir / "logs"
        self.log_path = self.dir / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def voter(self) -> str:
        return f"{self.node_id}@{self.host}:{self.controller_port}"

    def write_config(self, voters: str, props: Mapping[str, str]) -> None:
        base = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.quorum.voters": voters,
            "log.dirs": str(self.log_dir),
            **BASE_PROPS,
            **props,
        }
        self.config.write_text("".join(f"{k}={v}\n" for k, v in base.items()))

    def format(self, cluster_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return run_tool("kafka-storage", "format", "-t", cluster_id, "-c", str(self.config), *extra)

    def start(self, jvm: Sequence[str] = SERVER_JVM_TEST, *, own_session: bool = False) -> KafkaNode:
        """`own_session`: a session of its own, as a separately started server has (Linux's
        autogroup scheduler then gives it its own CPU share; benchmarks/replication.py)."""
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            java_command("kafka.Kafka", [str(self.config)], jvm=jvm, log_config="server"),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=own_session,
        )
        log.close()
        return self

    def wait_ready(self, timeout: float) -> None:
        """Ready once the broker has logged its start-up and its client listener accepts."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kafka node {self.node_id} exited {self.proc.returncode}:\n{self.log_tail()}")
            if "Kafka Server started" in self.log_text():
                try:
                    with socket.create_connection((self.host, self.port), timeout=0.5):
                        return
                except OSError:
                    pass
            time.sleep(0.1)
        raise TimeoutError(f"Kafka node {self.node_id} not ready after {timeout}s:\n{self.log_tail()}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, n: int = 4000) -> str:
        return self.log_text()[-n:]

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM: Kafka's controlled shutdown, logs closed cleanly (.kafka_cleanshutdown).
        Returns the exit status (Kafka exits 143 after SIGTERM)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class KafkaCluster:
    """N combined-mode KRaft nodes with a static quorum (controller.quorum.voters), on loopback."""

    def __init__(self, root: Path, nodes: int = 1, props: Mapping[str, str] | None = None) -> None:
        self.root = Path(root)
        self.nodes = [KafkaNode(self.root, i + 1) for i in range(nodes)]
        self.props = dict(props or {})
        if nodes > 1:
            rf = str(min(3, nodes))
            self.props.setdefault("offsets.topic.replication.factor", rf)
            self.props.setdefault("transaction.state.log.replication.factor", rf)
        self.cluster_id = ""

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def format(self, cluster_id: str | None = None, *extra: str) -> KafkaCluster:
        """`extra`: more `kafka-storage format` arguments (e.g. `--feature streams.version=0`)."""
        self.cluster_id = cluster_id or random_cluster_id()
        voters = ",".join(n.voter for n in self.nodes)
        for n in self.nodes:
            n.write_config(voters, self.props)
            n.format(self.cluster_id, *extra)
        return self

    def start(
        self, timeout: float = 120, jvm: Sequence[str] = SERVER_JVM_TEST, *, own_sessions: bool = False
    ) -> KafkaCluster:
        for n in self.nodes:
            n.start(jvm, own_session=own_sessions)
        for n in self.nodes:
            n.wait_ready(timeout)
        return self

    def stop(self, timeout: float = 60) -> None:
        """Clean shutdown of all nodes at once: one by one, the last ones would lose the quorum
        their controlled shutdown needs and hang."""
        for n in self.nodes:
            if n.alive:
                assert n.proc is not None
                n.proc.send_signal(signal.SIGTERM)
        for n in self.nodes:
            n.stop(timeout)

    def kill(self) -> None:
        for n in self.nodes:
            n.kill()

    def tool(self, tool: str, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
        """A tool run against this cluster (`--bootstrap-server` added first)."""
        return run_tool(tool, "--bootstrap-server", self.bootstrap, *args, **kw)  # type: ignore[arg-type]
