"""Query 8 with the people broadcast: each member joins its own auctions with every new person.

Query 8 (monitor new users) joins, per tumbling window, the people who registered in it with the
auctions they opened in it. Keyed both ways by person id (``aggregate2`` of two ``to_list``, the
plan of :func:`~jetlet.nexmark.joins.q8_monitor_new_users` with ``broadcast_people=False``), half
of the people and half of the auctions cross to the other member on a two-member cluster. People
are about a third as many as auctions (one event in 50 against three), so this plan is Flink
SQL's broadcast join instead, the small side broadcast:

1. Every member's auctions, as :data:`~jetlet.nexmark.joins.SellerReserve`, go to
   :class:`NewUserAuctionsP` on that member (input 0, a local edge: auctions never cross); the
   people, as :data:`~jetlet.nexmark.joins.IdName`, are broadcast to every processor of the stage
   on every member (input 1).
2. Each processor keeps, per window (by its end), every person of the window and its own auctions,
   both by person id. When the watermark reaches a window's end it emits, for each of its auctions
   whose seller registered in the window, one :class:`~jetlet.nexmark.model.IdNameReserve` per
   registration of that person id, timestamped with the window's end, as the window stage does.

A person id's results are the product of its registrations and its auctions in the window; each
auction is on one processor and meets every registration there, so the union of the processors'
results is the keyed join's, pair for pair (their order differs). Only people (2 % of events)
cross between members, against 4 % of events (half the people and auctions) in the keyed plan.

An item for a window that was already emitted (its end at or before the watermark) is dropped and
counted (``lateEventsDropped``), as the window stage drops it; a late person is counted by processor
0 only, as it reaches every processor. Unlike the keyed plan, where a person is late or not once, a
broadcast person is judged against each processor's own watermark, so a person late at its source
may come out with the auctions of some processors and not of others (NEXMark's sources are ordered:
nothing is late). When the input ends, every window still open is emitted, as the window stage does.

**Snapshots.** A processor saves its watermark and its windows (people and auctions by id, copied
at the barrier) under a :class:`~jetlet.core.snapshot_keys.ProcessorKey`, so that every processor
of a restored job reads every processor's save. Processor ``i`` of ``n`` restores the auctions that
processor ``j`` saved when ``j % n == i`` (each auction on exactly one processor), a copy of each
window's people from the first save that holds the window, and the lowest of the saved watermarks
(as the window stage does). With exactly-once snapshots every processor has every person that came
before the barrier when it saves (barriers are aligned on every input), so every save holding a
window holds the same people for it; one whose watermark had passed the window emitted its results
already, and no replayed event can fall in it. At-least-once saves may hold different people (some
after the barrier): results may then come out more than once, as that guarantee allows.
"""

from __future__ import annotations

from typing import Any

from jetlet.core import inbox as inbox_mod
from jetlet.core import processor, snapshot_keys, snapshot_writer
from jetlet.core import watermark as wm
from jetlet.core.processors import pending
from jetlet.nexmark.model import IdNameReserve

SNAPSHOT_TAG = "nexmark-q8-new-users"
NO_WATERMARK = -(2**63)
AUCTIONS: int = 0
"""The input (and the index in a window's pair of dicts) of the auctions; the people's is 1."""
PEOPLE: int = 1

Window = tuple[dict[int, list[Any]], dict[int, list[Any]]]
"""One window's auctions (seller -> reserves) and people (id -> names), indexed by input."""


