"""Fixtures shared by every test: no test may leave a jetlet thread running.

The engine names its threads ``jetlet-cooperative-<i>`` (the cooperative
workers) and ``jetlet-blocking-<tasklet>`` (one per non-cooperative
processor); a job with ``timeout_millis`` also starts a ``threading.Timer``.
The autouse fixture below notes which of those threads exist before a test
and fails the test if new ones are still alive after it, once they were
given a short, bounded time to finish (an instance that shut down stops its
threads, but the last of them may still be returning from its loop).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

_JOIN_DEADLINE_S = 5.0


def _is_jetlet_thread(thread: threading.Thread) -> bool:
    return thread.name.startswith("jetlet-") or isinstance(thread, threading.Timer)


def _jetlet_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if _is_jetlet_thread(t)}


def _still_alive(threads: set[threading.Thread], deadline: float) -> list[threading.Thread]:
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [t for t in threads if t.is_alive()]


@pytest.fixture(autouse=True)
def no_leaked_jetlet_threads() -> Iterator[None]:
    """Given the jetlet threads before a test, then no new one outlives it."""
    before = _jetlet_threads()
    yield
    leaked = _still_alive(_jetlet_threads() - before, time.monotonic() + _JOIN_DEADLINE_S)
    if leaked:
        names = ", ".join(sorted(t.name for t in leaked))
        pytest.fail(f"the test left jetlet threads running: {names}", pytrace=False)


_ONE_WORKER_EACH = {"kube": "kube", "spark": "spark"}
"""Test folders whose session fixture is a heavy process (a Kubernetes control plane, a Spark JVM):
under pytest-xdist each runs whole on one worker (``--dist loadgroup``), so the session starts it once."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = item.nodeid.split("/")
        group = _ONE_WORKER_EACH.get(parts[1]) if len(parts) > 2 and parts[0] == "tests" else None
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
