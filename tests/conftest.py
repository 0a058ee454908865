"""Fixtures shared by every test: no test may leave a jetlet thread running.

The engine names its threads ``jetlet-cooperative-<i>`` (the cooperative
workers) and ``jetlet-blocking-<tasklet>`` (one per non-cooperative
processor); a job with ``timeout_millis`` also starts a ``threading.Timer``.
The autouse fixture below notes which of those threads exist before a test
and fails the test if new ones are still alive after it, once they were
given a short, bounded time to finish (an instance that shut down stops its
threads, but the last of them may still be returning from its loop).

Under pytest-xdist, ``_HeavyFolderScheduling`` keeps each folder with a
heavy session fixture on one worker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadGroupScheduling

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
under pytest-xdist (``--dist loadgroup``) each runs whole on one worker, so the session starts it once."""


def _heavy_group(nodeid: str) -> str | None:
    parts = nodeid.split("/")
    return _ONE_WORKER_EACH.get(parts[1]) if len(parts) > 2 and parts[0] == "tests" else None


class _HeavyFolderScheduling(LoadGroupScheduling):
    """``--dist loadgroup`` with the groups named by folder, not by ``xdist_group`` marks.

    pytest-xdist 3.8 groups marked tests by appending ``@group`` to
    ``item._nodeid``, which pytest 9.2 no longer reads: every test went to
    any worker, and both workers started a control plane and a JVM. Each
    heavy folder is one work unit here, every other test its own; xdist
    hands out the largest units first, so both heavy folders start at once.
    """

    def _split_scope(self, nodeid: str) -> str:
        return _heavy_group(nodeid) or nodeid


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadGroupScheduling | None:
    return _HeavyFolderScheduling(config, log) if config.getvalue("dist") == "loadgroup" else None
