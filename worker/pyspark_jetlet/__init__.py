"""Registers the Spark data source ``"jetlet"``: Spark imports ``pyspark_*`` modules with a ``DefaultSource``.

Installed with ``pip install 'jetlet[spark]'``; then, with no registration::

    df.write.format("jetlet").mode("append").save("/shared/exchange")
    spark.readStream.format("jetlet").load("/shared/jetlet-output")

See :mod:`jetlet.spark.datasource`.
"""

from __future__ import annotations

from jetlet.spark.datasource import JetletDataSource

DefaultSource = JetletDataSource

__all__ = ["DefaultSource", "JetletDataSource"]
