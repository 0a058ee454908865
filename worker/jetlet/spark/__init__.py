"""Spark connectors: Spark tables and streams as jetlet sources and sinks, through PySpark.

Install with ``pip install 'jetlet[spark]'``. Spark prepares and serves data;
jetlet's members read and write it as Parquet with pyarrow, in parallel:

* :class:`SparkSources` — ``dataframe(df, uri)`` and ``table(uri)`` (the
  hand-off source: Spark writes Parquet, members read their row groups),
  ``stream(uri)`` (what Spark writes with ``format("jetlet")``);
* :class:`SparkSinks` — ``parquet(uri)`` (two-phase Parquet files, Spark
  reads exactly the committed ones) and ``dataframe()`` (small results);
* the Spark data source ``"jetlet"`` (:mod:`jetlet.spark.datasource`,
  registered automatically by the ``pyspark_jetlet`` module).

See ``docs/spark.md`` for guarantees and when to use which.
"""

from __future__ import annotations

from jetlet.spark.sinks import DataFrameSink, SparkSinks
from jetlet.spark.sources import SparkSources

__all__ = ["DataFrameSink", "SparkSinks", "SparkSources"]
