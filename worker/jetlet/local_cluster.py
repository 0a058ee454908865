"""A cluster of member processes on this machine's loopback, for tests, notebooks and ``make run``.

Theory of operation
-------------------
:class:`LocalCluster` generates a cluster secret and a REST token into a
private temporary directory, starts ``members`` processes of
``python -m jetlet.member`` bound to 127.0.0.1 (on free ports, or on
``rest_port + i`` / ``data_port + i`` when those are given), and waits (with
a deadline) for each to write its ready file. The first member starts alone;
the others name it as their seed, so the first is the oldest and the
coordinator. It then polls ``/cluster`` on every member until all of them
report the same member list with every member in it.

:meth:`LocalCluster.start` returns a :class:`~jetlet.client.Client` of the
first member with ``.pids`` and ``.addresses`` (the members' REST addresses,
in start order), and ``.add_member()``, which starts one more member and
returns a client of it (it joins the running cluster). :meth:`LocalCluster.stop`
— also called when the start-up raised — sends every process still running
SIGTERM, then SIGKILL if it has not ended within a grace period, reaps them
and removes the temporary directory. The object is also a context manager
whose ``with`` value is the client, so both of these work::

    with local_cluster(members=2) as client:     # a script or a test
        ...

    cluster = local_cluster(members=2)            # a notebook: one cell
    client = cluster.start()
    ...
    cluster.stop()                                # a later cell

Each member writes its log (its stdout and stderr) to ``NAME.log``: in the
temporary directory, removed on stop, unless ``log_dir`` names a directory
to keep them in (``log_paths`` lists them either way). :meth:`LocalCluster.exited`
names the members that ended while the cluster runs, with their exit codes.

The members inherit this process's environment without ``JETLET_TOKEN`` and
``JETLET_SECRET``: the cluster's own token and secret are the ones in its
files. Each runs in a session of its own, so a Ctrl-C at the terminal
reaches only this process, which then stops them with SIGTERM (a member's
clean leave) rather than all at once by SIGINT.

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
import shutil
import subprocess
import sys
import tempfile
import time
import types
from typing import TYPE_CHECKING

from jetlet import errors

if TYPE_CHECKING:
    from jetlet import client as client_mod

START_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0
_POLL_S = 0.05
_PRIVATE_VARIABLES = ("JETLET_TOKEN", "JETLET_SECRET")


def _wait_ready(
    process: subprocess.Popen[bytes], ready: pathlib.Path, log: pathlib.Path, deadline: float
) -> dict[str, str]:
    while time.monotonic() < deadline:
        if ready.exists():
            record: dict[str, str] = json.loads(ready.read_text())
            return record
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-4000:]
            last = next((line for line in reversed(tail.splitlines()) if line.strip()), "(no output)")
            code = process.returncode
            raise errors.JetletError(
                f"member {ready.stem} exited with {code}: {last}\n(its log, {log}, ends:)\n{tail}"
            )
        time.sleep(_POLL_S)
    raise errors.JetletError(f"member {ready.stem} did not start within {START_TIMEOUT_S} s (log: {log})")


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


class LocalCluster:
    """Member processes on loopback: :meth:`start` them, :meth:`stop` them, or use ``with``.

    ``member_args`` are extra ``jetlet member`` flags given to every member
    (e.g. ``["--heartbeat-interval-millis", "100"]``); with TLS flags among
    them, ``ca_file`` is the CA the client checks the members against.
    ``rest_port`` and ``data_port`` (0: any free port) are the first
    member's ports, the next members take the following ones. ``log_dir``
    keeps the members' logs (``m1.log``, ...) after the stop.
    """

    def __init__(
        self,
        members: int = 3,
        member_args: list[str] | None = None,
        ca_file: str = "",
        *,
        log_dir: str | os.PathLike[str] | None = None,
        rest_port: int = 0,
        data_port: int = 0,
    ) -> None:
        if members < 1:
            raise ValueError(f"members must be >= 1, got {members}")
        self.members = members
        self.member_args = list(member_args or [])
        self.ca_file = ca_file
        self.log_dir = pathlib.Path(log_dir) if log_dir is not None else None
        self.rest_port = rest_port
        self.data_port = data_port
        self.client: client_mod.Client | None = None
        """The client of the first member while the cluster runs."""
        self.log_paths: list[pathlib.Path] = []
        """Each member's log file, in start order."""
        self._processes: list[subprocess.Popen[bytes]] = []
        self._records: list[dict[str, str]] = []
        self._workdir: pathlib.Path | None = None
        self._token = ""

    @property
    def names(self) -> list[str]:
        """The members' names (``m1``, ``m2``...), in start order."""
        return [f"m{index + 1}" for index in range(len(self._processes))]

    def start(self) -> client_mod.Client:
        """Start the members; return a client of the first once they form one cluster."""
        if self._workdir is not None:
            raise RuntimeError("this local cluster is already started; stop() it first")
        self._workdir = pathlib.Path(tempfile.mkdtemp(prefix="jetlet-local-"))
        self.log_paths = []
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        self._token = secrets.token_urlsafe(32)
        for secret_name, value in (("token", self._token), ("secret", secrets.token_urlsafe(32))):
            path = self._workdir / secret_name
            path.write_text(value)
            os.chmod(path, 0o600)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            self._spawn("")
            self._records.append(self._wait_ready(0, deadline))
            for _ in range(1, self.members):
                self._spawn(self._records[0]["rest_address"])
            for index in range(1, self.members):
                self._records.append(self._wait_ready(index, deadline))
            clients = [self._client_of(r) for r in self._records]
            _wait_formed(clients, deadline)
        except BaseException:
            self.stop()
            raise
        main = clients[0]
        main.pids = tuple(p.pid for p in self._processes)
        main.addresses = tuple(r["rest_address"] for r in self._records)
        main.add_member = self.add_member
        self.client = main
        return main

    def add_member(self) -> client_mod.Client:
        """Start one more member (it joins the running cluster); return a client of it."""
        if self.client is None:
            raise RuntimeError("the local cluster is not running: start() it first")
        index = len(self._processes)
        self._spawn(self._records[0]["rest_address"])
        self._records.append(self._wait_ready(index, time.monotonic() + START_TIMEOUT_S))
        self.client.pids = tuple(p.pid for p in self._processes)
        self.client.addresses = tuple(r["rest_address"] for r in self._records)
        return self._client_of(self._records[-1])

    def exited(self) -> dict[str, int]:
        """The members whose process has ended, with its exit code (negative: the signal)."""
        return {
            name: code
            for name, process in zip(self.names, self._processes, strict=True)
            if (code := process.poll()) is not None
        }

    def stop(self) -> None:
        """Stop every member (SIGTERM, then SIGKILL after a grace period); keep only ``log_dir``."""
        try:
            _stop_all(self._processes)
        finally:
            self._processes = []
            self._records = []
            self.client = None
            if self._workdir is not None:
                shutil.rmtree(self._workdir, ignore_errors=True)
                self._workdir = None

    def __enter__(self) -> client_mod.Client:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: types.TracebackType | None,
    ) -> None:
        self.stop()

    def _client_of(self, record: dict[str, str]) -> client_mod.Client:
        from jetlet import client as client_mod  # imported on use: ``import jetlet`` stays light

        return client_mod.Client(record["rest_address"], self._token, ca_file=self.ca_file)

    def _spawn(self, seeds: str) -> None:
        assert self._workdir is not None
        index = len(self._processes)
        name = f"m{index + 1}"
        ports = [
            ("--rest-port", self.rest_port + index if self.rest_port else 0),
            ("--data-port", self.data_port + index if self.data_port else 0),
        ]
        command = [
            sys.executable, "-m", "jetlet.member",
            "--name", name,
            "--host", "127.0.0.1",
            *[part for flag, port in ports for part in (flag, str(port))],
            "--token-file", str(self._workdir / "token"),
            "--secret-file", str(self._workdir / "secret"),
            "--ready-file", str(self._workdir / f"{name}.ready"),
            "--parent-pid", str(os.getpid()),
            *(["--members", seeds] if seeds else []),
            *self.member_args,
        ]  # fmt: skip
        log_path = (self.log_dir or self._workdir) / f"{name}.log"
        environment = {k: v for k, v in os.environ.items() if k not in _PRIVATE_VARIABLES}
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=environment,
                start_new_session=True,  # a Ctrl-C at the terminal reaches only this process (see above)
            )
        self._processes.append(process)
        self.log_paths.append(log_path)

    def _wait_ready(self, index: int, deadline: float) -> dict[str, str]:
        assert self._workdir is not None
        name = f"m{index + 1}"
        return _wait_ready(
            self._processes[index], self._workdir / f"{name}.ready", self.log_paths[index], deadline
        )


def local_cluster(
    members: int = 3,
    member_args: list[str] | None = None,
    ca_file: str = "",
    *,
    log_dir: str | os.PathLike[str] | None = None,
    rest_port: int = 0,
    data_port: int = 0,
) -> LocalCluster:
    """``members`` member processes on loopback: ``with local_cluster() as client`` or start()/stop().

    See :class:`LocalCluster` for the arguments.
    """
    return LocalCluster(
        members, member_args, ca_file, log_dir=log_dir, rest_port=rest_port, data_port=data_port
    )
