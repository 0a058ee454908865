"""``SourceBuilder``: a custom source from a few plain functions (Jet's ``SourceBuilder``).

The user gives a name and ``create_fn(context)``, which makes the source's
*state* (a connection, a file handle, an offset) once per processor, and
``fill_buffer_fn(state, buffer)``, which adds the next few items to a
bounded :class:`SourceBuffer`::

    def fill(lines, buffer):
        for _ in range(100):
            line = lines.readline()
            if not line:
                buffer.close()  # a batch source ends when its buffer is closed
                return
            buffer.add(line.rstrip("\\n"))

    source = (
        SourceBuilder.batch("lines", lambda context: open("data.txt"))
        .fill_buffer_fn(fill)
        .destroy_fn(lambda lines: lines.close())
        .build()
    )

The processor (:class:`ConvenientSourceP`, non-cooperative, since the
functions may block, unless the builder is told ``cooperative()``) works like
Jet's ``ConvenientSourceP``:

* ``init`` calls ``create_fn(context)``; the context tells the processor its
  ``global_processor_index`` and ``total_parallelism``, so a distributed
  source reads its own slice.
* Each ``complete()`` call first emits what the last fill left in the
  outbox's way; when all of it is out it calls ``fill_buffer_fn`` with an
  empty buffer and emits what it added. A batch source ends (``complete()``
  returns True) once the buffer is closed and emptied; a stream never ends.
* ``save_to_snapshot`` first emits everything pending (the state has moved
  past those items), then saves ``create_snapshot_fn(state)`` under
  ``ProcessorKey(_SNAPSHOT_TAG, global_processor_index)``, a broadcast key
  (:mod:`jetlet.core.snapshot_keys`). On a restart every processor is given
  the objects that every processor saved; after the last one,
  ``finish_snapshot_restore`` calls ``restore_snapshot_fn(state, objects)``
  with them in order of the index of the processor that saved them (one
  object for a non-distributed source; a distributed source gets the objects
  of every processor, as in Jet, and picks its part, also when the job is
  restored with another number of processors).
* ``close()`` calls ``destroy_fn(state)``, also after a failure.

A non-distributed source runs as one processor in the whole cluster; call
``distributed(n)`` for ``n`` processors per member.

Beyond Jet, ``cooperative()`` declares that ``fill_buffer_fn`` never blocks
(it only computes, and returns at once when it has nothing to add): the
processor then runs on the cooperative threads beside the job's other
processors instead of on a thread of its own, so no batch costs a hand-off
of the GIL between threads; a worker whose processors all made no progress
backs off by itself.

A timestamped stream's buffer takes ``add(item, timestamp)`` and the
processor emits ``(timestamp, item)`` events, the pipeline's representation
of a timestamped item; its :class:`~jetlet.pipeline.sources.StreamSource`
says so with ``emits_events=True`` and reads native timestamps from the
event, for ``with_native_timestamps(lag)``. The planner plans that event-time
policy into the source, as Jet does (``StreamSource.event_time_supplier``):
the processor then runs an
:class:`~jetlet.core.event_time_mapper.EventTimeMapper` over each batch it
fills, so it drops late events and emits the watermarks itself (and
``IDLE_MESSAGE`` when its fills stay empty for the idle timeout), and no
``add-timestamps`` processor and queue hop follow it. Its snapshot then also
holds the mapper's state, saved before the source's own entry (a retried
save repeats the mapper's entry, which a restore, taking the minimum of every
saved state, does not mind).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, Literal, Self, TypeVar

from jetlet.core import event_time, snapshot_keys
from jetlet.core import event_time_mapper as mapper_mod
from jetlet.core import inbox as inbox_mod
from jetlet.core import processor as proc
from jetlet.core.processors.chain import BatchStep
from jetlet.core.processors.sources import READ_METRIC
from jetlet.errors import require_callable
from jetlet.pipeline import sources as sources_mod

C = TypeVar("C")
T = TypeVar("T")

BUFFER_CAPACITY = 1024
"""How many items one ``fill_buffer_fn`` call may add."""

_SNAPSHOT_TAG = "__jetlet_source_builder__"

Kind = Literal["batch", "stream", "timestamped stream"]


class SourceBuffer(Generic[T]):
    """What ``fill_buffer_fn`` adds items to; holds at most :data:`BUFFER_CAPACITY` items per call."""

    def __init__(self, source_name: str, kind: Kind, capacity: int = BUFFER_CAPACITY) -> None:
        self._source_name = source_name
        self._kind = kind
        self._capacity = capacity
        self._items: list[Any] = []
        self._closed = False

    def add(self, item: T) -> None:
        """Add one item (not None) to emit."""
        self._append(item, item)

    def add_all(self, items: Sequence[T]) -> None:
        """Add several items at once (checked together: a fast path for sources that make batches)."""
        self._check_batch(items)
        self._items.extend(items)

    def close(self) -> None:
        """End the source: every item was added (batch sources only)."""
        if self._kind != "batch":
            raise RuntimeError(
                f"source {self._source_name!r}: only a batch source may close its buffer; "
                f"this is a {self._kind} source"
            )
        self._closed = True

    def size(self) -> int:
        """How many items the buffer holds now."""
        return len(self._items)

    def __len__(self) -> int:
        return len(self._items)

    @property
    def is_closed(self) -> bool:
        return self._closed

    def take(self) -> list[Any]:
        """Processor side: remove and return everything added."""
        items, self._items = self._items, []
        return items

    def _append(self, item: Any, entry: Any) -> None:
        """Check ``item`` and store ``entry`` (the item itself, or its event)."""
        if self._closed:
            raise RuntimeError(f"source {self._source_name!r}: add() after the buffer was closed")
        if item is None:
            raise TypeError(
                f"source {self._source_name!r}: cannot add None, jetlet reserves it for 'no item'"
            )
        if len(self._items) >= self._capacity:
            raise OverflowError(
                f"source {self._source_name!r}: fill_buffer_fn added more than {self._capacity} items "
                "in one call; add fewer per call (it is called again as soon as they are emitted)"
            )
        self._items.append(entry)

    def _check_batch(self, items: Sequence[Any]) -> None:
        """What :meth:`_append` checks, for a whole batch (scanned in C)."""
        if self._closed:
            raise RuntimeError(f"source {self._source_name!r}: add_all() after the buffer was closed")
        if any(map(operator.is_, items, itertools.repeat(None))):
            raise TypeError(
                f"source {self._source_name!r}: cannot add None, jetlet reserves it for 'no item'"
            )
        if len(self._items) + len(items) > self._capacity:
            raise OverflowError(
                f"source {self._source_name!r}: fill_buffer_fn added more than {self._capacity} items "
                "in one call; add fewer per call (it is called again as soon as they are emitted)"
            )


class TimestampedSourceBuffer(SourceBuffer[T]):
    """The buffer of a timestamped stream: each item comes with its event time (ms).

    It holds the ``(timestamp, item)`` events and, beside them, their timestamps as a list of their
    own, which the processor's event-time mapper takes as they are (:meth:`take_with_timestamps`)
    instead of reading them back out of every event.
    """

    def __init__(self, source_name: str, kind: Kind, capacity: int = BUFFER_CAPACITY) -> None:
        super().__init__(source_name, kind, capacity)
        self._timestamps: list[int] = []

    def add(self, item: T, timestamp: int | None = None) -> None:
        """Add ``item`` with ``timestamp``; without one, the current wall-clock time in ms."""
        if timestamp is None:
            timestamp = time.time_ns() // 1_000_000
        elif not isinstance(timestamp, int) or isinstance(timestamp, bool):
            raise TypeError(f"source {self._source_name!r}: timestamp must be an int (ms), got {timestamp!r}")
        self._append(item, (timestamp, item))
        self._timestamps.append(timestamp)

    def add_all(self, items: Sequence[T], timestamps: Sequence[int] | None = None) -> None:
        """Add several items with their timestamps (ms) at once; without timestamps, the time now."""
        if timestamps is None:
            timestamps = [time.time_ns() // 1_000_000] * len(items)
        elif len(timestamps) != len(items):
            raise ValueError(
                f"source {self._source_name!r}: add_all() got {len(items)} items and "
                f"{len(timestamps)} timestamps"
            )
        elif not _all_ints(timestamps):
            wrong = next(t for t in timestamps if not isinstance(t, int) or isinstance(t, bool))
            raise TypeError(f"source {self._source_name!r}: timestamp must be an int (ms), got {wrong!r}")
        self._check_batch(items)
        self._items.extend(zip(timestamps, items, strict=True))
        self._timestamps.extend(timestamps)

    def take(self) -> list[Any]:
        return self.take_with_timestamps()[0]

    def take_with_timestamps(self) -> tuple[list[Any], list[int]]:
        """Processor side: remove and return the events added and, in their order, their timestamps."""
        events, timestamps = self._items, self._timestamps
        self._items, self._timestamps = [], []
        return events, timestamps


def _all_ints(values: Sequence[Any]) -> bool:
    """Whether every value is an int, in C at 4-5 ns a value: a sum of ints is an int, and a float,
    Decimal or numpy integer anywhere makes it another type (a str, an error). A bool or another int
    subclass passes, as the int it is."""
    try:
        return type(sum(values)) is int
    except TypeError:
        return False


@dataclasses.dataclass(frozen=True)
class _SourceSpec:
    """Everything a :class:`ConvenientSourceP` needs; built by the builders."""

    name: str
    kind: Kind
    create_fn: Callable[[proc.ProcessorContext], Any]
    fill_buffer_fn: Callable[[Any, Any], object]
    destroy_fn: Callable[[Any], object] | None
    create_snapshot_fn: Callable[[Any], Any] | None
    restore_snapshot_fn: Callable[[Any, list[Any]], object] | None
    cooperative: bool = False
    event_time: event_time.EventTimePolicy | None = None
    """The event-time policy planned into the source (timestamped streams only)."""
    step: BatchStep | None = None
    """The stateless steps planned into the source (``map``, ``filter``... right after it), run over
    each batch it fills, after the event-time policy."""

    def new_buffer(self) -> SourceBuffer[Any]:
        if self.kind == "timestamped stream":
            return TimestampedSourceBuffer(self.name, self.kind)
        return SourceBuffer(self.name, self.kind)


class ConvenientSourceP(proc.Processor):
    """The processor of a builder source; see the module doc."""

    def __init__(self, spec: _SourceSpec) -> None:
        self._spec = spec
        self._state: Any = None
        self._created = False
        self._buffer: SourceBuffer[Any] = spec.new_buffer()
        self._pending: list[Any] = []
        self._pending_watermarks = False
        """Whether ``_pending`` may hold a watermark (only with an event-time policy)."""
        self._restored: list[tuple[int, Any]] = []  # (index of the processor that saved it, object)
        self._mapper = mapper_mod.EventTimeMapper(spec.event_time) if spec.event_time is not None else None
        self._timestamped: TimestampedSourceBuffer[Any] | None = None
        """The buffer, when the mapper reads each event's own timestamp: it then takes them as the
        buffer holds them."""
        if (
            isinstance(self._buffer, TimestampedSourceBuffer)
            and spec.event_time is not None
            and spec.event_time.timestamp_fn is event_timestamp
        ):
            self._timestamped = self._buffer
        self._restored_times: list[mapper_mod.State] = []
        self._read = 0
        """Items the fill function added so far (what the planned-in steps took in)."""

    def is_cooperative(self) -> bool:
        return self._spec.cooperative

    def init(self, outbox: Any, context: proc.ProcessorContext) -> None:
        super().init(outbox, context)
        self._state = self._spec.create_fn(context)
        self._created = True
        if self._mapper is not None:
            self._mapper.start()

    def complete(self) -> bool:
        if not self._emit_pending():
            return False
        buffer = self._buffer
        if buffer.is_closed:
            return True
        self._spec.fill_buffer_fn(self._state, buffer)
        if self._timestamped is not None:
            items, timestamps = self._timestamped.take_with_timestamps()
        else:
            items, timestamps = buffer.take(), None
        self._read += len(items)
        mapper = self._mapper
        if mapper is None:
            self._pending = items
        elif items:
            self._pending, self._pending_watermarks = mapper.outputs_of(items, timestamps)
        elif (message := mapper.idle_message()) is not None:
            mapper.went_idle()
            self._pending, self._pending_watermarks = [message], True
        step = self._spec.step
        if step is not None and self._pending:
            self._pending = (
                mapper_mod.map_data_runs(self._pending, step)
                if self._pending_watermarks
                else step(self._pending)
            )
        return self._emit_pending() and buffer.is_closed

    def _emit_pending(self) -> bool:
        if self._pending:
            self._pending = mapper_mod.offer_outputs(self.outbox, self._pending, self._pending_watermarks)
        return not self._pending

    def save_to_snapshot(self) -> bool:
        if not self._emit_pending():
            return False
        index = self.context.global_processor_index
        if self._mapper is not None:  # first: a retry after the next offer failed repeats it harmlessly
            key = snapshot_keys.ProcessorKey(mapper_mod.SNAPSHOT_TAG, index)
            if not self.outbox.offer_to_snapshot(key, self._mapper.saved_state()):
                return False
        create_snapshot = self._spec.create_snapshot_fn
        if create_snapshot is None:
            return True
        key = snapshot_keys.ProcessorKey(_SNAPSHOT_TAG, index)
        return self.outbox.offer_to_snapshot(key, create_snapshot(self._state))

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        for key, value in inbox.take_all():
            tag = key.tag if isinstance(key, snapshot_keys.ProcessorKey) else None
            if tag == mapper_mod.SNAPSHOT_TAG and self._mapper is not None:
                self._restored_times.append(value)
            elif tag != _SNAPSHOT_TAG:
                raise ValueError(f"source {self._spec.name!r} cannot restore the snapshot entry {key!r}")
            elif self._spec.restore_snapshot_fn is None:
                raise RuntimeError(f"source {self._spec.name!r} has no restore_snapshot_fn")
            else:
                self._restored.append((key.processor_index, value))

    def finish_snapshot_restore(self) -> bool:
        restore = self._spec.restore_snapshot_fn
        if self._restored and restore is not None:
            self._restored.sort(key=_saved_by)
            restore(self._state, [value for _, value in self._restored])
            self._restored = []
        if self._mapper is not None:
            self._mapper.restore(self._restored_times)
            self._restored_times = []
        return True

    def metrics(self) -> dict[str, int]:
        metrics = {"lateEventsDropped": self._mapper.late} if self._mapper is not None else {}
        if self._spec.step is not None:
            metrics[READ_METRIC] = self._read
        return metrics

    def close(self) -> None:
        if self._created:
            self._created = False
            if self._spec.destroy_fn is not None:
                self._spec.destroy_fn(self._state)


def _meta_supplier(local_parallelism: int | None, spec: _SourceSpec) -> proc.ProcessorMetaSupplier:
    """The processors of ``spec``: ``local_parallelism`` per member, or one in the cluster (None)."""
    factory = functools.partial(ConvenientSourceP, spec)
    if local_parallelism is None:
        return proc.ProcessorMetaSupplier.force_total_parallelism_one(factory)
    return proc.ProcessorMetaSupplier.of(factory, local_parallelism)


def _with_event_time(
    local_parallelism: int | None,
    spec: _SourceSpec,
    policy: event_time.EventTimePolicy,
    step: BatchStep | None = None,
) -> proc.ProcessorMetaSupplier:
    """The processors of ``spec`` with ``policy``, and the stateless ``step`` after it, planned into them."""
    return _meta_supplier(local_parallelism, dataclasses.replace(spec, event_time=policy, step=step))


def _saved_by(entry: tuple[int, Any]) -> int:
    return entry[0]


def _require_callable(source: str, what: str, fn: object) -> None:
    require_callable(fn, f"SourceBuilder {source!r}: {what}")


class _Builder(Generic[C]):
    """The steps every builder shares (Jet's ``SourceBuilder.Base`` and ``FaultTolerant``)."""

    _kind: Kind

    def __init__(self, name: str, create_fn: Callable[[proc.ProcessorContext], C]) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"SourceBuilder: name must be a non-empty string, got {name!r}")
        _require_callable(name, "create_fn", create_fn)
        self._name = name
        self._create_fn = create_fn
        self._fill_buffer_fn: Callable[[C, Any], object] | None = None
        self._destroy_fn: Callable[[C], object] | None = None
        self._create_snapshot_fn: Callable[[C], Any] | None = None
        self._restore_snapshot_fn: Callable[[C, list[Any]], object] | None = None
        self._local_parallelism: int | None = None
        self._cooperative = False

    def fill_buffer_fn(self, fn: Callable[[C, Any], object]) -> Self:
        """``fn(state, buffer)`` adds the next items (at most :data:`BUFFER_CAPACITY`) to ``buffer``."""
        _require_callable(self._name, "fill_buffer_fn", fn)
        self._fill_buffer_fn = fn
        return self

    def destroy_fn(self, fn: Callable[[C], object]) -> Self:
        """``fn(state)`` releases the state when the processor closes."""
        _require_callable(self._name, "destroy_fn", fn)
        self._destroy_fn = fn
        return self

    def distributed(self, preferred_local_parallelism: int) -> Self:
        """Run ``preferred_local_parallelism`` processors on every member (one in the cluster otherwise)."""
        value = preferred_local_parallelism
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(
                f"SourceBuilder {self._name!r}: preferred_local_parallelism must be an int >= 1, "
                f"got {value!r}"
            )
        self._local_parallelism = value
        return self

    def cooperative(self) -> Self:
        """``fill_buffer_fn`` never blocks: run on the cooperative threads (see the module doc)."""
        self._cooperative = True
        return self

    def create_snapshot_fn(self, fn: Callable[[C], Any]) -> Self:
        """``fn(state)`` returns the object to save in a snapshot (its position, say)."""
        _require_callable(self._name, "create_snapshot_fn", fn)
        self._create_snapshot_fn = fn
        return self

    def restore_snapshot_fn(self, fn: Callable[[C, list[Any]], object]) -> Self:
        """``fn(state, objects)`` restores a fresh state from the saved objects."""
        _require_callable(self._name, "restore_snapshot_fn", fn)
        self._restore_snapshot_fn = fn
        return self

    def _spec(self) -> _SourceSpec:
        if self._fill_buffer_fn is None:
            raise ValueError(f"SourceBuilder {self._name!r}: fill_buffer_fn is required before build()")
        if (self._create_snapshot_fn is None) != (self._restore_snapshot_fn is None):
            raise ValueError(
                f"SourceBuilder {self._name!r}: create_snapshot_fn and restore_snapshot_fn go together; "
                "set both or neither"
            )
        return _SourceSpec(
            self._name,
            self._kind,
            self._create_fn,
            self._fill_buffer_fn,
            self._destroy_fn,
            self._create_snapshot_fn,
            self._restore_snapshot_fn,
            self._cooperative,
        )

    def _supplier(self) -> proc.ProcessorMetaSupplier:
        return _meta_supplier(self._local_parallelism, self._spec())


