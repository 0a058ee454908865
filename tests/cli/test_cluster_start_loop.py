"""``jetlet cluster start`` as a development loop, in a shell that exported what it said to export.

Issue 16 items 2 and 7: the ``JETLET_ADDRESSES`` it told users to export
broke ``jetlet member``, ``local_cluster()`` and the command itself in that
shell; it never said where the member logs were and deleted them on stop,
did not report a member that died, and took no member flags.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil

from jetlet.testing import wait_until

START_S = 90.0  # two member processes on a loaded 2-core machine


def _free_port_pair() -> int:
    """A port P such that P and P + 1 are free on 127.0.0.1 now (two members' REST ports)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port: int = probe.getsockname()[1]
        if port >= 65000:
            continue
        with contextlib.ExitStack() as stack:
            try:
                for candidate in (port, port + 1):
                    held = stack.enter_context(socket.socket())
                    held.bind(("127.0.0.1", candidate))
            except OSError:
                continue
        return port
    raise AssertionError("no two consecutive free ports")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    children = psutil.Process(process.pid).children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    psutil.wait_procs(children, timeout=10)
    process.kill()
    process.wait()


def test_cluster_start_logs_reports_deaths_passes_flags_and_its_exports_break_nothing(tmp_path: Path) -> None:
    # given `jetlet cluster start` with a log directory, a lower-case log level, ports and --follow
    logs, out = tmp_path / "logs", tmp_path / "out.txt"
    rest_port = _free_port_pair()
    command = [sys.executable, "-m", "jetlet", "cluster", "start", "--members", "2", "--log-dir", str(logs)]
    command += ["--log-level", "debug", "--rest-port", str(rest_port), "--follow"]
    command += ["--snapshot-directory", str(tmp_path / "snapshots")]
    with out.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_until(
            lambda: "stop it with Ctrl-C" in out.read_text() or process.poll() is not None,
            "the cluster started",
            START_S,
        )
        text = out.read_text()
        assert process.poll() is None, text
        # then it says where each member logs, in the directory given, on the ports given
        for index, name in enumerate(("m1", "m2")):
            assert f"{name}  REST 127.0.0.1:{rest_port + index}" in text
            assert f"log {logs / (name + '.log')}" in text
        # and each member got the flags given (its log level, its snapshot directory)
        m1_pid = int(re.search(r"^  m1 .* pid (\d+) ", text, re.M).group(1))  # type: ignore[union-attr]
        member_command = psutil.Process(m1_pid).cmdline()
        assert member_command[member_command.index("--log-level") :][:2] == ["--log-level", "debug"]
        directory = member_command[member_command.index("--snapshot-directory") + 1]
        assert directory == str(tmp_path / "snapshots")
        # and the members' log lines stream with their member's prefix, at the level given
        wait_until(lambda: re.search(r"^m2\| .* DEBUG ", out.read_text(), re.M), "m2's debug lines", START_S)

        # when the variables it printed are exported, then the client, local_cluster() and the member work
        exports = re.search(r"^or:  export (.*)$", text, re.M)
        assert exports, text
        environment = dict(os.environ)
        for pair in exports.group(1).split():
            variable, _, value = pair.partition("=")
            environment[variable] = value
        assert set(environment) >= {"JETLET_CLIENT_ADDRESSES", "JETLET_CLIENT_TOKEN"}
        listed = subprocess.run(
            [sys.executable, "-m", "jetlet", "list-jobs"], env=environment, capture_output=True, text=True
        )
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.startswith("ID")
        script = (
            "from jetlet import local_cluster\nwith local_cluster(1) as c: print(len(c.cluster().members))"
        )
        nested = subprocess.run(
            [sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=START_S
        )
        assert (nested.returncode, nested.stdout.strip()) == (0, "1"), nested.stderr

        # when a member dies, then the command says which, with its exit code and log
        m2_pid = int(re.search(r"^  m2 .* pid (\d+) ", text, re.M).group(1))  # type: ignore[union-attr]
        os.kill(m2_pid, signal.SIGKILL)
        wait_until(
            lambda: f"member m2 exited with -9; its log: {logs / 'm2.log'}" in out.read_text(),
            "the death reported",
            START_S,
        )
        # when interrupted, then it stops with 0 and keeps the logs where it says
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0
        assert f"stopped; the members' logs are in {logs}" in out.read_text()
        assert "member m1 serving REST" in (logs / "m1.log").read_text()
        assert "Traceback" not in out.read_text()
    finally:
        _stop(process)


def test_cluster_start_on_a_port_in_use_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run(
            [
                *(sys.executable, "-m", "jetlet", "cluster", "start", "--members", "1"),
                *("--rest-port", str(port), "--log-dir", str(tmp_path)),
            ],
            capture_output=True,
            text=True,
            timeout=START_S,
            check=False,
        )
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line == (
        "jetlet: the local cluster did not start: member m1 exited with 2: "
        f"jetlet member: --rest-port {port}: cannot listen on 127.0.0.1:{port}: Address already in use "
        f"(logs in {tmp_path})"
    )


def test_the_client_variables_are_no_member_settings() -> None:
    from jetlet._cluster import settings

    client = {"JETLET_CLIENT_ADDRESSES": "h:1", "JETLET_CLIENT_TOKEN": "t", "JETLET_CLIENT_CA_FILE": "ca"}
    assert settings.load({}, {**client, "JETLET_QUEUE_SIZE": "8"}).queue_size == 8
    try:
        settings.load({}, {"JETLET_ADDRESSES": "h:1"})
    except settings.SettingsError as error:
        assert "the client's are JETLET_CLIENT_ADDRESSES" in str(error)
    else:
        raise AssertionError("an unknown JETLET_ variable was accepted")
