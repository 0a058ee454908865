"""Source processors: where items enter a DAG, and how they resume after a restart.

A source has no inputs: the engine calls ``complete()`` until it returns
True, and the source emits a batch per call. Parallel sources split the work
by their global processor index: processor ``i`` of ``n`` takes items
``i, i + n, i + 2n, ...``, so the whole cluster emits each item exactly once.

**Replay.** Each source here saves, at every snapshot, how far it got (its
*position*) under a :class:`~jetlet.core.snapshot_keys.ProcessorKey`. That is
a broadcast key, so on a restore every processor receives the positions of
every processor that saved, and picks what concerns it. Before it saves, a
source emits what it read but the outbox refused, so its position is exactly
after its last emitted item: the snapshot barrier follows that item, and the
restored source starts with the next one.

* A *strided* source (a re-iterable collection, :func:`source_rate`) emits
  global indices; processor ``i`` of ``n`` saves the next index of its slice
  (a :class:`SlicePosition`). Index ``s`` was emitted iff
  ``s < next[s % n]``, whatever parallelism the job is restored with: a
  :class:`StridedCursor` restored from the positions of all ``n`` processors
  walks its new slice from the lowest saved ``next`` and skips the indices
  that rule says were emitted. Past the highest saved ``next`` nothing was
  emitted, so the walk is checked only in between. A processor that resumed
  that way has also skipped indices above its own ``next``, so it saves the
  vectors it restored from (``SlicePosition.earlier``) with its own: the
  next restore treats an index as emitted if any of them says so, and drops
  the vectors whose every index lies below all the new ``next`` values.
* A one-shot iterator (a generator given to :func:`source_from_iterable`)
  cannot be split or re-read: processor 0 emits all of it and saves how many
  items it has taken. A restore takes the iterator to that count: the
  iterator is the one object the source holds, so this works when it was
  not read past the snapshot in this process (a copy that travelled with the
  job), and fails with an error naming the source when it was.
* :func:`source_from_generator` calls ``generate(context)`` afresh in every
  execution; each processor saves how many items it emitted and skips that
  many on a restore. Its items depend on the processor's index and the total
  parallelism, so a restore into another parallelism fails with an error.
* Other sources (files) implement :class:`SourceReader` and run in
  :func:`replayable_source_p`.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import itertools
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from typing import Any

from jetlet.core import inbox as inbox_mod
from jetlet.core import processor, snapshot_keys

BATCH = 1024
PROMPT_S = 0.001
"""A generator source emits what ``generate`` yielded within this time, even if that is less than a batch."""

SNAPSHOT_TAG = "__jetlet_source_position__"
"""The tag of the :class:`~jetlet.core.snapshot_keys.ProcessorKey` a source saves its position under."""
TOTAL_METRIC = "sourceTotalCount"
"""A source processor's metric: how many items it emits in all, when its reader knows (progress bars)."""
READ_METRIC = "sourceReadCount"
"""A source processor's metric when stateless stages were planned into it: the items it read (its
``emittedCount`` then counts what those stages let out)."""

_END = object()


@dataclasses.dataclass(frozen=True, slots=True)
class SlicePosition:
    """What processor ``index`` of ``parallelism`` of a strided source had emitted at a snapshot.

    Every index ``s`` of its slice below ``next`` was emitted, and so was every
    index that one of the ``earlier`` vectors (the ``next`` values of an
    earlier parallelism, by processor index) says was (``s < g[s % len(g)]``).
    """

    index: int
    parallelism: int
    next: int
    earlier: tuple[tuple[int, ...], ...] = ()


