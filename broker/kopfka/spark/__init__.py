"""PySpark data source for kopfka (and any Kafka-compatible broker): ``format("kopfka")``.

Needs the ``spark`` extra (``pip install kopfka[spark]``). Register it once per session::

    import kopfka.spark
    kopfka.spark.register(spark)
    spark.read.format("kopfka").option("kafka.bootstrap.servers", "...").option("subscribe", "t")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession) -> None:
    """Register the ``kopfka`` short name with ``spark`` (Python data sources are per session)."""
    from kopfka.spark.source import KopfkaDataSource

    spark.dataSource.register(KopfkaDataSource)
