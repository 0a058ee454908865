"""Real member processes on 127.0.0.1 for tests that need a member's own secret or flags.

``local_cluster`` hides its secret; these tests need to hold it (to dial the
data port as an outsider that knows it) or to give one member another one.
:class:`MemberProcesses` starts ``python -m jetlet.member`` processes with the
files and flags given, waits for their ready files with a deadline, and stops
every one of them (SIGTERM, then SIGKILL) when the test ends.
"""

from __future__ import annotations

import json
import pathlib
import signal
import subprocess
import sys
import time

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0


class MemberProcess:
    """One started member: its process, log and (once ready) its addresses."""

    def __init__(self, name: str, process: subprocess.Popen[bytes], ready: pathlib.Path, log: pathlib.Path):
        self.name = name
        self.process = process
        self.ready_file = ready
        self.log_path = log
        self.record: dict[str, str] = {}

    @property
    def rest_address(self) -> str:
        return self.record["rest_address"]

    @property
    def data_address(self) -> tuple[str, int]:
        host, _, port = self.record["data_address"].rpartition(":")
        return host, int(port)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> MemberProcess:
        deadline = time.monotonic() + timeout_s
        pause = 0.01
        while time.monotonic() < deadline:
            if self.ready_file.exists():
                self.record = json.loads(self.ready_file.read_text())
                return self
            if self.process.poll() is not None:
                raise AssertionError(
                    f"member {self.name} exited with {self.process.returncode}:\n{self.log()}"
                )
            time.sleep(pause)  # polling another process's file: no notification to wait on
            pause = min(pause * 2, 0.1)
        raise AssertionError(f"member {self.name} was not ready within {timeout_s} s:\n{self.log()}")

    def wait_exit(self, timeout_s: float) -> int:
        """The exit code; AssertionError if the process still runs after ``timeout_s``."""
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"member {self.name} still runs after {timeout_s} s:\n{self.log()}"
            ) from None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class MemberProcesses:
    """Starts members in ``folder`` sharing a token; each may get its own secret."""

    def __init__(self, folder: pathlib.Path, token: str = "test-token-0123456789") -> None:
        self.folder = folder
        self.token_file = folder / "token"
        self.token_file.write_text(token)
        self.token = token
        self.started: list[MemberProcess] = []

    def secret_file(self, secret: str) -> pathlib.Path:
        path = self.folder / f"secret-{len(list(self.folder.glob('secret-*')))}"
        path.write_text(secret)
        return path

    def start(self, name: str, secret: str, *flags: str, wait: bool = True) -> MemberProcess:
        ready = self.folder / f"{name}.ready"
        log = self.folder / f"{name}.log"
        command = [
            sys.executable, "-m", "jetlet.member",
            "--name", name,
            "--host", "127.0.0.1",
            "--rest-port", "0",
            "--data-port", "0",
            "--token-file", str(self.token_file),
            "--secret-file", str(self.secret_file(secret)),
            "--ready-file", str(ready),
            *flags,
        ]  # fmt: skip
        with log.open("wb") as out:
            process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        member = MemberProcess(name, process, ready, log)
        self.started.append(member)
        return member.wait_ready() if wait else member

    def stop_all(self) -> None:
        for member in self.started:
            member.stop()