def _resume_vectors(
    positions: Iterable[SlicePosition], source: str, kind: type[SlicePosition]
) -> tuple[tuple[tuple[int, ...], ...], int] | None:
    """The ``next`` vectors that a snapshot's positions say were emitted (the latest first, then the
    earlier ones still needed) and the lowest saved ``next``; None for a snapshot without positions.
    Every position must be a ``kind``: a stride's and a lane's say different things."""
    nexts: dict[int, int] = {}
    carried: dict[tuple[int, ...], None] = {}
    parallelism = 0
    for position in positions:
        if type(position) is not kind:
            raise ValueError(
                f"{source}: the snapshot holds a {type(position).__name__}, this source saves "
                f"{kind.__name__}s (was the source changed between the runs?)"
            )
        if parallelism and position.parallelism != parallelism:
            raise ValueError(
                f"{source}: the snapshot mixes positions of {parallelism} and "
                f"{position.parallelism} processors"
            )
        parallelism = position.parallelism
        if position.index in nexts:
            raise ValueError(f"{source}: the snapshot holds processor {position.index}'s position twice")
        nexts[position.index] = position.next
        carried.update(dict.fromkeys(position.earlier))
    if not nexts:
        return None
    if sorted(nexts) != list(range(parallelism)):
        raise ValueError(
            f"{source}: the snapshot holds the positions of processors {sorted(nexts)} of "
            f"{parallelism}; a restore needs every processor's"
        )
    latest = tuple(nexts[index] for index in range(parallelism))
    low = min(latest)
    return (latest, *(g for g in carried if max(g) > low)), low


class _ResumableCursor:
    """What the strided and the lane cursor share: their index, where they are, and what a restored
    snapshot says earlier executions emitted (:func:`_resume_vectors`)."""

    __slots__ = ("_bound", "_generations", "index", "next", "resumed_from")

    def __init__(self, index: int, count: int, what: str) -> None:
        if not 0 <= index < count:
            raise ValueError(f"{what} {index} is not in 0..{count - 1}")
        self.index = index
        self.next = 0
        """The next index to consider."""
        self.resumed_from = 0
        """The lowest index that the restored snapshot does not count as emitted (0 without one)."""
        self._generations: tuple[tuple[int, ...], ...] = ()
        self._bound = 0  # no earlier execution emitted an index at or above this

    def _resume(
        self, positions: Iterable[SlicePosition], source: str, kind: type[SlicePosition]
    ) -> int | None:
        """Take the vectors of a snapshot's positions of ``kind``; the lowest saved ``next`` (None:
        the snapshot held no position)."""
        resumed = _resume_vectors(positions, source, kind)
        if resumed is None:
            return None
        self._generations, low = resumed
        self._bound = max(max(g) for g in self._generations)
        self.resumed_from = low
        return low


class StridedCursor(_ResumableCursor):
    """Processor ``index`` of ``step``'s walk over the global indices ``index, index + step, ...``.

    Restored from the positions of a snapshot (see the module doc), it skips
    the indices an earlier execution emitted.

    >>> cursor = StridedCursor(0, 1)
    >>> cursor.restore([SlicePosition(0, 2, 4), SlicePosition(1, 2, 7)], "example")
    >>> list(cursor.take(10, 9))  # 0, 2 and 1, 3, 5 were emitted by 2 processors
    [4, 6, 7, 8]
    """

    __slots__ = ("step",)

    def __init__(self, index: int, step: int) -> None:
        super().__init__(index, step, "processor index")
        self.step = step
        self.next = index

    def restore(self, positions: Iterable[SlicePosition], source: str) -> None:
        """Resume after the indices that the positions of every processor of a snapshot emitted."""
        low = self._resume(positions, source, SlicePosition)
        if low is not None:
            self.next = low + (self.index - low) % self.step

    def take(self, limit: int, stop: int) -> Sequence[int]:
        """The next at most ``limit`` indices below ``stop`` that were not emitted; moves past them."""
        s, step = self.next, self.step
        taken: list[int] = []
        if s < self._bound:
            generations, bound = self._generations, self._bound
            while s < stop and s < bound and len(taken) < limit:
                if not any(s < g[s % len(g)] for g in generations):
                    taken.append(s)
                s += step
        if s >= stop or len(taken) >= limit or s < self._bound:
            self.next = s
            return taken
        fast = range(s, stop, step)[: limit - len(taken)]
        self.next = fast[-1] + step
        if taken:
            taken.extend(fast)
            return taken
        return fast

    def position(self) -> SlicePosition:
        """The position to save: this processor's ``next`` and the vectors it resumed from."""
        return SlicePosition(self.index, self.step, self.next, self._generations)


