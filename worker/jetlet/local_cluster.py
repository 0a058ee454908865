"""A cluster of member processes on this machine's loopback, for tests, notebooks and ``make run``.

Theory of operation
-------------------
:func:`local_cluster` generates a cluster secret and a REST token into a
private temporary directory, starts ``members`` processes of
``python -m jetlet.member`` bound to 127.0.0.1 on free ports, and waits
(with a deadline) for each to write its ready file. The first member starts
alone; the others name it as their seed, so the first is the oldest and the
coordinator. It then polls ``/cluster`` on every member until all of them
report the same member list with every member in it, and yields a
:class:`~jetlet.client.Client` of the first member with ``.pids`` and
``.addresses`` (the members' REST addresses, in start order), and
``.add_member()``, which starts one more member and returns a client of it
(it joins the running cluster). On exit — also
when the body or the start-up raised — every process still running gets
SIGTERM, then SIGKILL if it has not ended within a grace period, and is
reaped; the temporary directory is removed.

Example (starts processes, so it is not run as a doctest)::

    from jetlet.local_cluster import local_cluster

    with local_cluster(members=2) as client:
        assert len(client.cluster().members) == 2
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

from jetlet import client as client_mod
from jetlet import errors

START_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0
_POLL_S = 0.05


def _spawn(index: int, workdir: pathlib.Path, seeds: str, extra: list[str]) -> subprocess.Popen[bytes]:
    name = f"m{index + 1}"
    command = [
        sys.executable, "-m", "jetlet.member",
        "--name", name,
        "--host", "127.0.0.1",
        "--rest-port", "0",
        "--data-port", "0",
        "--token-file", str(workdir / "token"),
        "--secret-file", str(workdir / "secret"),
        "--ready-file", str(workdir / f"{name}.ready"),
        *(["--members", seeds] if seeds else []),
        *extra,
    ]  # fmt: skip
    log = (workdir / f"{name}.log").open("wb")
    with log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _wait_ready(process: subprocess.Popen[bytes], ready: pathlib.Path, deadline: float) -> dict[str, str]:
    while time.monotonic() < deadline:
        if ready.exists():
            record: dict[str, str] = json.loads(ready.read_text())
            return record
        if process.poll() is not None:
            log = ready.with_suffix(".log").read_text(errors="replace")[-4000:]
            raise errors.JetletError(f"member {ready.stem} exited with {process.returncode}:\n{log}")
        time.sleep(_POLL_S)
    raise errors.JetletError(f"member {ready.stem} did not start within {START_TIMEOUT_S} s")


def _wait_formed(clients: list[client_mod.Client], deadline: float) -> None:
    expected = len(clients)
    while time.monotonic() < deadline:
        views = [c.cluster() for c in clients]
        lists = {tuple(m.name for m in v.members) for v in views}
        if len(lists) == 1 and len(next(iter(lists))) == expected:
            return
        time.sleep(_POLL_S)
    raise errors.JetletError(f"the {expected} members did not form one cluster within {START_TIMEOUT_S} s")


def _stop_all(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def local_cluster(
    members: int = 3, member_args: list[str] | None = None, ca_file: str = ""
) -> Iterator[client_mod.Client]:
    """Start ``members`` member processes on loopback; yield a client; stop them all on exit.

    ``member_args`` are extra ``jetlet member`` flags given to every member
    (e.g. ``["--heartbeat-interval-millis", "100"]``); with TLS flags among
    them, ``ca_file`` is the CA the client checks the members against.
    """
    if members < 1:
        raise ValueError(f"members must be >= 1, got {members}")
    processes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="jetlet-local-") as tmp:
        workdir = pathlib.Path(tmp)
        token = secrets.token_urlsafe(32)
        for secret_name, value in (("token", token), ("secret", secrets.token_urlsafe(32))):
            path = workdir / secret_name
            path.write_text(value)
            os.chmod(path, 0o600)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            first = _spawn(0, workdir, "", member_args or [])
            processes.append(first)
            records = [_wait_ready(first, workdir / "m1.ready", deadline)]
            for index in range(1, members):
                processes.append(_spawn(index, workdir, records[0]["rest_address"], member_args or []))
            for index, process in enumerate(processes[1:], start=1):
                records.append(_wait_ready(process, workdir / f"m{index + 1}.ready", deadline))
            clients = [client_mod.Client(r["rest_address"], token, ca_file=ca_file) for r in records]
            _wait_formed(clients, deadline)
            main = clients[0]
            main.pids = tuple(p.pid for p in processes)
            main.addresses = tuple(r["rest_address"] for r in records)

            def add_member() -> client_mod.Client:
                index = len(processes)
                processes.append(_spawn(index, workdir, records[0]["rest_address"], member_args or []))
                records.append(
                    _wait_ready(
                        processes[-1], workdir / f"m{index + 1}.ready", time.monotonic() + START_TIMEOUT_S
                    )
                )
                added = client_mod.Client(records[-1]["rest_address"], token, ca_file=ca_file)
                main.pids = tuple(p.pid for p in processes)
                main.addresses = tuple(r["rest_address"] for r in records)
                return added

            main.add_member = add_member
            yield main
        finally:
            _stop_all(processes)
