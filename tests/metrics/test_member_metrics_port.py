"""A member process's metrics port: its address in the ready file and start-up line, off with -1, a token."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jetlet.testing import wait_until

TOKEN = "a-rest-token-of-32-characters-xx"
SECRET = "a-cluster-secret-of-32-characters"
METRICS_TOKEN = "a-metrics-token-of-32-characters"
MEMBER = [sys.executable, "-m", "jetlet.member", "--rest-port", "0", "--data-port", "0"]
Start = Callable[..., tuple[dict[str, str], Path]]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    """Starts a member process with flags; returns its ready file's record and its log's path."""
    started: list[subprocess.Popen[str]] = []

    def run(*flags: str) -> tuple[dict[str, str], Path]:
        ready, log = tmp_path / f"m{len(started)}.ready", tmp_path / f"m{len(started)}.log"
        env = {**os.environ, "JETLET_TOKEN": TOKEN, "JETLET_SECRET": SECRET}
        with log.open("w") as out:
            process = subprocess.Popen(
                [*MEMBER, "--ready-file", str(ready), *flags],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
            )
        started.append(process)
        wait_until(lambda: ready.exists() or process.poll() is not None, "the member is ready")
        assert process.poll() is None, log.read_text()
        return json.loads(ready.read_text()), log

    yield run
    for process in started:
        process.send_signal(signal.SIGTERM)
    for process in started:
        process.wait(timeout=60)


def _status(address: str, token: str = "") -> int:
    request = urllib.request.Request(f"http://{address}/metrics")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_a_member_serves_metrics_with_its_token_and_not_at_all_with_minus_one(
    start: Start, tmp_path: Path
) -> None:
    token_file = tmp_path / "metrics-token"
    token_file.write_text(METRICS_TOKEN + "\n")
    secured, log = start("--metrics-token-file", str(token_file))
    address = secured["metrics_address"]
    assert address.startswith("127.0.0.1:")
    wait_until(lambda: f"metrics on http://{address}/metrics" in log.read_text(), "the start-up line")
    assert _status(address) == 401
    assert _status(address, METRICS_TOKEN) == 200

    off, log = start("--metrics-port", "-1")
    assert off["metrics_address"] == ""
    wait_until(lambda: "metrics on none" in log.read_text(), "the start-up line")
