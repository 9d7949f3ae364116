"""One shared local[2] SparkSession and one kopfka broker for every Spark test.

A session costs ~8 s and a streaming query ~2.6 GB, so all tests share them (and each test uses
its own topics). Skips the whole directory when pyspark or Java is missing.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kopfka_process import KopfkaProcess


def _missing() -> str | None:
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as e:
        return f"pyspark/pyarrow not installed ({e}); pip install 'kopfka[spark]'"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Java not found (Spark needs a JRE 17+)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    reason = _missing()
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.spark)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KopfkaProcess]:
    """A kopfka broker shared by all Spark tests."""
    proc = KopfkaProcess(tmp_path_factory.mktemp("spark-kopfka") / "data").start()
    try:
        yield proc
    finally:
        proc.kill()


def spark_kafka_jars() -> tuple[list[Path], str | None]:
    """Spark's built-in Kafka source jars (scripts/get-kafka --spark), or why they are missing."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "kafkaref"))
    from kafka_ref import KafkaUnavailable
    from kafka_ref import spark_kafka_jars as jars

    try:
        return jars(), None
    except KafkaUnavailable as exc:
        return [], str(exc)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one SparkSession of the test run, with format("kopfka") registered and, when it can be
    installed, Spark's own format("kafka") on the classpath."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    kafka_jars, _ = spark_kafka_jars()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    import kopfka.spark
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kopfka-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.pollingDelay", "10")
        .config("spark.python.worker.reuse", "true")
        .config("spark.jars", ",".join(str(j) for j in kafka_jars))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    kopfka.spark.register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def bootstrap(spark_broker: KopfkaProcess) -> str:
    return spark_broker.bootstrap


def pytest_configure(config: pytest.Config) -> None:
    # pyspark 4.3 warns about pandas 3 on every Arrow conversion; not our concern here.
    config.addinivalue_line("filterwarnings", "ignore:PySpark does not yet fully support pandas")


@pytest.fixture(scope="session")
def kafka_source(spark: Any) -> Any:
    """The session, when Spark's built-in Kafka source is on its classpath (else skip, with why)."""
    jars, reason = spark_kafka_jars()
    if not jars:
        pytest.skip(f"Spark's Kafka source (spark-sql-kafka-0-10) unavailable: {reason}")
    return spark
