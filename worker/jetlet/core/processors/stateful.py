"""Stateful map, filter and flat-map: a state object per key (Jet's ``mapStateful``).

``create_fn()`` makes the state object of a key the first time the key is
seen; the user function receives it with each item and may change it (so it
is a mutable object: a list, a dict, a small class). Every key's state is
saved to snapshots under the key, so it can be restored onto any number of
processors.

*Timestamped* processors receive ``(timestamp, item)`` events (the
pipeline's representation of a stream with timestamps) and emit
``(timestamp, result)``. With a ``ttl`` they also evict state: when the
watermark passes a key's latest event time plus ``ttl``, the key's state is
dropped and ``on_evict_fn(state, key, watermark)`` may emit a last result.

Snapshots *lend* the states (:mod:`jetlet.core.snapshot_writer`): the
member pickles them off the processing thread, and until it has, a state the
next item of its key would change is pickled first, here. So a snapshot costs
the processing thread the states touched while it is being stored, not a
pickle of every state at the barrier.

With a ``copy_fn`` (``map_stateful(..., copy_fn=...)``; a rolling aggregation
brings its operation's) that state is not pickled here but copied: ``copy_fn``
returns a copy of a state that ``fn`` will not change (a new list of the same
items, say), and the member pickles the copy. A state is copied at most once
per snapshot, before its first change after the barrier, so the copy is the
state at the barrier. A ``copy_fn`` that fails fails the job with an error that
names the stage.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from jetlet.core import inbox as inbox_mod
from jetlet.core import processor, snapshot_writer
from jetlet.core import watermark as wm
from jetlet.core.processors import chunking, pending

KeyFn = Callable[[Any], Hashable]

MAP = "map"
FILTER = "filter"
FLAT_MAP = "flat-map"


class StatefulP(processor.Processor):
    """One state per key; ``kind`` is "map", "filter" or "flat-map"."""

    def __init__(
        self,
        kind: str,
        key_fn: KeyFn | None,
        create_fn: Callable[[], Any],
        fn: Callable[..., Any],
        timestamped: bool,
        ttl: int = 0,
        on_evict_fn: Callable[[Any, Any, int], Any] | None = None,
        copy_fn: Callable[[Any], Any] | None = None,
    ) -> None:
        if kind not in (MAP, FILTER, FLAT_MAP):
            raise ValueError(f"unknown stateful kind {kind!r}")
        if ttl and not timestamped:
            raise ValueError("a state ttl needs timestamps: it is measured in event time")
        self._kind = kind
        self._key_fn = key_fn
        self._create = create_fn
        self._fn = fn
        self._timestamped = timestamped
        self._ttl = ttl
        self._on_evict = on_evict_fn
        self._copy_fn = copy_fn
        self._states: dict[Any, list[Any]] = {}  # key -> [state, latest event time]
        self._output = pending.PendingOutput()
        self._sizer = chunking.ChunkSizer()
        self._snapshot = snapshot_writer.SnapshotWriter()
        self._loan = snapshot_writer.Loan({})

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        # As in ChainP: a chunk's last item stays in the inbox until the
        # chunk's outputs are all emitted, so an empty inbox means nothing is held.
        output = self._output
        if output.items:
            if not output.flush(self.outbox):
                return
            inbox.remove()
        outbox = self.outbox
        states = self._states
        key_fn = self._key_fn
        kind = self._kind
        timestamped = self._timestamped
        fn = self._fn  # called with the key when there is one (no method call per item)
        keyed = key_fn is not None
        loan = self._loan
        lent = loan.unclaimed
        sizer = self._sizer
        while inbox:
            room = outbox.room()
            if room <= 0:
                return
            chunk: list[Any] = []
            inbox.drain_to(chunk, sizer.inputs_for(room, len(inbox)) - 1)
            chunk.append(inbox.peek())
            out: list[Any] = []
            for element in chunk:
                ts, item = element if timestamped else (0, element)
                key = None if key_fn is None else key_fn(item)
                slot = states.get(key)
                if slot is None:
                    slot = states[key] = [self._create(), ts]
                else:
                    if lent and key in lent:
                        loan.before_change(key)
                    if ts > slot[1]:
                        slot[1] = ts
                result = fn(slot[0], key, item) if keyed else fn(slot[0], item)
                if kind == FILTER:
                    if result:
                        out.append(element)
                elif kind == MAP:
                    if result is not None:
                        out.append((ts, result) if timestamped else result)
                elif result is not None:
                    out.extend([(ts, r) for r in result] if timestamped else result)
            sizer.observed(len(chunk), len(out))
            output.items = out
            if not output.flush(outbox):
                return
            inbox.remove()

    def try_process_watermark(self, watermark: wm.Watermark) -> bool:
        return self._output.watermark(self.outbox, watermark, self._evict if self._ttl else None)

    def _evict(self, watermark: int) -> list[Any]:
        limit = watermark - self._ttl
        expired = [key for key, slot in self._states.items() if slot[1] < limit]
        out: list[Any] = []
        loan = self._loan
        for key in expired:
            state = self._states.pop(key)[0]
            if loan.unclaimed:  # on_evict_fn may change the state
                loan.before_change(key)
            if self._on_evict is None:
                continue
            result = self._on_evict(state, key, watermark)
            if result is None:
                continue
            if self._kind == FLAT_MAP:
                out.extend((watermark, r) for r in result)
            elif self._kind == MAP:
                out.append((watermark, result))
        return out

    def complete(self) -> bool:
        return self._output.flush(self.outbox)

    def save_to_snapshot(self) -> bool:
        return self._snapshot.write(self.outbox, self._lend)

    def _lend(self) -> list[tuple[None, snapshot_writer.Lent]]:
        self._loan = snapshot_writer.Loan(self._states, None if self._copy_fn is None else self._copy_slot)
        return [(None, snapshot_writer.Lent(self._loan))] if self._states else []

    def _copy_slot(self, slot: list[Any]) -> list[Any]:
        copy_fn = self._copy_fn
        assert copy_fn is not None
        try:
            return [copy_fn(slot[0]), slot[1]]
        except Exception as exc:
            raise snapshot_writer.CopyError(self.context.vertex_name, exc) from exc

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        for key, slot in inbox.take_all():
            if key in self._states:
                raise ValueError(f"the snapshot holds the state of key {key!r} twice")
            self._states[key] = list(slot)


def stateful_p(
    kind: str,
    key_fn: KeyFn | None,
    create_fn: Callable[[], Any],
    fn: Callable[..., Any],
    timestamped: bool = False,
    ttl: int = 0,
    on_evict_fn: Callable[[Any, Any, int], Any] | None = None,
    copy_fn: Callable[[Any], Any] | None = None,
) -> processor.ProcessorFactory:
    """A factory of :class:`StatefulP`; see the module doc.

    ``fn`` is ``fn(state, key, item)`` when ``key_fn`` is given, else
    ``fn(state, item)``; it returns a result (map), a truth value (filter) or
    an iterable (flat-map), None meaning nothing. ``copy_fn(state)``, if
    given, copies a state for snapshots (see the module doc).
    """
    return lambda: StatefulP(kind, key_fn, create_fn, fn, timestamped, ttl, on_evict_fn, copy_fn)