@dataclasses.dataclass(frozen=True)
class LanePosition(SlicePosition):
    """What lane ``index`` of ``parallelism`` of a source split by key (a :class:`LaneCursor`) had
    emitted at a snapshot: every index of its lane below ``next``, and every index that one of the
    ``earlier`` vectors says was (``s < g[lane_of(s, len(g))]``)."""


class LaneCursor(_ResumableCursor):
    """Lane ``index`` of ``lanes``' walk over every global index, taking those of its lane.

    A source split by key rather than by stride: ``lane_of(s, lanes)`` names the lane of index ``s``
    (all items of one key in one lane, as in a topic partitioned by that key). The walk passes every
    index; a caller that can find its lane's indices in a run faster than one test each (a generator
    that knows its keys) takes them itself from :attr:`next` and calls :meth:`advance`. Restored
    from a snapshot's positions it starts at the lowest saved ``next``, and up to the highest one
    :meth:`take_restored` gives the indices of its lane that no earlier execution emitted, tested
    one by one.

    >>> cursor = LaneCursor(0, 1, lambda s, lanes: s // 3 % lanes)
    >>> cursor.restore([LanePosition(0, 2, 4), LanePosition(1, 2, 7)], "example")
    >>> cursor.take_restored(10, 9)  # lane 0 of 2 (0-2, 6-8) had emitted 0-2, lane 1 (3-5) 3-5
    [6]
    >>> cursor.take_restored(10, 9) is None, cursor.next  # past every saved position: the caller's turn
    (True, 7)
    """

    __slots__ = ("lane_of", "lanes")

    def __init__(self, index: int, lanes: int, lane_of: Callable[[int, int], int]) -> None:
        super().__init__(index, lanes, "lane")
        self.lanes = lanes
        self.lane_of = lane_of

    def restore(self, positions: Iterable[SlicePosition], source: str) -> None:
        """Resume after the indices that the positions of every lane of a snapshot emitted."""
        low = self._resume(positions, source, LanePosition)
        if low is not None:
            self.next = low

    def take_restored(self, limit: int, stop: int) -> list[int] | None:
        """Below the highest saved position: the next at most ``limit`` indices below ``stop`` of this
        lane that were not emitted, looking at no more than ``limit * lanes`` indices (a call stays
        short); moves past those it looked at. None past that position."""
        s, bound = self.next, self._bound
        if s >= bound:
            return None
        taken: list[int] = []
        lane_of, lanes, index, generations = self.lane_of, self.lanes, self.index, self._generations
        stop = min(stop, bound, s + limit * lanes)
        while s < stop and len(taken) < limit:
            if lane_of(s, lanes) == index and not any(s < g[lane_of(s, len(g))] for g in generations):
                taken.append(s)
            s += 1
        self.next = s
        return taken

    def advance(self, to: int) -> None:
        """Move past the indices below ``to``: the caller took this lane's among them."""
        self.next = to

    def position(self) -> LanePosition:
        """The position to save: this lane's ``next`` and the vectors it resumed from."""
        return LanePosition(self.index, self.lanes, self.next, self._generations)


