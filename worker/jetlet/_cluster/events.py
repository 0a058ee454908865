"""The job-event feed: a versioned, bounded log of what happens to jobs and members.

Theory of operation
-------------------
The coordinator appends a :class:`~jetlet.records.JobEvent` for every job
transition, snapshot (started, completed with its size, keys and duration,
failed), restart, member joined or left, and coordinator change. Each event
gets the next id (ids grow by one, so a reader knows exactly what it has
seen). The log keeps the newest ``capacity`` events in memory; a reader
asks for the events after the last id it saw (:meth:`EventLog.read`) and
waits up to a timeout for news. A reader that fell behind the bound gets a
:attr:`~jetlet.records.EventKind.GAP` event first, saying how many events it
missed, never a silent hole.

Surviving a take-over. Every event is also handed to ``persist`` (the
coordinator writes it to the replicated grid, in blocks of :data:`BLOCK`
ids, from a thread of its own so appending never waits on the network), and
readers see an event only once it is replicated: a member that takes over
as coordinator calls :meth:`restore` with the events the grid kept and goes
on numbering after the last one, so an id a reader has seen always names the
same event. An event appended but not yet replicated when its coordinator
died is lost unseen; a reader that is somehow past the restored log's end
gets a GAP event rather than being left waiting.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from jetlet import records

BLOCK = 1000
"""Events per grid map when the log is persisted (``events/<id // BLOCK>``), so old blocks drop whole."""
DEFAULT_CAPACITY = 10_000


@dataclasses.dataclass(frozen=True)
class EventsPage:
    """Events after a reader's ``since``, and the id to ask from next."""

    events: list[records.JobEvent]
    last_id: int


class EventLog:
    """A bounded, numbered log of job events (thread-safe). See the module doc."""

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        persist: Callable[[records.JobEvent], concurrent.futures.Future[Any] | None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._events: collections.deque[records.JobEvent] = collections.deque(maxlen=capacity)
        self._last_id = 0
        self._visible_id = 0
        """Readers see events up to here: each once ``persist`` replicated it (so a take-over keeps it)."""
        self._persist = persist
        self._clock = clock
        self._changed = threading.Condition()
        self._waiters: list[tuple[int, concurrent.futures.Future[EventsPage]]] = []

    @property
    def last_id(self) -> int:
        with self._changed:
            return self._last_id

    def append(self, kind: records.EventKind, **fields: Any) -> records.JobEvent:
        """Add one event (fields of :class:`~jetlet.records.JobEvent`); readers see it once replicated."""
        with self._changed:
            self._last_id += 1
            event = records.JobEvent(self._last_id, int(self._clock() * 1000), kind, **fields)
            self._events.append(event)
        replicated = self._persist(event) if self._persist is not None else None
        if replicated is None:
            self._show(event.id)
        else:
            replicated.add_done_callback(lambda _: self._show(event.id))
        return event

    def _show(self, event_id: int) -> None:
        """Readers may see every event up to ``event_id`` (persistence completes in order)."""
        with self._changed:
            if event_id <= self._visible_id:
                return
            self._visible_id = event_id
            self._changed.notify_all()
            waiters, self._waiters = self._waiters, []
            pages = [(future, self._page(since)) for since, future in waiters]
        for future, page in pages:
            if not future.done():
                future.set_result(page)

    def clear(self) -> None:
        """Forget the log (this member was removed from its cluster; the next coordinator keeps it)."""
        with self._changed:
            self._events.clear()

    def restore(self, events: Iterable[records.JobEvent]) -> None:
        """Take over a log kept elsewhere (a new coordinator's start): keep the newest, number after them."""
        with self._changed:
            merged = {e.id: e for e in (*events, *self._events)}
            self._events.clear()
            capacity = self._events.maxlen or len(merged)
            self._events.extend(merged[i] for i in sorted(merged)[-capacity:])
            self._last_id = max([self._last_id, *merged])
            self._visible_id = max(self._visible_id, *merged) if merged else self._visible_id
            self._changed.notify_all()

    def read(self, since: int, timeout: float = 0.0) -> EventsPage:
        """The events with ids above ``since``; waits up to ``timeout`` s when there are none yet."""
        with self._changed:
            if timeout > 0:
                self._changed.wait_for(lambda: self._visible_id > since, timeout)
            return self._page(since)

    def read_async(self, since: int) -> concurrent.futures.Future[EventsPage]:
        """A future of :meth:`read`'s page, completed at once if there is news, else at the next event."""
        future: concurrent.futures.Future[EventsPage] = concurrent.futures.Future()
        with self._changed:
            if since != self._visible_id:
                future.set_result(self._page(since))
            else:
                self._waiters.append((since, future))
        return future

    def _page(self, since: int) -> EventsPage:
        last = self._visible_id
        events = [e for e in self._events if since < e.id <= last]
        first = self._events[0].id if self._events else last + 1
        missed = first - since - 1 if since < first - 1 else 0
        if since > last:  # the reader saw events this log never kept (an older log, lost whole)
            missed = since - last
        if missed:
            gap = records.JobEvent(
                last if since > last else first - 1,
                int(self._clock() * 1000),
                records.EventKind.GAP,
                reason=f"{missed} event(s) are no longer in the log",
                details={"missed": missed},
            )
            events.insert(0, gap)
        return EventsPage(events, last)

    def close(self) -> None:
        """Answer every waiting reader with what there is (a stopping member has nothing more)."""
        with self._changed:
            waiters, self._waiters = self._waiters, []
            pages = [(future, self._page(since)) for since, future in waiters]
        for future, page in pages:
            if not future.done():
                future.set_result(page)


def block_of(event_id: int) -> str:
    """The grid map that keeps an event when the log is persisted."""
    return f"events/{event_id // BLOCK:08d}"
