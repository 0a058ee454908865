"""Child processes that cannot outlive the harness.

Every process the harness starts (etcd, the API server, the controller manager, each pod's
containers) runs in its own session, so its whole process group can be signalled, and under
``setpriv --pdeathsig KILL`` where available, so the kernel kills it if the thread that started it
dies without cleaning up (the test run was SIGKILLed). Every group is recorded here; an ``atexit``
hook and a SIGTERM handler kill what is still recorded. Tests and fixtures stop things in order
long before that: this is the last line, not the plan.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from types import FrameType

_lock = threading.Lock()
_groups: set[int] = set()
_SETPRIV = shutil.which("setpriv")


def guarded_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` wrapped so the kernel SIGKILLs it when its parent thread dies (when setpriv exists)."""
    return [_SETPRIV, "--pdeathsig", "KILL", "--", *argv] if _SETPRIV else list(argv)


def register(pgid: int) -> None:
    with _lock:
        _groups.add(pgid)


def unregister(pgid: int) -> None:
    with _lock:
        _groups.discard(pgid)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_all() -> None:
    """SIGKILL every recorded process group (idempotent; used at exit)."""
    with _lock:
        groups = list(_groups)
        _groups.clear()
    for pgid in groups:
        signal_group(pgid, signal.SIGKILL)


def spawn(
    argv: Sequence[str], log_path: str, env: dict[str, str] | None = None, cwd: str | None = None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session, stdout and stderr appended to ``log_path``, and record its group."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            guarded_argv(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    register(proc.pid)
    return proc


def stop(proc: subprocess.Popen[bytes], grace: float = 5.0) -> int | None:
    """SIGTERM the process's group, SIGKILL it after ``grace`` seconds; the exit code."""
    if proc.poll() is None:
        signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            signal_group(proc.pid, signal.SIGKILL)
            proc.wait(10)
    # the leader may be gone while others of its group linger
    signal_group(proc.pid, signal.SIGKILL)
    unregister(proc.pid)
    return proc.returncode


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_until(condition: object, timeout: float, what: str, interval: float = 0.1) -> None:
    """Call ``condition()`` until it is truthy; TimeoutError naming ``what`` after ``timeout`` seconds."""
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except Exception:  # not up yet
            pass
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} not ready after {timeout}s")
        time.sleep(interval)


_previous_sigterm: object = None


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    kill_all()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def install_exit_guards() -> None:
    """Kill recorded groups at interpreter exit and on SIGTERM (only from the main thread)."""
    global _previous_sigterm
    atexit.register(kill_all)
    if threading.current_thread() is threading.main_thread() and _previous_sigterm is None:
        _previous_sigterm = signal.signal(signal.SIGTERM, _on_sigterm)
