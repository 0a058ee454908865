"""Garbage collection while jobs run: by heap growth, not by an allocation count.

Theory of operation
-------------------
CPython frees an object when its last reference goes (reference counting);
its cyclic collector only finds objects that reference each other in a
cycle. It runs a young collection every time 700 more container objects
(tuples, lists, dicts, instances) are alive than at the last one, and each
collection walks every young object and everything it points at. A
streaming job keeps many objects alive for a while: the states a snapshot
copies stay until the snapshot is stored, batches wait in queues, keyed
states grow. Measured on NEXMark Q4 and Q6 with snapshots every second
(bench/RESULTS.md, "The collector by heap growth"), a young collection of
50,000-80,000 such objects held every thread of the member for 20-100 ms,
ten to thirteen times in a run of about 20 s, and found nothing to free (the engine's
objects form no cycles): those pauses set the p99.

So while at least one job runs in this process the automatic collector is
off, and a watcher thread checks the heap every :data:`WATCH_INTERVAL_S`
(``sys.getallocatedblocks()``, a count of the small-object allocator's
blocks in use, which costs microseconds): once the heap has grown to
:data:`HEAP_GROWTH` times its size after the last collection (and by at least
:data:`MIN_GROWTH_BLOCKS`), it runs a full collection and takes the heap's
new size as the next baseline. That is Go's rule (``GOGC``: collect when the
heap has doubled since the last collection): cyclic garbage, which user
functions can make, still cannot grow the heap much more than twofold, and a
job whose heap is steady pauses for no collection at all. When the last job
ends, the watcher stops and the collector is switched back on if it was on.
The setting is process-wide, as the collector is.
"""

from __future__ import annotations

import gc
import sys
import threading

HEAP_GROWTH = 2.0
"""A collection runs once the heap is this many times its size after the last one."""
MIN_GROWTH_BLOCKS = 1_000_000
"""...and has grown by at least this many allocator blocks (about 30-100 MB of small objects)."""
WATCH_INTERVAL_S = 1.0
"""How often the watcher looks at the heap's size."""

_lock = threading.Lock()
_running = 0
_was_enabled = False
_stop: threading.Event | None = None
collections = 0
"""Collections the watcher ran in this process (tests read it)."""


def job_started() -> None:
    """A job starts running here: the collector goes off and the watcher starts, if it is the first."""
    global _running, _was_enabled, _stop
    with _lock:
        if _running == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
            _stop = threading.Event()
            baseline = sys.getallocatedblocks()
            watcher = threading.Thread(
                target=_watch, args=(_stop, baseline), name="jetlet-gc-watch", daemon=True
            )
            watcher.start()
        _running += 1


def job_ended() -> None:
    """A job stopped running here: after the last one, the watcher stops and the collector is as it was."""
    global _running, _stop
    with _lock:
        _running -= 1
        if _running == 0:
            if _stop is not None:
                _stop.set()
                _stop = None
            if _was_enabled:
                gc.enable()


def running_jobs() -> int:
    """How many jobs hold the collector off now."""
    return _running


def should_collect(blocks: int, baseline: int) -> bool:
    """Whether a heap of ``blocks`` has grown enough since the last collection left ``baseline``."""
    return blocks >= baseline * HEAP_GROWTH and blocks - baseline >= MIN_GROWTH_BLOCKS


def _watch(stop: threading.Event, baseline: int) -> None:
    global collections
    while not stop.wait(WATCH_INTERVAL_S):
        if should_collect(sys.getallocatedblocks(), baseline):
            gc.collect()
            collections += 1
            baseline = sys.getallocatedblocks()
