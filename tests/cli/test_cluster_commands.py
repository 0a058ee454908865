"""The cluster commands of the ``jetlet`` CLI against a real 2-member local cluster.

Commands run in-process through ``cli.main`` (output captured), and one end
to end as a subprocess, as a user's script would run them. Exit codes: 0 ok,
1 failed, 2 bad usage or input, 3 unreachable.
"""

from __future__ import annotations

import collections
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jetlet import cli
from jetlet.local_cluster import local_cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with local_cluster(2) as client:
        yield client


def flags(cluster: Any) -> list[str]:
    return ["-a", ",".join(cluster.addresses), "--token", cluster.token]


def write(tmp_path: Path, name: str, code: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(code), encoding="utf-8")
    return str(path)


WORDS_JOB = """
    import sys
    from jetlet import AggregateOperations, Pipeline, Sinks, Sources

    WORDS = sys.argv[1].split(",")

    def build_pipeline():
        p = Pipeline()
        p.read_from(Sources.from_iterable(WORDS)).grouping_key(lambda w: w).aggregate(
            AggregateOperations.counting()
        ).write_to(Sinks.map("cli-counts"))
        return p
"""


def test_submit_and_wait_runs_the_files_pipeline_on_the_cluster(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a file that builds a pipeline from its arguments
    job_file = write(tmp_path, "words.py", WORDS_JOB)
    words = "a,b,a,c,a,b"
    # when submitted with --wait
    status = cli.main(["submit", *flags(cluster), "-n", "cli-words", "--wait", job_file, words])
    # then it completed and computed the counts
    assert status == 0
    out = capsys.readouterr().out
    assert "submitted job cli-words" in out and "completed" in out
    assert cluster.get_map("cli-counts") == collections.Counter(words.split(","))
    # and list-jobs --all shows it, completed
    assert cli.main(["list-jobs", *flags(cluster), "--all"]) == 0
    listing = capsys.readouterr().out
    assert "cli-words" in listing and "COMPLETED" in listing


def test_a_file_that_raises_exits_1_with_its_traceback(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_file = write(
        tmp_path, "broken.py", "def build_pipeline():\n    raise RuntimeError('no pipeline today')\n"
    )
    assert cli.main(["submit", *flags(cluster), job_file]) == 1
    err = capsys.readouterr().err
    assert "no pipeline today" in err and "broken.py" in err


def test_a_job_that_fails_on_the_cluster_exits_1_with_the_remote_traceback(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_file = write(
        tmp_path,
        "failing.py",
        """
        from jetlet import Pipeline, Sinks, Sources

        def explode(n):
            raise ValueError(f"cannot take {n}")

        def build_pipeline():
            p = Pipeline()
            p.read_from(Sources.items(1, 2, 3)).map(explode).write_to(Sinks.noop())
            return p
        """,
    )
    assert cli.main(["submit", *flags(cluster), "--wait", job_file]) == 1
    err = capsys.readouterr().err
    assert "cannot take" in err and "failing.py" in err


def test_cancel_a_running_job_and_then_operations_on_unknown_jobs(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a stream job that never ends
    job_file = write(
        tmp_path,
        "endless.py",
        """
        import itertools
        from jetlet import Pipeline, Sinks, Sources

        pipeline = Pipeline()
        pipeline.read_from(
            Sources.stream_from_generator(lambda context: itertools.count())
        ).without_timestamps().write_to(Sinks.noop())
        """,
    )
    assert cli.main(["submit", *flags(cluster), "-n", "cli-endless", job_file]) == 0
    job = cluster.get_job("cli-endless")
    deadline = time.monotonic() + 30
    while job.record_status() != "RUNNING" and time.monotonic() < deadline:
        threading.Event().wait(0.05)
        job = cluster.get_job("cli-endless")
    # when cancelled by name, then it ends FAILED (Jet's state for a cancelled job)
    assert cli.main(["cancel", *flags(cluster), "cli-endless"]) == 0
    assert "FAILED" in capsys.readouterr().out
    # and an unknown job is bad input; an operation the job's state refuses is a failure
    assert cli.main(["cancel", *flags(cluster), "no-such-job"]) == 2
    assert cli.main(["resume", *flags(cluster), "cli-endless"]) == 1
    assert "no job with id or name 'no-such-job'" in capsys.readouterr().err


def test_cluster_describes_members_and_partitions(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["cluster", *flags(cluster)]) == 0
    out = capsys.readouterr().out
    assert "(coordinator)" in out and "2 members" in out and "271 partitions" in out
    for address in cluster.addresses:
        assert address in out


def test_unreachable_and_bad_usage_have_their_own_exit_codes(
    cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["list-jobs", "-a", "127.0.0.1:1", "--token", "t"]) == 3
    assert "cannot reach the cluster" in capsys.readouterr().err
    assert cli.main(["list-jobs", "--token", "t", "-a", ""]) == 2
    assert cli.main(["list-jobs", "-a", ",".join(cluster.addresses), "--token", "wrong"]) == 2
    assert cli.main(["submit", *flags(cluster), "-s", "snap", "x.py"]) == 2
    with pytest.raises(SystemExit) as exited:
        cli.main(["submit", "--no-such-flag"])
    assert exited.value.code == 2


def test_the_installed_command_lists_jobs_end_to_end(cluster: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jetlet.cli", "list-jobs", "--all", *flags(cluster)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split() == ["ID", "STATUS", "SUBMITTED", "NAME"]


def test_cluster_start_runs_a_usable_local_cluster_until_interrupted() -> None:
    import signal

    import psutil

    # given `jetlet cluster start --members 2` in the foreground
    process = subprocess.Popen(
        [sys.executable, "-m", "jetlet.cli", "cluster", "start", "--members", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            lines.append(line)
            if line.startswith("use it with:") or not line:
                break
        use = next(line for line in lines if line.startswith("use it with:")).split(":", 1)[1].split()
        members = psutil.Process(process.pid).children(recursive=True)
        # when a client command uses the flags it printed, then it works
        assert cli.main(["cluster", *use]) == 0
        # and Ctrl-C stops it and every member, exit status 0
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
        _, alive = psutil.wait_procs(members, timeout=10)
        assert not alive
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
