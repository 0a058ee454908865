"""The coordinator thread: one thread applies every change to the coordinator's job state, in order.

Theory of operation
-------------------
As in Jet, the coordinator's job state (records, executions, snapshots in
flight) is changed by one thread only, so the state machines need no locks
and every change happens in a well-defined order. Everything else — network
threads delivering replies, REST threads asking for an operation, timers —
hands work to it with :meth:`Serial.submit` and gets a future back.

Nothing on the thread blocks on the network: a step that asks members for
something sends its calls and registers the next step with :func:`when_all`,
which runs it on the thread once every reply (or its error, or a timeout)
is in. Blocking work (the grid's replicated writes) runs on an I/O pool and
comes back the same way.

:class:`CoordinatorThread` is the real thread; tests drive the same code with
a :class:`Serial` of their own that runs tasks when told and has a clock of
its own (``tests/cluster/inmemory.py``), so a scenario is deterministic.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")
K = TypeVar("K")


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Serial(Protocol):
    """Runs tasks one at a time, in submission order, and runs tasks after a delay."""

    def submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]: ...

    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> Cancellable: ...

    def in_thread(self) -> bool:
        """Whether the caller is the serial thread itself (so it must not wait on a submitted task)."""
        ...


class _Timer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class CoordinatorThread:
    """A :class:`Serial` on a daemon thread of its own, with a timer heap."""

    def __init__(self, name: str) -> None:
        self._tasks: queue.SimpleQueue[
            tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...]] | None
        ] = queue.SimpleQueue()
        self._timers: list[tuple[float, int, _Timer, Callable[..., Any], tuple[Any, ...]]] = []
        self._timer_ids = itertools.count()
        self._timer_lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._gate = threading.Lock()
        """Held around each task, and by :meth:`hold` to stop the thread between two tasks."""
        self._held = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._timer_thread = threading.Thread(target=self._run_timers, name=f"{name}-timers", daemon=True)
        self._thread.start()
        self._timer_thread.start()

    def submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        if self._closed:
            future.cancel()
            return future
        self._tasks.put((future, fn, args))
        return future

    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> Cancellable:
        timer = _Timer()
        with self._timer_lock:
            heapq.heappush(self._timers, (time.monotonic() + delay_s, next(self._timer_ids), timer, fn, args))
        self._wake.set()
        return timer

    def in_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def hold(self) -> None:
        """Stop running tasks once the current one ends (they queue up) until :meth:`release`.

        A member that was paused holds its coordinator thread until it knows whether the
        cluster removed it: until then nothing it coordinated may act.
        """
        if self.in_thread():
            raise RuntimeError("the coordinator thread cannot hold itself")
        if not self._held:
            self._gate.acquire()
            self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._gate.release()

    @property
    def held(self) -> bool:
        return self._held

    def _run(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            future, fn, args = task
            with self._gate:
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:
                    future.set_exception(exc)
                    if not isinstance(exc, Exception) or not _expected(exc):
                        log.exception("coordinator task %s failed", getattr(fn, "__qualname__", fn))

    def _run_timers(self) -> None:
        while not self._closed:
            with self._timer_lock:
                now = time.monotonic()
                due = []
                while self._timers and self._timers[0][0] <= now:
                    due.append(heapq.heappop(self._timers))
                wait = self._timers[0][0] - now if self._timers else 1.0
            for _, _, timer, fn, args in due:
                if not timer.cancelled:
                    self.submit(fn, *args)
            self._wake.wait(min(max(wait, 0.0), 1.0))
            self._wake.clear()

    def close(self) -> None:
        """Stop after the tasks already submitted; later submissions are cancelled."""
        self._closed = True
        self.release()
        self._tasks.put(None)
        self._wake.set()
        if not self.in_thread():
            self._thread.join(10)
        self._timer_thread.join(10)


def _expected(error: Exception) -> bool:
    """Errors that are answers to a caller (a refused operation), not bugs to log."""
    from jetlet import errors

    return isinstance(error, errors.JetletError)


def when_all(
    serial: Serial,
    futures: Mapping[K, concurrent.futures.Future[Any]],
    timeout_s: float,
    then: Callable[[dict[K, Any]], None],
) -> None:
    """Run ``then(outcomes)`` on the serial thread once every future is done or ``timeout_s`` passed.

    ``outcomes[key]`` is the future's result, or the exception it failed with,
    or a :class:`TimeoutError` for one that was still running.
    """
    pending = dict(futures)
    lock = threading.Lock()
    fired = [False]

    def finish() -> None:
        with lock:
            if fired[0]:
                return
            fired[0] = True
        outcomes: dict[K, Any] = {}
        for key, future in pending.items():
            if not future.done():
                outcomes[key] = TimeoutError(f"no answer within {timeout_s:g} s")
            elif future.cancelled():
                outcomes[key] = concurrent.futures.CancelledError()
            else:
                outcomes[key] = future.exception() or future.result()
        serial.submit(then, outcomes)

    if not pending:
        finish()
        return
    remaining = [len(pending)]

    def one_done(_: concurrent.futures.Future[Any]) -> None:
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            finish()

    timer = serial.call_later(timeout_s, finish)
    for future in pending.values():
        future.add_done_callback(one_done)
    if fired[0]:
        timer.cancel()


def when_done(
    serial: Serial, future: concurrent.futures.Future[T], then: Callable[[T | BaseException], None]
) -> None:
    """Run ``then(result or exception)`` on the serial thread once ``future`` is done."""

    def done(f: concurrent.futures.Future[T]) -> None:
        serial.submit(
            then, f.exception() or f.result() if not f.cancelled() else concurrent.futures.CancelledError()
        )

    future.add_done_callback(done)
