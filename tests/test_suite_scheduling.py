"""The suite's own scheduling: each heavy test folder runs whole on one pytest-xdist worker.

tests/kube and tests/spark start a heavy process in a session fixture (a
Kubernetes control plane, a Spark JVM). If their tests were spread over both
workers, each worker would start its own, and the suite would take minutes
longer without failing. So this test runs a small copy of the layout: the
suite's own conftest.py, eight tests in each heavy folder and eight beside
them, under ``-n 2 --dist loadgroup`` as ``make test`` runs. Each test
writes down its worker; every heavy folder must have run on one worker, and
the run as a whole on both (the check that the nested run really had two).

Which worker the light tests land on is a race: a worker that finishes its
heavy folder early may take all of them. The whole run covering both workers
is not a race: xdist hands each worker its first units before any runs.
"""

from __future__ import annotations

import collections
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(120)

_TEST_FILE = """
import os

import pytest


@pytest.mark.parametrize("n", range(8))
def test_notes_its_worker(n: int) -> None:
    line = f"{__file__} {os.environ['PYTEST_XDIST_WORKER']}\\n"
    with open(os.environ["WORKERS_FILE"], "a") as notes:
        notes.write(line)
"""


def test_each_heavy_folder_runs_whole_on_one_worker(tmp_path: pathlib.Path) -> None:
    suite = pathlib.Path(__file__).parent
    (tmp_path / "tests").mkdir()
    shutil.copy(suite / "conftest.py", tmp_path / "tests" / "conftest.py")
    for folder in ("kube", "spark", "engine"):
        (tmp_path / "tests" / folder).mkdir()
        (tmp_path / "tests" / folder / f"test_{folder}_worker.py").write_text(_TEST_FILE)
    notes = tmp_path / "workers.txt"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "xdist.plugin", "-p", "no:cacheprovider",
         "-n", "2", "--dist", "loadgroup", "tests"],
        cwd=tmp_path, env={**os.environ, "WORKERS_FILE": str(notes), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        capture_output=True, text=True, timeout=100, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    workers: dict[str, set[str]] = collections.defaultdict(set)
    for line in notes.read_text().splitlines():
        path, worker = line.split()
        workers[pathlib.Path(path).parent.name].add(worker)
    assert len(workers["kube"]) == 1, workers
    assert len(workers["spark"]) == 1, workers
    assert set().union(*workers.values()) == {"gw0", "gw1"}, workers
