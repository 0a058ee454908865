"""``jetlet submit --wait`` against a real local cluster: its progress, its end, and Ctrl-C.

The CLI runs as a subprocess: on pipes (plain progress lines), and on a pseudo-terminal
(the bar redrawn in place; Ctrl-C, then the prompt answered: cancel, or detach).
"""

from __future__ import annotations

import os
import pathlib
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from jetlet.local_cluster import local_cluster
from jetlet.testing import wait_until

pytestmark = pytest.mark.timeout(120)

JOB_FILE = """
import sys, time
from jetlet import Pipeline, Sinks, Sources

COUNT, PAUSE = int(sys.argv[1]), float(sys.argv[2])

def build_pipeline():
    pause = PAUSE

    def slow(item):
        time.sleep(pause)
        return item

    p = Pipeline()
    p.read_from(Sources.items(*range(COUNT))).map(slow).write_to(Sinks.list("progress-out"))
    return p
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with local_cluster(2) as client:
        yield client


@pytest.fixture
def job_file(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "slow_job.py"
    path.write_text(JOB_FILE)
    return str(path)


def _command(cluster: Any, *args: str) -> list[str]:
    return [sys.executable, "-m", "jetlet", "-a", cluster.address, f"--token={cluster.token}", *args]


def _environment() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "100", "TERM": "xterm"}


def _job_id(output: str) -> str:
    found = re.search(r"submitted job \S+ \(id (\S+)\)", output)
    assert found is not None, output
    return found.group(1)


def test_on_pipes_progress_is_plain_lines_on_stderr_and_the_end_on_stdout(
    cluster: Any, job_file: str
) -> None:
    done = subprocess.run(
        _command(cluster, "submit", "--wait", job_file, "4000", "0"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    job_id = _job_id(done.stdout)
    assert done.stdout.splitlines() == [f"submitted job {job_id} (id {job_id})", f"job {job_id} completed"]
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"job {job_id}: COMPLETED, 4,000/4,000 items read (100%), "), done.stderr
    assert ", 4,000 at the sinks, elapsed 0:" in last
    assert "\x1b" not in done.stderr and "\r" not in done.stderr
    assert sorted(cluster.get_list("progress-out")) == list(range(4000))


class _Terminal:
    """The CLI on a pseudo-terminal: its output as it comes, and keys typed to it."""

    def __init__(self, command: list[str]) -> None:
        self._fd, terminal = pty.openpty()
        self.process = subprocess.Popen(
            command,
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            env=_environment(),
            start_new_session=True,
            preexec_fn=_sigint_as_default,
        )
        os.close(terminal)
        self.output = ""

    def read_until(self, pattern: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while re.search(pattern, self.output) is None:
            left = deadline - time.monotonic()
            assert left > 0, f"{pattern!r} did not appear; the output so far: {self.output!r}"
            ready, _, _ = select.select([self._fd], [], [], min(left, 0.5))
            if ready:
                try:
                    chunk = os.read(self._fd, 4096)
                except OSError:  # the CLI ended and closed the terminal
                    chunk = b""
                if not chunk and self.process.poll() is not None:
                    raise AssertionError(f"the CLI ended before {pattern!r}: {self.output!r}")
                self.output += chunk.decode(errors="replace")
        return self.output

    def type(self, text: str) -> None:
        os.write(self._fd, text.encode())

    def finish(self) -> int:
        code = self.process.wait(60)
        while select.select([self._fd], [], [], 0.1)[0]:
            try:
                chunk = os.read(self._fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            self.output += chunk.decode(errors="replace")
        os.close(self._fd)
        return code


def test_on_a_terminal_the_bar_is_redrawn_in_place(cluster: Any, job_file: str) -> None:
    terminal = _Terminal(_command(cluster, "submit", "--wait", job_file, "4000", "0.0002"))
    assert terminal.finish() == 0, terminal.output
    job_id = _job_id(terminal.output)
    drawn = terminal.output.split("\r")
    final = next(part for part in drawn if part.startswith("COMPLETED ["))
    assert final.startswith("COMPLETED [##############################] 100%  4,000/4,000 read  "), final
    assert "4,000 at sinks" in final and final.endswith("\x1b[K")
    assert terminal.output.endswith(f"\x1b[K\r\njob {job_id} completed\r\n")


def _slow_job(cluster: Any, job_file: str) -> tuple[_Terminal, str]:
    terminal = _Terminal(_command(cluster, "submit", "--wait", job_file, "50000", "0.0005"))
    terminal.read_until(r"RUNNING \[")
    return terminal, _job_id(terminal.output)


def test_ctrl_c_then_cancel_cancels_the_job(cluster: Any, job_file: str) -> None:
    terminal, job_id = _slow_job(cluster, job_file)
    terminal.process.send_signal(signal.SIGINT)
    terminal.read_until(r"or detach and leave it running\? \[c\]ancel/\[D\]etach: $")
    terminal.type("c\n")
    assert terminal.finish() == 130
    assert f"jetlet: job {job_id} (id {job_id}) cancelled" in terminal.output
    job = cluster.get_job(job_id)
    wait_until(lambda: job.record().is_terminal, "the job to end", 60)
    assert job.last_record.cancelled


def test_ctrl_c_then_enter_detaches_and_the_job_runs_on(cluster: Any, job_file: str) -> None:
    terminal, job_id = _slow_job(cluster, job_file)
    terminal.process.send_signal(signal.SIGINT)
    terminal.read_until(r"\[c\]ancel/\[D\]etach: $")
    terminal.type("\n")
    assert terminal.finish() == 130
    assert f"is still running on the cluster. Cancel it with: jetlet cancel {job_id}" in terminal.output
    job = cluster.get_job(job_id)
    try:
        assert job.record().status.value == "RUNNING"
    finally:
        job.cancel()


def _sigint_as_default() -> None:
    """In the CLI's process before it starts: Ctrl-C as a terminal gives it. A pytest started in the
    background by a shell (``make test &``) ignores SIGINT, and its children would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
