"""The tasklet execution service: the threads that run every job's tasklets.

Cooperative tasklets share ``cooperative_thread_count`` worker threads. Each
worker runs its tasklets round-robin, one ``call()`` each per pass. A pass in
which no tasklet made progress makes the worker back off: a few immediate
retries, then ``sleep(0)`` to yield the GIL, then parking on an event for
10 µs, doubling up to 1 ms (a new tasklet wakes it at once).

Work stealing (Jet's): when a worker's tasklet finishes, it looks for the
worker with the most tasklets; if that one has at least two more than
itself, it *marks* that worker's last tasklet. The owner sees the mark before
its next call of that tasklet and hands it over, so a tasklet is never run by
two threads at once, and never moved in the middle of a call.

A non-cooperative tasklet gets a thread of its own with the same loop. A
blocking *sink* (no output edges, only queues in) whose queues wake it when
something arrives (:meth:`~jetlet._execution.progress.Tasklet.wake_on_input`)
parks at once, up to :data:`_MAX_INPUT_PARK_S`, while it waits for input alone
(:meth:`~jetlet._execution.progress.Tasklet.waits_for_input_alone`: taking
input, no snapshots to commit, nothing held), and 1 ms otherwise. Polling every
millisecond, an idle sink's thread took the GIL from the cooperative thread a
thousand times a second; on NEXMark Q3 over two members (the benchmark's list
sink idle) the job ran 0.3-26 % faster per paired round (bench/RESULTS.md).
What does not come through its queues (a cancellation, the instance's
shutdown, a timer the processor checks in ``try_process``) then waits up to
that park.

While jobs run, the cyclic garbage collector runs only when the heap has
grown (:mod:`jetlet._execution.gc_policy`). A cooperative worker tells
:mod:`jetlet._execution.gil_yield` when it becomes busy and idle (once per
change), so that a member's snapshot store gives way to it.

An :class:`ExecutionTracker` follows one job's tasklets on this member: the
first exception wins, marks the job cancelled, and every worker then
dismisses that job's tasklets (closing each) at its next turn; the tracker's
future completes once every tasklet is gone.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Sequence

from jetlet import errors
from jetlet._execution import gc_policy, gil_yield
from jetlet._execution.progress import Tasklet

_log = logging.getLogger(__name__)

_SPIN_PASSES = 2
_YIELD_PASSES = 4
_MIN_PARK_S = 10e-6
_MAX_PARK_S = 1e-3
_MAX_INPUT_PARK_S = 0.02
"""The longest park of a blocking sink's thread while it waits for input alone (its queues wake it)."""
_MAX_DOUBLINGS = 20
_LONGEST_PARK_S = _MIN_PARK_S * (1 << _MAX_DOUBLINGS)
"""No park is longer (about 10 s), whatever ``max_park`` a thread asks for."""
_EMPTY_PARK_S = 0.05


class ExecutionTracker:
    """One job's tasklets on one member: completion, first failure, cancellation."""

    def __init__(self, name: str, on_done: Callable[[BaseException | None], None] | None = None) -> None:
        self.name = name
        self.cancelled = False
        self.error: BaseException | None = None
        self.future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._on_done = on_done
        self._remaining = 0
        self._lock = threading.Lock()

    def expect(self, count: int) -> None:
        with self._lock:
            self._remaining += count

    def fail(self, error: BaseException, where: str) -> None:
        """Record a failure; the first one wins and cancels the rest of the job."""
        with self._lock:
            if self.error is None:
                self.error = _as_job_error(error, self.name, where)
            self.cancelled = True

    def cancel(self, reason: str = "cancelled") -> None:
        with self._lock:
            if self.error is None:
                self.error = errors.JobCancelledError(f"job {self.name!r} {reason}")
            self.cancelled = True

    def tasklet_finished(self) -> None:
        with self._lock:
            self._remaining -= 1
            finished = self._remaining == 0
        if finished:
            self._finish()

    def _finish(self) -> None:
        if self._on_done is not None:
            try:
                self._on_done(self.error)
            except BaseException as exc:
                _log.exception("job %s: completion callback failed", self.name)
                if self.error is None:
                    self.error = _as_job_error(exc, self.name, "completion")
        if self.error is None:
            self.future.set_result(None)
        else:
            self.future.set_exception(self.error)


def _as_job_error(error: BaseException, job: str, where: str) -> BaseException:
    if isinstance(error, errors.JetletError):
        return error
    text = errors.user_traceback(error)
    failure = errors.JobFailedError(f"job {job!r} failed in {where}: {type(error).__name__}: {error}", text)
    failure.__cause__ = error
    return failure