class BatchSourceBuilder(_Builder[C]):
    """Builds a :class:`~jetlet.pipeline.sources.BatchSource`; the fill function closes the buffer."""

    _kind: Kind = "batch"

    def build(self) -> sources_mod.BatchSource[Any]:
        return sources_mod.BatchSource(self._name, self._supplier())


class StreamSourceBuilder(_Builder[C]):
    """Builds a :class:`~jetlet.pipeline.sources.StreamSource` without native timestamps."""

    _kind: Kind = "stream"

    def build(self) -> sources_mod.StreamSource[Any]:
        return sources_mod.StreamSource(self._name, self._supplier())


event_timestamp: Callable[[tuple[int, Any]], int] = operator.itemgetter(0)
"""The timestamp of a ``(timestamp, item)`` event (an ``itemgetter``: no Python frame per item)."""


class TimestampedStreamSourceBuilder(_Builder[C]):
    """Builds a :class:`~jetlet.pipeline.sources.StreamSource` whose items carry native timestamps."""

    _kind: Kind = "timestamped stream"

    def build(self) -> sources_mod.StreamSource[Any]:
        spec = self._spec()
        return sources_mod.StreamSource(
            self._name,
            _meta_supplier(self._local_parallelism, spec),
            native_timestamps=event_timestamp,
            emits_events=True,
            event_time_supplier=functools.partial(_with_event_time, self._local_parallelism, spec),
        )


class SourceBuilder:
    """Entry points of the custom source builders (Jet's ``SourceBuilder``)."""

    @staticmethod
    def batch(name: str, create_fn: Callable[[proc.ProcessorContext], C]) -> BatchSourceBuilder[C]:
        """A finite source: ``fill_buffer_fn`` calls ``buffer.close()`` after the last item."""
        return BatchSourceBuilder(name, create_fn)

    @staticmethod
    def stream(name: str, create_fn: Callable[[proc.ProcessorContext], C]) -> StreamSourceBuilder[C]:
        """An unbounded source of items without timestamps."""
        return StreamSourceBuilder(name, create_fn)

    @staticmethod
    def timestamped_stream(
        name: str, create_fn: Callable[[proc.ProcessorContext], C]
    ) -> TimestampedStreamSourceBuilder[C]:
        """An unbounded source whose ``fill_buffer_fn`` calls ``buffer.add(item, timestamp)``."""
        return TimestampedStreamSourceBuilder(name, create_fn)