class NewUserAuctionsP(processor.Processor):
    """Query 8's window join of this processor's auctions with every person (module doc).

    Input 0: ``(timestamp, (seller, reserve))`` of this member; input 1: ``(timestamp, (id, name))``
    broadcast from every member. Output: ``(window end, IdNameReserve)``.
    """

    def __init__(self, window_ms: int) -> None:
        check_window(window_ms)
        self._size = window_ms
        self._windows: dict[int, Window] = {}
        self._watermark = NO_WATERMARK
        self._late = 0
        self._completing = False
        self._output = pending.PendingOutput()
        self._snapshot = snapshot_writer.SnapshotWriter()

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        output = self._output
        if not output.flush(self.outbox):
            return
        size, windows, watermark = self._size, self._windows, self._watermark
        side = PEOPLE if ordinal == PEOPLE else AUCTIONS
        counts_late = side == AUCTIONS or self.context.global_processor_index == 0
        for timestamp, (key, value) in inbox.take_all():
            end = timestamp - timestamp % size + size
            if end <= watermark:
                self._late += counts_late
                continue
            window = windows.get(end)
            if window is None:
                window = windows[end] = ({}, {})
            by_id = window[side]
            values = by_id.get(key)
            if values is None:
                by_id[key] = [value]
            else:
                values.append(value)

    def try_process_watermark(self, watermark: wm.Watermark) -> bool:
        return self._output.watermark(self.outbox, watermark, self._close)

    def _close(self, watermark: int) -> list[Any]:
        """The results of every window ending at or before ``watermark``, oldest first; they are dropped."""
        self._watermark = max(self._watermark, watermark)
        out: list[Any] = []
        for end in sorted(end for end in self._windows if end <= watermark):
            auctions, people = self._windows.pop(end)
            for seller, reserves in auctions.items():
                names = people.get(seller)
                if names is not None:
                    out.extend(
                        (end, IdNameReserve(seller, name, reserve)) for name in names for reserve in reserves
                    )
        return out

    def complete(self) -> bool:
        """Emit every window still open (the input ended), then nothing more."""
        if not self._completing:
            if not self._output.flush(self.outbox):
                return False
            self._completing = True
            self._output.items = self._close(max(self._windows, default=NO_WATERMARK))
        return self._output.flush(self.outbox)

    def metrics(self) -> dict[str, int]:
        return {"lateEventsDropped": self._late}

    def save_to_snapshot(self) -> bool:
        if not self._output.flush(self.outbox):
            return False
        return self._snapshot.write(self.outbox, self._entries)

    def _entries(self) -> list[tuple[Any, Any]]:
        saved = {
            end: (_copied(auctions), _copied(people)) for end, (auctions, people) in self._windows.items()
        }
        key = snapshot_keys.ProcessorKey(SNAPSHOT_TAG, self.context.global_processor_index)
        return [(key, snapshot_writer.Copied((self._watermark, saved)))]

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        """Take this processor's share of every save (module doc). The saves are shared with the other
        processors of this member: what is kept is copied."""
        total, mine = self.context.total_parallelism, self.context.global_processor_index
        watermarks: list[int] = []
        for key, value in sorted(inbox.take_all(), key=_saved_by):
            if not (isinstance(key, snapshot_keys.ProcessorKey) and key.tag == SNAPSHOT_TAG):
                raise ValueError(f"query 8's join cannot restore the snapshot entry {key!r}")
            watermark, saved = value
            watermarks.append(watermark)
            for end, (auctions, people) in saved.items():
                window = self._windows.get(end)
                if window is None:
                    window = self._windows[end] = ({}, _copied(people))
                if key.processor_index % total == mine:
                    for seller, reserves in auctions.items():
                        window[AUCTIONS].setdefault(seller, []).extend(reserves)
        if watermarks:
            self._watermark = min(watermarks)


def _saved_by(entry: tuple[Any, Any]) -> int:
    key = entry[0]
    return key.processor_index if isinstance(key, snapshot_keys.ProcessorKey) else -1


def check_window(window_ms: object) -> None:
    """Raise ValueError naming ``window_ms`` unless it is an int of at least 1."""
    if type(window_ms) is not int or window_ms < 1:
        raise ValueError(f"query 8's window_ms must be an int >= 1, got {window_ms!r}")


def _copied(by_id: dict[int, list[Any]]) -> dict[int, list[Any]]:
    """``by_id`` with lists of its own (the values themselves are immutable tuples' fields)."""
    return {key: list(values) for key, values in by_id.items()}


def new_user_auctions_p(window_ms: int) -> processor.ProcessorFactory:
    """A factory of :class:`NewUserAuctionsP` with tumbling windows of ``window_ms`` (checked now)."""
    check_window(window_ms)
    return lambda: NewUserAuctionsP(window_ms)