class _Entry:
    """A tasklet with its job's tracker and its run state."""

    __slots__ = ("initialized", "tasklet", "tracker")

    def __init__(self, tasklet: Tasklet, tracker: ExecutionTracker) -> None:
        self.tasklet = tasklet
        self.tracker = tracker
        self.initialized = False


def _run_step(entry: _Entry) -> bool | None:
    """Call a tasklet once; True: progress, False: none, None: it is finished (dismiss it)."""
    tracker = entry.tracker
    if tracker.cancelled:
        return None
    tasklet = entry.tasklet
    try:
        if not entry.initialized:
            entry.initialized = True
            tasklet.init()
        started = time.perf_counter_ns()
        state = tasklet.call()
        took = time.perf_counter_ns() - started
    except BaseException as exc:
        tracker.fail(exc, tasklet.name)
        return None
    if took > tasklet.longest_call_ns:
        tasklet.longest_call_ns = took
    progress = state.made_progress
    if progress:
        tasklet.busy_ns += took
    if state.is_done:
        return None
    return progress


def _dismiss(entry: _Entry) -> None:
    try:
        entry.tasklet.close()
    except BaseException as exc:
        entry.tracker.fail(exc, f"{entry.tasklet.name}.close()")
    entry.tracker.tasklet_finished()


class _Backoff:
    """Spin, yield, then park with doubling timeouts up to ``max_park`` (1 ms by default, at most
    :data:`_LONGEST_PARK_S`); ``wake`` ends a park."""

    __slots__ = ("_idle", "_wake")

    def __init__(self, wake: threading.Event) -> None:
        self._wake = wake
        self._idle = 0

    def reset(self) -> None:
        self._idle = 0

    def idle(self, max_park: float = _MAX_PARK_S) -> None:
        self._idle += 1
        idle = self._idle
        if idle <= _SPIN_PASSES:
            return
        if idle <= _SPIN_PASSES + _YIELD_PASSES:
            time.sleep(0)
            return
        doublings = min(idle - _SPIN_PASSES - _YIELD_PASSES, _MAX_DOUBLINGS)
        if self._wake.wait(min(max_park, _MIN_PARK_S * (1 << doublings))):
            self._wake.clear()


def _park_for_input(wake: threading.Event) -> None:
    """Park a blocking sink that waits for input alone until its queues wake it, at most
    :data:`_MAX_INPUT_PARK_S`: at once, without the spins, yields and short parks of a backoff (each a
    wake-up that takes the GIL and, when every core is busy, a core from a processing thread)."""
    if wake.wait(_MAX_INPUT_PARK_S):
        wake.clear()


class _CooperativeWorker:
    def __init__(self, service: TaskletExecutionService, index: int) -> None:
        self.service = service
        self.index = index
        self.tasklets: list[_Entry] = []  # replaced, never mutated (copy on write)
        self.steal_request: tuple[_Entry, _CooperativeWorker] | None = None
        self.wake = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"jetlet-cooperative-{index}", daemon=True)
        self.iterations = 0
        """Passes over its tasklets so far (Jet's ``iterationCount``)."""

    def add(self, entries: Sequence[_Entry]) -> None:
        with self.service.lock:
            self.tasklets = self.tasklets + list(entries)
        self.wake.set()

    def _remove(self, entry: _Entry) -> None:
        with self.service.lock:
            self.tasklets = [e for e in self.tasklets if e is not entry]
            request = self.steal_request
            if request is not None and request[0] is entry:
                self.steal_request = None

    def _run(self) -> None:
        try:
            self._run_passes()
        finally:
            gil_yield.idle(self)  # never left busy, whatever ended the loop

    def _run_passes(self) -> None:
        backoff = _Backoff(self.wake)
        service = self.service
        busy = False  # as gil_yield last heard it
        while not service.shutting_down:
            tasklets = self.tasklets
            if not tasklets:
                if busy:
                    gil_yield.idle(self)
                    busy = False
                if self.wake.wait(_EMPTY_PARK_S):
                    self.wake.clear()
                continue
            self.iterations += 1
            if self._pass(tasklets):
                if not busy:
                    gil_yield.busy(self)
                    busy = True
                backoff.reset()
            else:
                if busy:
                    gil_yield.idle(self)
                    busy = False
                backoff.idle()
        for entry in self.tasklets:
            entry.tracker.cancel("stopped: the instance shut down")
            _dismiss(entry)
        self.tasklets = []

    def _pass(self, tasklets: list[_Entry]) -> bool:
        """One call of each tasklet; True if any made progress. (A method of its own, so that no local
        of the loop keeps a finished job's tasklet alive while the worker idles.)"""
        progress = False
        for entry in tasklets:
            request = self.steal_request
            if request is not None and request[0] is entry:
                self._hand_over(entry, request[1])
                continue
            outcome = _run_step(entry)
            if outcome is None:
                self._remove(entry)
                _dismiss(entry)
                self._try_steal()
                progress = True
            elif outcome:
                progress = True
        return progress

    def _hand_over(self, entry: _Entry, thief: _CooperativeWorker) -> None:
        with self.service.lock:
            self.tasklets = [e for e in self.tasklets if e is not entry]
            thief.tasklets = [*thief.tasklets, entry]
            self.steal_request = None
            self.service.steals += 1
        thief.wake.set()

    def _try_steal(self) -> None:
        with self.service.lock:
            mine = len(self.tasklets)
            victim = max(self.service.workers, key=lambda w: len(w.tasklets))
            if victim is self or victim.steal_request is not None or len(victim.tasklets) - mine < 2:
                return
            victim.steal_request = (victim.tasklets[-1], self)


