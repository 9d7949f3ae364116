"""The ``kopfka`` PySpark data source: Spark's Kafka connector options and schema, in Python.

Spark calls ``__init__`` (and ``schema``) when a query is defined (``load()``, ``save()``,
``start()``), so option errors surface there, before any task is scheduled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from kopfka.spark.options import KopfkaOptionError, SinkOptions, parse_options
from kopfka.spark.reader import KopfkaBatchReader, KopfkaStreamReader, kafka_schema
from kopfka.spark.writer import KopfkaBatchWriter, KopfkaStreamWriter, sink_layout


class KopfkaDataSource(DataSource):
    """``spark.read / readStream / write / writeStream .format("kopfka")``."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        super().__init__(options)  # type: ignore[arg-type]
        self.parsed = parse_options(options)
        self.parsed.check_if_source()

    @classmethod
    def name(cls) -> str:
        return "kopfka"

    def schema(self) -> StructType:
        include = self.parsed.raw.get("includeheaders", "false").strip().lower() == "true"
        return kafka_schema(include)

    def _check_schema(self, schema: StructType, include_headers: bool) -> None:
        expected = kafka_schema(include_headers)
        if schema.simpleString() != expected.simpleString():
            raise KopfkaOptionError(
                "the kopfka source has a fixed schema and cannot be set with a custom one; "
                f"expected {expected.simpleString()}, got {schema.simpleString()}"
            )

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = self.parsed.source("batch")
        self._check_schema(schema, opts.include_headers)
        return KopfkaBatchReader(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = self.parsed.source("stream")
        self._check_schema(schema, opts.include_headers)
        return KopfkaStreamReader(opts)

    def _sink(self, overwrite: bool) -> SinkOptions:
        if overwrite:
            raise KopfkaOptionError(
                "save mode Overwrite is not allowed for kopfka (a topic is append-only); "
                "use mode('append')"
            )
        return self.parsed.sink()

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        opts = self._sink(overwrite)
        return KopfkaBatchWriter(opts, sink_layout(schema, opts))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts = self._sink(overwrite)
        return KopfkaStreamWriter(opts, sink_layout(schema, opts))
