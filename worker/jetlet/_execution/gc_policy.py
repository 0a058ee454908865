"""Garbage collection while jobs run: fewer collections of the young generation.

CPython collects its youngest generation of container objects every 700
net allocations (tuples, lists, dicts...). A streaming job allocates
millions of them: batches, events, window results. Every tenth young
collection promotes survivors, and every tenth of those is a full
collection that scans the whole heap, including the job's own input.
Measured on the NEXMark Q5 benchmark, a quarter of the job's time went to
such collections, while the engine's objects are freed by reference
counting anyway (they form no cycles).

So while at least one job runs in this process, the young generation's
threshold is raised to :data:`YOUNG_THRESHOLD`; when the last job ends the
previous thresholds come back. Cyclic garbage is still collected, only less
often. The setting is process-wide, as the collector is.
"""

from __future__ import annotations

import gc
import threading

YOUNG_THRESHOLD = 50_000
"""Allocations between young collections while jobs run (CPython's default is 700)."""

_lock = threading.Lock()
_running = 0
_saved: tuple[int, int, int] | None = None


def job_started() -> None:
    """A job starts running here: raise the young threshold if it is the first."""
    global _running, _saved
    with _lock:
        if _running == 0:
            _saved = gc.get_threshold()
            young, middle, old = _saved
            gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)
        _running += 1


def job_ended() -> None:
    """A job stopped running here: restore the thresholds after the last one."""
    global _running, _saved
    with _lock:
        _running -= 1
        if _running == 0 and _saved is not None:
            gc.set_threshold(*_saved)
            _saved = None


def running_jobs() -> int:
    """How many jobs hold the raised threshold now."""
    return _running