class SourceReader(abc.ABC):
    """How a :func:`replayable_source_p` processor reads, and where it is.

    The processor makes one reader per execution in ``init``; a restore calls
    :meth:`restore` once, before the first :meth:`read`.
    """

    drops_none = False
    """True if :meth:`read` never returns a ``None`` item (then the processor does not look for one)."""

    @abc.abstractmethod
    def read(self, limit: int) -> list[Any] | None:
        """At most ``limit`` (>= 1) next items, or None when there are no more."""

    @abc.abstractmethod
    def position(self) -> Any:
        """Where the reader is after the items it returned, to save in a snapshot (None: nothing)."""

    @abc.abstractmethod
    def restore(self, positions: list[Any]) -> None:
        """Resume from the positions that every processor of the vertex saved in a snapshot."""

    def total(self) -> int | None:
        """How many items this reader returns in all, if that is known cheaply (None: unknown).

        A progress bar shows it (the processor's ``sourceTotalCount`` metric); a reader
        over a sized collection knows it once it has read, a file reader does not.
        """
        return None

    def close(self) -> None:
        """Release what the reader holds; called once, also after a failure."""


class ReplayableSourceP(processor.Processor):
    """Emits what a :class:`SourceReader` reads, in outbox-sized batches; saves its position."""

    def __init__(self, make_reader: Callable[[processor.ProcessorContext], SourceReader], cooperative: bool):
        self._make_reader = make_reader
        self._cooperative = cooperative
        self._reader: SourceReader | None = None
        self._pending: list[Any] = []
        self._restored: list[Any] = []
        self._exhausted = False
        self._total: int | None = None
        self.emitted = 0

    def is_cooperative(self) -> bool:
        return self._cooperative

    def init(self, outbox: Any, context: processor.ProcessorContext) -> None:
        super().init(outbox, context)
        self._reader = self._make_reader(context)

    def complete(self) -> bool:
        if not self._emit_pending():
            return False
        if self._exhausted:
            return True
        room = self.outbox.room()
        if room <= 0:
            return False
        assert self._reader is not None
        batch = self._reader.read(room)
        if batch is None:
            self._exhausted = True
            return True
        if not self._reader.drops_none and None in batch:
            raise TypeError("a source yielded None, which jetlet reserves for 'no item'")
        self._pending = batch
        self._emit_pending()
        return False

    def _emit_pending(self) -> bool:
        if self._pending:
            taken = self.outbox.offer_batch(self._pending)
            self.emitted += taken
            self._pending = self._pending[taken:] if taken < len(self._pending) else []
        return not self._pending

    def save_to_snapshot(self) -> bool:
        if not self._emit_pending():
            return False
        assert self._reader is not None
        position = self._reader.position()
        if position is None:
            return True
        key = snapshot_keys.ProcessorKey(SNAPSHOT_TAG, self.context.global_processor_index)
        return self.outbox.offer_to_snapshot(key, position)

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        for key, position in inbox.take_all():
            if not (isinstance(key, snapshot_keys.ProcessorKey) and key.tag == SNAPSHOT_TAG):
                raise ValueError(f"{self.context.vertex_name}: a source cannot restore the entry {key!r}")
            self._restored.append(position)

    def finish_snapshot_restore(self) -> bool:
        if self._restored:
            assert self._reader is not None
            self._reader.restore(self._restored)
            self._restored = []
        return True

    def close(self) -> None:
        if self._reader is not None:
            self._total = self._reader.total()  # the job's final metrics are read after the close
            self._reader.close()
            self._reader = None

    def metrics(self) -> dict[str, int]:
        total = self._reader.total() if self._reader is not None else self._total
        return {} if total is None else {TOTAL_METRIC: total}


def replayable_source_p(
    make_reader: Callable[[processor.ProcessorContext], SourceReader], cooperative: bool = True
) -> processor.ProcessorMetaSupplier:
    """A source that emits what ``make_reader(context)`` reads, one processor per member by default."""
    return processor.ProcessorMetaSupplier.of(
        lambda: ReplayableSourceP(make_reader, cooperative), preferred_local_parallelism=1
    )