class TaskletExecutionService:
    """Runs tasklets: a pool of cooperative workers plus a thread per blocking tasklet."""

    def __init__(self, cooperative_thread_count: int = 1) -> None:
        if cooperative_thread_count < 1:
            raise ValueError(f"cooperative_thread_count must be >= 1, got {cooperative_thread_count}")
        self.lock = threading.Lock()
        self.shutting_down = False
        self.steals = 0
        self.workers = [_CooperativeWorker(self, i) for i in range(cooperative_thread_count)]
        self._blocking_threads: set[threading.Thread] = set()
        for worker in self.workers:
            worker.thread.start()

    def submit(self, tasklets: Sequence[Tasklet], tracker: ExecutionTracker) -> None:
        """Start running ``tasklets`` for the job that ``tracker`` follows."""
        if self.shutting_down:
            raise RuntimeError("the execution service is shut down")
        gc_policy.job_started()
        tracker.future.add_done_callback(lambda _: gc_policy.job_ended())
        tracker.expect(len(tasklets))
        cooperative = [_Entry(t, tracker) for t in tasklets if t.is_cooperative()]
        blocking = [_Entry(t, tracker) for t in tasklets if not t.is_cooperative()]
        for entry in blocking:
            thread = threading.Thread(
                target=self._run_blocking,
                args=(entry,),
                name=f"jetlet-blocking-{entry.tasklet.name}",
                daemon=True,
            )
            with self.lock:
                self._blocking_threads.add(thread)
            thread.start()
        # Spread cooperative tasklets evenly, starting with the least loaded workers.
        shares: dict[int, list[_Entry]] = {}
        loads = {w.index: len(w.tasklets) for w in self.workers}
        for entry in cooperative:
            target = min(loads, key=lambda i: (loads[i], i))
            loads[target] += 1
            shares.setdefault(target, []).append(entry)
        for index, entries in shares.items():
            self.workers[index].add(entries)

    def _run_blocking(self, entry: _Entry) -> None:
        wake = threading.Event()
        backoff = _Backoff(wake)
        tasklet = entry.tasklet
        woken_by_input = tasklet.wake_on_input(wake)
        try:
            while True:
                if self.shutting_down:
                    entry.tracker.cancel("stopped: the instance shut down")
                outcome = _run_step(entry)
                if outcome is None:
                    break
                if outcome:
                    backoff.reset()
                elif woken_by_input and tasklet.waits_for_input_alone():
                    _park_for_input(wake)
                else:
                    backoff.idle()
            _dismiss(entry)
        finally:
            with self.lock:
                self._blocking_threads.discard(threading.current_thread())

    def worker_stats(self) -> list[tuple[int, int]]:
        """(passes so far, tasklets held now) of each cooperative worker: Jet's ``iterationCount`` and
        ``taskletCount``."""
        return [(w.iterations, len(w.tasklets)) for w in self.workers]

    def tasklet_counts(self) -> list[int]:
        """How many cooperative tasklets each worker holds now."""
        return [len(w.tasklets) for w in self.workers]

    def shutdown(self, timeout: float = 10.0) -> None:
        """Cancel what still runs and stop every thread (waits up to ``timeout`` each)."""
        self.shutting_down = True
        for worker in self.workers:
            worker.wake.set()
        for worker in self.workers:
            worker.thread.join(timeout)
        with self.lock:
            blocking = list(self._blocking_threads)
        for thread in blocking:
            thread.join(timeout)
