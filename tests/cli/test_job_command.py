"""``jetlet job JOB``: why a job failed, when it ran, its restarts, snapshot and metrics (issue 16 item 5).

A cancelled job shows CANCELLED, apart from a job that failed (Jet's state for
both is FAILED), in ``jetlet job`` and in ``jetlet list-jobs --all``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from jetlet import Pipeline, Sinks, Sources, errors
from jetlet.local_cluster import local_cluster
from jetlet.testing import wait_until

pytestmark = pytest.mark.timeout(120)


def _fail_on_three(item: int) -> int:
    if item == 3:
        raise ValueError(f"bad item {item}")
    return item


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with local_cluster(2) as client:
        yield client


def _jetlet(cluster: Any, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "jetlet", "-a", cluster.address, f"--token={cluster.token}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_a_failed_job_shows_its_failure_and_the_users_traceback_once(cluster: Any) -> None:
    p = Pipeline()
    p.read_from(Sources.items(1, 2, 3, 4)).map(_fail_on_three).write_to(Sinks.list("job-cmd-failed"))
    failed = cluster.new_job(p)
    with pytest.raises(errors.JobFailedError):
        failed.join(60)
    shown = _jetlet(cluster, "job", failed.id_string)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"job {failed.name} ({failed.id_string})"
    assert "  status:      FAILED" in lines
    assert any(line.startswith("  completed:   ") for line in lines)
    assert any(line.startswith("  failure:     ") and "ValueError: bad item 3" in line for line in lines)
    assert shown.stdout.count("Traceback (most recent call last)") == 1
    assert "in _fail_on_three" in shown.stdout and "jetlet/" not in shown.stdout


def test_a_cancelled_job_shows_cancelled_apart_from_failed(cluster: Any) -> None:
    p = Pipeline()
    p.read_from(
        Sources.stream_from_generator(lambda context: iter(range(10**9)))
    ).without_timestamps().write_to(Sinks.noop())
    running = cluster.new_job(p)
    wait_until(lambda: running.status.value == "RUNNING", "the job to run", 60)
    running.cancel()
    shown = _jetlet(cluster, "job", running.name)
    assert "  status:      CANCELLED" in shown.stdout.splitlines(), shown.stdout
    listed = _jetlet(cluster, "list-jobs", "--all")
    row = next(line for line in listed.stdout.splitlines() if line.startswith(running.id_string))
    assert row.split()[1] == "CANCELLED"


def test_an_unknown_job_exits_2_naming_it(cluster: Any) -> None:
    shown = _jetlet(cluster, "job", "no-such-job")
    assert shown.returncode == 2 and "no-such-job" in shown.stderr
