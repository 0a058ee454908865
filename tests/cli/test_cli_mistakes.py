"""Operational mistakes with the client commands: one clear line, never a traceback.

Issue 16 item 6: ``-a`` pointed at the data port printed 40 lines of
traceback; Ctrl-C on ``jetlet submit --wait`` printed 48, and nothing said
that the job was still running.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jetlet import cli, commands, job
from jetlet.local_cluster import local_cluster
from jetlet.testing import wait_until

ENDLESS_JOB = """
    import itertools
    from jetlet import Pipeline, Sinks, Sources

    def build_pipeline():
        p = Pipeline()
        p.read_from(Sources.stream_from_generator(lambda context: itertools.count())).without_timestamps(
        ).write_to(Sinks.noop())
        return p
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with local_cluster(1) as client:
        yield client


def test_addresses_at_the_data_port_is_one_line_naming_the_flag(cluster: Any) -> None:
    data_address = cluster.cluster().members[0].data_address
    done = subprocess.run(
        [sys.executable, "-m", "jetlet", "-a", data_address, f"--token={cluster.token}", "list-jobs"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"jetlet: --addresses {data_address} does not answer as a jetlet REST API")
    assert "REST port" in line and "data port" in line


def test_ctrl_c_while_waiting_for_a_job_says_it_still_runs_and_how_to_cancel_it(
    cluster: Any, tmp_path: Path
) -> None:
    # given `jetlet submit --wait` of an endless job
    job_file = tmp_path / "endless.py"
    job_file.write_text(textwrap.dedent(ENDLESS_JOB), encoding="utf-8")
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    command = [sys.executable, "-m", "jetlet", "-a", cluster.addresses[0], f"--token={cluster.token}"]
    command += ["submit", "-n", "endless", "--wait", str(job_file)]
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, preexec_fn=_sigint_as_default)
    try:
        wait_until(
            lambda: "submitted job" in out.read_text() or process.poll() is not None, "the job submitted", 60
        )
        assert process.poll() is None, err.read_text()
        # when Ctrl-C reaches it
        process.send_signal(signal.SIGINT)
        # then it exits 130 with one line: the job still runs, and the command that cancels it
        assert process.wait(30) == 130
        running = cluster.get_job("endless")
        job_id = job.id_to_string(running.id)
        assert err.read_text().strip() == (
            f"jetlet: stopped waiting; job endless (id {job_id}) is still running on the cluster. "
            f"Cancel it with: jetlet cancel {job_id}"
        )
        assert running.record_status() in ("STARTING", "RUNNING")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        found = cluster.get_job("endless")
        if found is not None:
            found.cancel()


def test_ctrl_c_anywhere_else_is_one_line_and_130(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    def interrupted(_args: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "run_list_snapshots", interrupted)
    monkeypatch.setattr(commands, "connect", interrupted)
    assert cli.main(["list-snapshots", "-a", "127.0.0.1:1", "--token", "t"]) == 130
    assert capsys.readouterr().err == "jetlet: interrupted\n"


def _sigint_as_default() -> None:
    """In the CLI's process before it starts: Ctrl-C as a terminal gives it. A pytest started in the
    background by a shell (``make test &``) ignores SIGINT, and its children would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
