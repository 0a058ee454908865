"""One local SparkSession for the whole test run (it takes 15-25 s to start), and Spark-written data.

The session runs Python workers with this virtualenv's interpreter
(``PYSPARK_PYTHON``) and finds ``pyspark_jetlet`` on ``PYTHONPATH`` (the
editable install's finder is invisible to ``pkgutil.iter_modules``, which
Spark uses to auto-register ``pyspark_*`` data sources; an installed wheel
puts the package on ``site-packages`` itself). ``local[2, 2]``: two task
slots, and a failed task is retried once. The JVM is stopped at the end of
the run and its process reaped.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

WORKER_DIR = pathlib.Path(__file__).resolve().parents[2] / "worker"

try:  # without the [spark] extra these tests cannot even be collected: skip the directory
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError:
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    path = os.environ.get("PYTHONPATH", "")
    if str(WORKER_DIR) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(WORKER_DIR), path) if p)
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2, 2]")
        .appName("jetlet-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
        .config("spark.sql.streaming.schemaInference", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
        gateway = SparkContext._gateway
        process: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
        if gateway is not None:
            gateway.shutdown()
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()  # the JVM's gateway server exits when its stdin closes
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)
        SparkContext._gateway = None
        SparkContext._jvm = None
