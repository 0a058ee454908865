"""``JobConfig.timeout_millis`` on a cluster: the coordinator cancels a job that runs past it.

Theory of operation
-------------------
As Jet's ``MasterJobContext`` does, the coordinator arms one timer per job
when the job's first execution starts (:meth:`JobTimeouts.arm`, called by
every ``start_execution``; a restart or a resume finds the timer armed and
leaves it). The deadline counts from the job's submission time, kept in its
record, so a coordinator that takes over arms the timer for what is left of
it (at once if it has passed). When the timer fires on the coordinator
thread, a job that has not ended is cancelled with a message naming the
timeout: it ends ``FAILED`` with ``cancelled`` set (the client raises
``JobCancelledError``), as an embedded job does; a suspended job, which runs
nothing, just ends. :meth:`JobTimeouts.clear` drops every timer (this member
stopped coordinating).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from jetlet._cluster import coordinator_thread
from jetlet._cluster.job_records import JobEntry, JobTable, Status

Fail = Callable[[JobEntry, str, str, bool], bool]
"""The coordinator's ``fail(entry, message, traceback, cancelled)``."""


class JobTimeouts:
    """The coordinator's timers of ``timeout_millis`` (see the module doc)."""

    def __init__(self, serial: coordinator_thread.Serial, jobs: JobTable, fail: Fail) -> None:
        self._serial = serial
        self._jobs = jobs
        self._fail = fail
        self._timers: dict[int, coordinator_thread.Cancellable] = {}

    def arm(self, entry: JobEntry) -> None:
        """Arm the job's timer unless it is armed or the job has no timeout (coordinator thread)."""
        timeout_ms = int(entry.config.get("timeout_millis") or 0)
        if timeout_ms <= 0 or entry.id in self._timers:
            return
        left_s = (entry.submission_time + timeout_ms - time.time() * 1000) / 1000
        self._timers[entry.id] = self._serial.call_later(max(0.0, left_s), self._expire, entry.id, timeout_ms)

    def _expire(self, job_id: int, timeout_ms: int) -> None:
        self._timers.pop(job_id, None)
        entry = self._jobs.get(job_id)
        if entry is None or entry.is_terminal:
            return
        message = f"the job ran past its timeout of {timeout_ms} ms (timeout_millis) and was cancelled"
        if entry.status is Status.SUSPENDED:  # nothing runs: it just ends
            entry.failure, entry.cancelled = message, True
            self._jobs.transition(entry, Status.FAILED, message)
        else:
            self._fail(entry, message, "", True)

    def clear(self) -> None:
        """Drop every timer."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
