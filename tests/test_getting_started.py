"""docs/getting-started.md, run as a new user would run it: every command, its output compared.

The page's ```` ```console ```` blocks are the script: a ``$ `` line is a
command (a command ending in ``<<'EOF'`` goes on to its ``EOF`` line), the
lines after it are its output, where ``...`` in a line stands for any text
and a line of just ``...`` for any lines. Commands run with ``bash`` in a
fresh directory (holding a link to ``examples/``), with this venv first on
``PATH``, stdout and stderr together. Three commands are the user's hands:

* ``jetlet cluster start`` runs in the background, as in the page's first
  terminal; its output up to ``stop it with Ctrl-C`` is compared at once;
* ``export ...`` exports the variables that the cluster really printed;
* a block starting with ``^C`` sends SIGINT to the cluster, and the rest of
  its output is compared.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "getting-started.md"
CONSOLE = re.compile(r"```console\n(.*?)```", re.S)
START_S = 120.0  # member processes on a loaded machine
COMMAND_S = 300.0


@dataclasses.dataclass
class Step:
    command: str  # "^C" for the interrupt
    expected: list[str]


def steps(text: str) -> list[Step]:
    found: list[Step] = []
    for block in CONSOLE.findall(text):
        lines = block.splitlines()
        if lines and lines[0] == "^C":
            found.append(Step("^C", lines[1:]))
            continue
        index = 0
        while index < len(lines):
            line = lines[index]
            assert line.startswith("$ "), f"expected a command, got {line!r}"
            command = [line[2:]]
            index += 1
            if command[0].endswith("<<'EOF'"):
                while lines[index] != "EOF":
                    command.append(lines[index])
                    index += 1
                command.append("EOF")
                index += 1
            expected = []
            while index < len(lines) and not lines[index].startswith("$ "):
                expected.append(lines[index])
                index += 1
            found.append(Step("\n".join(command), expected))
    return found


def pattern(expected: list[str]) -> re.Pattern[str]:
    parts = []
    for line in expected:
        if line == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*".join(re.escape(piece) for piece in line.split("...")) + r"\n")
    return re.compile("".join(parts))


def assert_output(step: Step, output: str) -> None:
    if output and not output.endswith("\n"):
        output += "\n"
    assert pattern(step.expected).fullmatch(output), (
        f"the output of {step.command!r} differs from the page:\n--- page\n"
        + "\n".join(step.expected)
        + f"\n--- real\n{output}"
    )


def test_the_page_is_a_script_with_outputs() -> None:
    found = steps(PAGE.read_text(encoding="utf-8"))
    commands = [s.command.split()[0] for s in found]
    assert commands[:2] == ["jetlet", "jetlet"] and "^C" in commands and "export" in commands
    assert pattern(["a...b", "...", "c"]).fullmatch("a-x-b\nmore\nlines\nc\n")
    assert not pattern(["a...b"]).fullmatch("a\nb\n")


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    yield tmp_path


def test_every_command_of_getting_started_gives_the_output_shown(workdir: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("JETLET_")}
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}"
    cluster: subprocess.Popen[bytes] | None = None
    cluster_out = workdir / "cluster-output.txt"
    try:
        for step in steps(PAGE.read_text(encoding="utf-8")):
            if step.command.startswith("jetlet cluster start"):
                with cluster_out.open("wb") as out:
                    started = subprocess.Popen(
                        shlex.split(step.command), cwd=workdir, env=environment, stdout=out, stderr=out
                    )
                cluster = started
                _wait_for(started, cluster_out)
                assert_output(step, cluster_out.read_text())
            elif step.command.startswith("export "):
                exported = re.search(r"^or:  export (.*)$", cluster_out.read_text(), re.M)
                assert exported, cluster_out.read_text()
                for pair in exported.group(1).split():
                    name, _, value = pair.partition("=")
                    environment[name] = value
            elif step.command == "^C":
                assert cluster is not None
                before = cluster_out.read_text()
                cluster.send_signal(signal.SIGINT)
                assert cluster.wait(60) == 0
                assert_output(step, cluster_out.read_text()[len(before) :])
            else:
                done = subprocess.run(
                    ["bash", "-c", step.command],
                    cwd=workdir,
                    env=environment,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    timeout=COMMAND_S,
                    check=False,
                )
                assert_output(step, done.stdout)
    finally:
        if cluster is not None and cluster.poll() is None:
            children = psutil.Process(cluster.pid).children(recursive=True)
            cluster.kill()
            cluster.wait()
            for child in children:
                child.kill()
            psutil.wait_procs(children, timeout=10)


def _wait_for(process: subprocess.Popen[bytes], output: Path) -> None:
    """Until the cluster printed how to use it (or ended)."""
    from jetlet.testing import wait_until

    wait_until(
        lambda: "stop it with Ctrl-C" in output.read_text() or process.poll() is not None,
        "the cluster printed its addresses",
        START_S,
    )
