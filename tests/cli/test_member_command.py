"""``jetlet member`` at a terminal: every flag explained, and each mistake one line naming its flag.

Issue 16 items 6 and 10: ``--help`` listed 27 flags with no description or
default; a port in use and ``--log-level debug`` gave tracebacks; "a cluster
secret is required" named no flag; Ctrl-C was a crash to the others.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from jetlet._cluster import settings
from jetlet.testing import wait_until

START_S = 60.0


TOKEN = "member-command-token-0123"
SECRET = "member-command-secret-0123"


def secrets_env(token: str = TOKEN, secret: str = SECRET) -> dict[str, str]:
    """This environment with the member's token and secret (as advised: not on the command line)."""
    return {**os.environ, "JETLET_TOKEN": token, "JETLET_SECRET": secret}


def run_member(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jetlet.cli", "member", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=secrets_env() if env is None else env,
    )


@pytest.fixture
def listening() -> Iterator[int]:
    """A port on 127.0.0.1 that another socket listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_help_describes_every_flag_with_its_default() -> None:
    done = run_member("--help")
    assert done.returncode == 0
    # argparse wraps help lines; join them to one text per flag
    text = re.sub(r"\s+", " ", done.stdout)
    for name in settings.NAMES:
        flag = f"--{name.replace('_', '-')}"
        described = re.search(re.escape(flag) + r" \S+ (.*?)\(default", text)
        assert described, f"{flag} has no default in --help"
        assert len(described.group(1).strip()) > 10, f"{flag} has no description in --help"
    assert "(default 5701)" in text and "(default 8701)" in text and "(default INFO)" in text


def test_a_missing_secret_names_its_flag() -> None:
    done = run_member(env={**os.environ, "JETLET_TOKEN": TOKEN})
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "jetlet member: a cluster secret (--secret-file or JETLET_SECRET) is required"
    )


@pytest.mark.parametrize("flag", ["--token", "--secret"])
def test_a_short_token_or_secret_is_refused_naming_where_it_came_from(flag: str, tmp_path: Path) -> None:
    # given a one-character value on the command line, then in a file
    done = run_member(flag, "t")
    name = flag.removeprefix("--")
    assert done.returncode == 2
    assert f"jetlet member: setting '{name}' (from {flag} or JETLET_{name.upper()}) must be at least 16" in (
        done.stderr
    )
    short = tmp_path / name
    short.write_text("fifteen-chars!!\n")
    done = run_member(f"{flag}-file", str(short), env={**os.environ, "JETLET_TOKEN": "", "JETLET_SECRET": ""})
    assert done.returncode == 2
    assert f"setting '{name}' (from '{name}_file' {short}) must be at least 16 characters, got 15" in (
        done.stderr
    )


@pytest.mark.parametrize("flag", ["--token", "--secret"])
def test_a_secret_on_the_command_line_is_warned_about_naming_the_safe_ways(flag: str) -> None:
    # a strong value: the member goes on to the next check (an unknown log level) after the warning
    done = run_member(flag, "x" * 20, "--log-level", "loud")
    name = flag.removeprefix("--")
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        f"jetlet member: warning: {flag} on the command line is visible to every user of this machine "
        f"(ps); use {flag}-file or JETLET_{name.upper()} instead"
    )
    assert "warning" not in run_member("--log-level", "loud").stderr


@pytest.mark.parametrize("flag", ["--rest-port", "--data-port"])
def test_a_port_in_use_is_one_line_naming_the_flag(flag: str, listening: int) -> None:
    other = "--data-port" if flag == "--rest-port" else "--rest-port"
    done = run_member(flag, str(listening), other, "0")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"jetlet member: {flag} {listening}: cannot listen on 127.0.0.1:{listening}")


def test_an_unknown_log_level_is_one_line_with_the_choices() -> None:
    done = run_member("--log-level", "loud")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "jetlet member: --log-level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL (any case), "
        "got 'loud'"
    )


def test_a_lower_case_log_level_is_accepted_and_ctrl_c_stops_the_member_cleanly(tmp_path: Path) -> None:
    # given a member started with --log-level debug (lower case)
    ready = tmp_path / "m.ready"
    log = tmp_path / "m.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "jetlet.cli", "member"),
                *("--rest-port", "0", "--data-port", "0", "--log-level", "debug", "--ready-file", str(ready)),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=secrets_env(),
        )
    try:
        wait_until(lambda: ready.exists() or process.poll() is not None, "the member is ready", START_S)
        assert process.poll() is None, log.read_text()
        assert json.loads(ready.read_text())["rest_address"]
        # when Ctrl-C reaches it, then it stops with 0 and no traceback
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = log.read_text()
    assert "DEBUG" in text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text


def test_a_failed_connection_to_a_member_is_logged_once_until_it_changes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import concurrent.futures

    from jetlet import member

    def attempt(error: Exception | None) -> None:
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
        member._log_connect_failure("m9")(future)

    caplog.set_level("DEBUG", logger="jetlet.member")
    for _ in range(20):  # a retry every tick
        attempt(ConnectionRefusedError("refused"))
    attempt(None)
    attempt(ConnectionRefusedError("refused"))
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    infos = [r.getMessage() for r in caplog.records if r.levelname == "INFO"]
    assert len(warnings) == 2, warnings  # the first failure, and the first after it connected again
    assert infos == ["connected to member m9"]
    member._UNREACHABLE.discard("m9")


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_a_member_whose_seed_never_answers_says_so_with_backoff_and_gives_up_after_its_join_timeout() -> None:
    # given a seed address where nothing listens, and a join timeout of 8 s
    seed = f"127.0.0.1:{_unused_port()}"
    done = run_member(
        *("--rest-port", "0", "--data-port", "0"),
        *("--members", seed, "--join-timeout-millis", "8000"),
    )
    # then it warned once (after 5 s; the next report was due after 10 s more), naming the seed and why
    warnings = [line for line in done.stderr.splitlines() if "still alone after" in line]
    assert len(warnings) == 1, done.stderr
    assert f"no seed of --members answered ({seed}: unreachable (" in warnings[0]
    # and it stopped with status 4 and one line naming the flag, instead of running as a cluster of one
    assert done.returncode == 4, done.stderr
    [said] = [line for line in done.stderr.splitlines() if line.startswith("jetlet member: ")]
    assert said.startswith("jetlet member: no seed of --members answered within --join-timeout-millis 8000")
    assert "Traceback" not in done.stderr


def test_a_member_whose_seed_refuses_its_token_names_the_refusal(tmp_path: Path) -> None:
    # given a running member with the token "right"
    ready = tmp_path / "seed.ready"
    with (tmp_path / "seed.log").open("wb") as log:
        seed = subprocess.Popen(
            [
                *(sys.executable, "-m", "jetlet", "member"),
                *("--rest-port", "0", "--data-port", "0", "--ready-file", str(ready)),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=secrets_env(token="the-right-token-0123"),
        )
    try:
        wait_until(lambda: ready.exists() or seed.poll() is not None, "the seed is ready", START_S)
        address = json.loads(ready.read_text())["rest_address"]
        # when a member with another token names it as its seed
        done = run_member(
            *("--rest-port", "0", "--data-port", "0"),
            *("--members", address, "--join-timeout-millis", "6000"),
            env=secrets_env(token="the-wrong-token-0123"),
        )
        # then it says the seed refused its token, and gives up
        assert done.returncode == 4, done.stderr
        assert f"{address}: refused this member's REST token (401)" in done.stderr
    finally:
        seed.send_signal(signal.SIGTERM)
        try:
            seed.wait(30)
        except subprocess.TimeoutExpired:
            seed.kill()
            seed.wait()


def test_ctrl_c_on_a_member_stops_it_cleanly_and_the_others_stay_quiet(tmp_path: Path) -> None:
    from jetlet.local_cluster import local_cluster

    with local_cluster(2, log_dir=tmp_path) as client:
        survivor = tmp_path / "m1.log"
        before = len(survivor.read_text().splitlines())
        # when m2 gets Ctrl-C (SIGINT), then it stops with 0 and no traceback
        os.kill(client.pids[1], signal.SIGINT)
        wait_until(lambda: psutil.Process(client.pids[1]).status() == psutil.STATUS_ZOMBIE, "m2 ended", 60)
        time.sleep(2)  # not a wait for a condition: the span over which m1 must stay quiet
        stopped = tmp_path / "m2.log"
        assert "Traceback" not in stopped.read_text()
        # and m1 says so in a few lines, not a reconnect warning every tick
        warnings = [line for line in survivor.read_text().splitlines()[before:] if " WARNING " in line]
        assert len(warnings) <= 3, warnings