class _StridedReader(SourceReader):
    """Processor ``i`` of ``n``'s items ``i, i + n, ...`` of a re-iterable collection."""

    def __init__(self, items: Callable[[], Iterable[Any]], context: processor.ProcessorContext) -> None:
        self._items = items
        self._name = context.vertex_name
        self._cursor = StridedCursor(context.global_processor_index, context.total_parallelism)
        self._iterator: Iterator[Any] | None = None
        self._at = 0  # the index of the item that the iterator yields next
        self._size: int | None = None

    def read(self, limit: int) -> list[Any] | None:
        step = self._cursor.step
        if self._iterator is None:
            self._at = self._cursor.next
            collection = self._items()
            self._size = len(collection) if isinstance(collection, Sized) else None
            self._iterator = itertools.islice(collection, self._at, None, step)
        indices = self._cursor.take(limit, sys.maxsize)
        if isinstance(indices, range) and indices.start == self._at:
            batch = list(itertools.islice(self._iterator, len(indices)))
            self._at += len(batch) * step
        else:
            batch = []
            for index in indices:
                item = next(itertools.islice(self._iterator, (index - self._at) // step, None), _END)
                if item is _END:
                    break
                batch.append(item)
                self._at = index + step
        return batch or None

    def position(self) -> SlicePosition:
        return self._cursor.position()

    def restore(self, positions: list[Any]) -> None:
        self._cursor.restore(positions, f"source {self._name!r}")

    def total(self) -> int | None:
        """This processor's share of a sized collection (known from the first read on)."""
        if self._size is None:
            return None
        return len(range(self._cursor.index, self._size, self._cursor.step))


class _OneShot:
    """A one-shot iterator and how many items were taken from it (in this process or copy)."""

    def __init__(self, iterator: Iterator[Any]) -> None:
        self.iterator = iterator
        self.taken = 0


class _OneShotReader(SourceReader):
    """Processor 0 reads the whole one-shot iterator; the others read nothing."""

    def __init__(self, shared: _OneShot, context: processor.ProcessorContext) -> None:
        self._shared = shared if context.global_processor_index == 0 else None
        self._name = context.vertex_name

    def read(self, limit: int) -> list[Any] | None:
        if self._shared is None:
            return None
        batch = list(itertools.islice(self._shared.iterator, limit))
        self._shared.taken += len(batch)
        return batch or None

    def position(self) -> int | None:
        return None if self._shared is None else self._shared.taken

    def restore(self, positions: list[Any]) -> None:
        shared = self._shared
        if shared is None:
            return
        if len(positions) != 1:
            raise ValueError(f"source {self._name!r}: expected one saved count, got {positions!r}")
        count = positions[0]
        if shared.taken > count:
            raise ValueError(
                f"source {self._name!r} reads a one-shot iterator, and {shared.taken - count} of its "
                "items were taken after the snapshot: they cannot be read again. Give a re-iterable "
                "collection (a list, a range) to restart without losing items"
            )
        shared.taken += sum(1 for _ in itertools.islice(shared.iterator, count - shared.taken))


def ending(items: Iterable[Any]) -> Callable[[], Any]:
    """``next`` over ``items`` and then one ``_END``: what :func:`read_promptly` reads."""
    return itertools.chain(items, (_END,)).__next__


def read_promptly(next_item: Callable[[], Any], limit: int) -> tuple[list[Any], bool]:
    """Up to ``limit`` items that ``next_item`` (from :func:`ending`) gives within :data:`PROMPT_S`; ended?

    Reads 1, 1, 4, 16, ... items at a time and stops once the time is up, so a
    fast generator fills the batch in a few calls while a slow one (each item
    a poll of an API or a queue) has its items emitted one by one as they
    come, instead of after ``limit`` of them. A ``None`` is "nothing now": the
    read ends at once, without it (``iter(next_item, None)`` stops there, in
    C, so the items pay no Python code each). The second value is True once
    the items are exhausted.
    """
    started = time.monotonic()
    batch: list[Any] = []
    chunk = 1
    while True:
        wanted = min(chunk, limit - len(batch))
        before = len(batch)
        batch.extend(itertools.islice(iter(next_item, None), wanted))
        if batch and batch[-1] is _END:
            batch.pop()
            return batch, True
        if len(batch) - before < wanted or len(batch) >= limit or time.monotonic() - started >= PROMPT_S:
            return batch, False  # a None, a full batch, or the time is up
        chunk = 1 if len(batch) == 1 else chunk * 4


@dataclasses.dataclass(frozen=True, slots=True)
class GeneratorPosition:
    """How many items processor ``index`` of ``parallelism`` of a generator source emitted."""

    index: int
    parallelism: int
    count: int


class _GeneratorReader(SourceReader):
    """What ``generate(context)`` yields, from a fresh call in every execution (a ``None``: nothing now)."""

    drops_none = True

    def __init__(
        self,
        generate: Callable[[processor.ProcessorContext], Iterable[Any]],
        context: processor.ProcessorContext,
        name: str | None,
    ) -> None:
        self._generate = generate
        self._context = context
        self._name = name or context.vertex_name
        self._next: Callable[[], Any] | None = None
        self._ended = False
        self._count = 0

    def read(self, limit: int) -> list[Any] | None:
        if self._next is None:
            generated = iter(self._generate(self._context))
            items = (item for item in generated if item is not None)
            skipped = sum(1 for _ in itertools.islice(items, self._count))
            if skipped < self._count:
                raise ValueError(
                    f"source {self._name!r}: processor {self._context.global_processor_index} had emitted "
                    f"{self._count} items, but generate(context) now yields only {skipped}"
                )
            self._next = ending(generated)
        if self._ended:
            return None
        batch, self._ended = read_promptly(self._next, limit)
        self._count += len(batch)
        return None if self._ended and not batch else batch

    def position(self) -> GeneratorPosition:
        context = self._context
        return GeneratorPosition(context.global_processor_index, context.total_parallelism, self._count)

    def restore(self, positions: list[Any]) -> None:
        context = self._context
        for position in positions:
            if position.parallelism != context.total_parallelism:
                raise ValueError(
                    f"source {self._name!r} was saved by {position.parallelism} processors and cannot be "
                    f"restored into {context.total_parallelism}: generate(context) makes each processor's "
                    "own items from its index and the total parallelism, so they cannot be spread over "
                    "another number of processors. Restart the job with the same parallelism, or use a "
                    "source that rescales (Sources.items, Sources.from_iterable with a list or a range)"
                )
            if position.index == context.global_processor_index:
                self._count = position.count


def source_from_collection(
    fetch: Callable[[processor.ProcessorContext], Iterable[Any]],
) -> processor.ProcessorMetaSupplier:
    """Emits the items of the re-iterable collection ``fetch(context)`` (the same on every processor).

    Processor ``i`` of ``n`` takes the items at ``i, i + n, ...``. Restores
    are exact into any parallelism (see the module doc). ``fetch`` is called
    at most once per processor and execution, when the processor first reads.
    """

    def make(context: processor.ProcessorContext) -> SourceReader:
        return _StridedReader(lambda: fetch(context), context)

    return replayable_source_p(make)


def source_from_iterable(items: Iterable[Any]) -> processor.ProcessorMetaSupplier:
    """Emits the items of ``items``, split among the processors by index.

    With one processor per member (the preferred parallelism), processor ``i``
    of ``n`` takes every ``n``-th item starting at ``i`` of a re-iterable
    collection (a list, a range); restores are exact into any parallelism. A
    one-shot iterator (a generator) cannot be shared that way, so processor 0
    emits all of it and the others nothing; see the module doc for its
    restores.
    """
    if iter(items) is not items:
        return source_from_collection(lambda _context: items)
    shared = _OneShot(iter(items))
    return replayable_source_p(lambda context: _OneShotReader(shared, context))


def source_from_generator(
    generate: Callable[[processor.ProcessorContext], Iterable[Any]],
    cooperative: bool = True,
    name: str | None = None,
) -> processor.ProcessorMetaSupplier:
    """Emits what ``generate(context)`` yields; each processor calls it once per execution.

    Use ``context.global_processor_index`` and ``context.total_parallelism``
    to make each processor produce its own slice. Each call emits what the
    generator yielded within :data:`PROMPT_S` (up to a batch), so a slow
    generator's items are emitted as they come; a generator that has nothing
    to emit now yields ``None`` (a cooperative one that polls a queue or an
    API without waiting must, to give the thread back). Pass ``cooperative=False``
    if producing an item may block (``time.sleep``, reading a socket or a
    queue, polling an API): the processor then gets its own thread, and its
    waits hold up no other processor. A restore
    skips the items each processor emitted before the snapshot; it needs the
    same total parallelism, and errors name the source ``name`` (the vertex
    name by default).
    """
    # The factory holds ``generate`` itself, so a client that cannot pickle it finds it one step away.
    return processor.ProcessorMetaSupplier.of(
        lambda: ReplayableSourceP(functools.partial(_GeneratorReader, generate, name=name), cooperative),
        preferred_local_parallelism=1,
    )


class _RateSourceP(processor.Processor):
    """Emits ``item_fn(sequence)`` at a fixed total rate, for ``count`` items or forever."""

    def __init__(self, rate: float, item_fn: Callable[[int], Any], count: int | None) -> None:
        self._rate = rate
        self._item_fn = item_fn
        self._count = count
        self._cursor = StridedCursor(0, 1)
        self._restored: list[SlicePosition] = []
        self._start = 0.0
        self._paced_from = 0  # the sequence number due at ``_start``

    def init(self, outbox: Any, context: processor.ProcessorContext) -> None:
        super().init(outbox, context)
        self._cursor = StridedCursor(context.global_processor_index, context.total_parallelism)
        self._start = time.monotonic()

    def complete(self) -> bool:
        # Sequence s is due at start + (s - paced_from) / rate (the total rate across processors).
        due_until = self._paced_from + int((time.monotonic() - self._start) * self._rate)
        if self._count is not None:
            due_until = min(due_until, self._count - 1)
        due = self._cursor.take(self.outbox.room(), due_until + 1)
        if due:
            self.outbox.offer_batch(list(map(self._item_fn, due)))
        return self._count is not None and self._cursor.next >= self._count

    def save_to_snapshot(self) -> bool:
        key = snapshot_keys.ProcessorKey(SNAPSHOT_TAG, self.context.global_processor_index)
        return self.outbox.offer_to_snapshot(key, self._cursor.position())

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        for key, position in inbox.take_all():
            if not (isinstance(key, snapshot_keys.ProcessorKey) and key.tag == SNAPSHOT_TAG):
                raise ValueError(f"{self.context.vertex_name}: a source cannot restore the entry {key!r}")
            self._restored.append(position)

    def finish_snapshot_restore(self) -> bool:
        if self._restored:
            self._cursor.restore(self._restored, f"source {self.context.vertex_name!r}")
            self._restored = []
            # Pace from now on: the items missed while the job was down are not made up in a burst.
            self._start = time.monotonic()
            self._paced_from = self._cursor.resumed_from
        return True


def source_rate(
    rate: float, item_fn: Callable[[int], Any] = lambda seq: seq, count: int | None = None
) -> processor.ProcessorMetaSupplier:
    """Emits ``item_fn(0)``, ``item_fn(1)``, ... at ``rate`` items per second in total.

    Stops after ``count`` items, or never when ``count`` is None. Processor
    ``i`` of ``n`` emits the sequence numbers ``i, i + n, ...``; restores are
    exact into any parallelism and pace the rest from the time of the restore.
    """
    if rate <= 0:
        raise ValueError(f"source_rate: rate must be > 0 items per second, got {rate!r}")
    if count is not None and count < 0:
        raise ValueError(f"source_rate: count must be >= 0 or None, got {count!r}")
    return processor.ProcessorMetaSupplier.of(
        lambda: _RateSourceP(rate, item_fn, count), preferred_local_parallelism=1
    )
