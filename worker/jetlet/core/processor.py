"""The processor contract: the unit of computation in a DAG vertex.

The engine wraps every processor in a tasklet and calls it from one thread at
a time, never concurrently. The lifecycle, as in Hazelcast Jet:

1. ``init(outbox, context)`` once, before anything else.
2. If the job starts from a snapshot: ``restore_from_snapshot(inbox)`` with
   the processor's share of the saved state, then ``finish_snapshot_restore()``
   until it returns True.
3. Repeatedly, while inputs are open: ``process(ordinal, inbox)`` with a
   batch from one input; ``try_process_watermark(wm)`` when the coalesced
   watermark advances; ``try_process_idle()`` when every live input turned
   idle; ``try_process()`` when there is nothing to read;
   ``complete_edge(ordinal)`` when an input is exhausted. Snapshot callbacks
   (``save_to_snapshot``, ``snapshot_commit_prepare``,
   ``snapshot_commit_finish``) are interleaved when snapshots are enabled.
4. ``complete()`` repeatedly once every input is exhausted, until it
   returns True (a source does all its work here).
5. ``close()`` exactly once, also after a failure or cancellation.

Every method that returns ``bool`` follows one convention: False means "not
done yet, call me again" (usually because the outbox was full), True means
"done". A *cooperative* processor must return from each call quickly (well
under a millisecond is the goal) and must never block; a processor that
blocks (I/O, sleeps) declares ``is_cooperative() -> False`` and gets a thread
of its own.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from jetlet import config
from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import watermark as wm


@dataclasses.dataclass(frozen=True)
class MetaSupplierContext:
    """What a :class:`ProcessorMetaSupplier` learns in ``init``."""

    job_id: int
    job_name: str
    vertex_name: str
    member_count: int
    local_parallelism: int
    total_parallelism: int
    partition_count: int
    processing_guarantee: config.ProcessingGuarantee
    job_arguments: Mapping[str, Any]
    logger: logging.Logger
    data_store: Any = dataclasses.field(default=None, kw_only=True, compare=False)
    """The member's named lists, maps and observables (None outside a member)."""
    execution_id: int = dataclasses.field(default=0, kw_only=True)
    """This run of the job: a new one after every restart, resume or rescale. ``job_id`` stays the same
    across them (sinks name their transactions by it); the execution id tells runs apart (0 embedded)."""


@dataclasses.dataclass(frozen=True)
class ProcessorSupplierContext(MetaSupplierContext):
    """What a :class:`ProcessorSupplier` learns in ``init``: the meta context plus its member."""

    member_index: int


@dataclasses.dataclass(frozen=True)
class ProcessorContext(ProcessorSupplierContext):
    """What a processor learns in ``init``: its place in the job.

    ``global_processor_index`` is unique across the cluster:
    ``member_index * local_parallelism + local_processor_index``.
    """

    global_processor_index: int
    local_processor_index: int

    @property
    def snapshots_enabled(self) -> bool:
        return self.processing_guarantee is not config.ProcessingGuarantee.NONE


class Processor:
    """Base of every processor; override what you need (see the module doc).

    The defaults: cooperative; ``process`` refuses items (a vertex with inputs
    must override it); ``try_process_watermark`` forwards the watermark to
    every output; every other hook does nothing and returns True.
    """

    outbox: outbox_mod.Outbox
    context: ProcessorContext

    def is_cooperative(self) -> bool:
        """True (the default) if every call returns quickly and never blocks."""
        return True

    def init(self, outbox: outbox_mod.Outbox, context: ProcessorContext) -> None:
        """Called once before any other method; the default keeps both."""
        self.outbox = outbox
        self.context = context

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        """Handle some or all items of ``inbox``, which came from input ``ordinal``.

        Items left in the inbox are offered again in the next call.
        """
        raise TypeError(
            f"{type(self).__qualname__} received items on input {ordinal} but does not override process()"
        )

    def try_process_watermark(self, watermark: wm.Watermark) -> bool:
        """Handle an advance of the coalesced watermark; the default forwards it."""
        return self.outbox.offer(watermark)

    def try_process_idle(self) -> bool:
        """Every live input turned idle (:data:`~jetlet.core.watermark.IDLE_MESSAGE`): by default, forward it.

        Downstream then leaves this stream out of its watermark coalescing (as in Jet) and stops
        waiting for it. A processor that holds state downstream needs before it may move on (the
        partial aggregates of a first aggregation stage, which downstream would otherwise close
        windows without) emits that state first, then forwards ``IDLE_MESSAGE``. Its watermark
        does not change.
        """
        return self.outbox.offer(wm.IDLE_MESSAGE)

    def try_process(self) -> bool:
        """Called when there is nothing to read; return False to be called again soon."""
        return True

    def complete_edge(self, ordinal: int) -> bool:
        """Input ``ordinal`` is exhausted; return False to be called again."""
        return True

    def complete(self) -> bool:
        """Every input is exhausted (at once, for a source); return True when finished."""
        return True

    def save_to_snapshot(self) -> bool:
        """Offer state to ``outbox.offer_to_snapshot``; return True when all is saved."""
        return True

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        """Restore from key/value pairs (as 2-tuples) of a snapshot."""
        raise TypeError(
            f"{type(self).__qualname__} saved state but does not override restore_from_snapshot()"
        )

    def finish_snapshot_restore(self) -> bool:
        """Called after every restored entry was given; return True when ready."""
        return True

    def snapshot_commit_prepare(self) -> bool:
        """First phase of a two-phase commit (sinks): prepare the transaction."""
        return True

    def snapshot_commit_finish(self, success: bool) -> bool:
        """Second phase: commit (``success``) or roll back what was prepared."""
        return True

    def close(self) -> None:
        """Release resources; called exactly once, also after failure or cancellation."""

    def metrics(self) -> dict[str, int]:
        """The processor's own counters (Jet's ``lateEventsDropped``, say), read by job metrics."""
        return {}


ProcessorFactory = Callable[[], Processor]
"""A zero-argument callable that makes one processor (Jet's ``SupplierEx<Processor>``)."""


class ProcessorSupplier(abc.ABC):
    """Makes a member's processors for one vertex (Jet's ``ProcessorSupplier``).

    Asked once per member, after ``init``, for ``local_parallelism`` processors.
    """

    def init(self, context: ProcessorSupplierContext) -> None:
        """Called once on the member before ``get``."""

    @abc.abstractmethod
    def get(self, count: int) -> list[Processor]:
        """Return exactly ``count`` new processors."""

    def close(self, error: BaseException | None) -> None:
        """Called once when the job ends on this member (``error`` if it failed)."""

    @staticmethod
    def of(factory: ProcessorFactory) -> ProcessorSupplier:
        """A supplier that calls ``factory`` once per processor."""
        return _FactorySupplier(factory)


class _FactorySupplier(ProcessorSupplier):
    def __init__(self, factory: ProcessorFactory) -> None:
        self.factory = factory

    def get(self, count: int) -> list[Processor]:
        return [self.factory() for _ in range(count)]

    def __repr__(self) -> str:
        return f"ProcessorSupplier.of({_describe(self.factory)})"


class ProcessorMetaSupplier(abc.ABC):
    """Makes one :class:`ProcessorSupplier` per member (Jet's ``ProcessorMetaSupplier``).

    Runs where the job is planned; ``get(member_index)`` is called once for
    every member, and the supplier it returns is sent to that member.
    """

    @property
    def is_total_parallelism_one(self) -> bool:
        """True if the vertex runs as one processor in the whole cluster (on the first member)."""
        return False

    def preferred_local_parallelism(self) -> int:
        """The vertex's local parallelism when the vertex sets none; -1 for the default."""
        return -1

    def init(self, context: MetaSupplierContext) -> None:
        """Called once before ``get``."""

    @abc.abstractmethod
    def get(self, member_index: int) -> ProcessorSupplier:
        """The supplier for the member with this index."""

    def close(self, error: BaseException | None) -> None:
        """Called once when the job ends (``error`` if it failed)."""

    @staticmethod
    def of(
        supplier: ProcessorSupplier | ProcessorFactory, preferred_local_parallelism: int = -1
    ) -> ProcessorMetaSupplier:
        """A meta supplier that gives every member the same ``supplier``."""
        if not isinstance(supplier, ProcessorSupplier):
            supplier = ProcessorSupplier.of(supplier)
        return _SameForEveryMember(supplier, preferred_local_parallelism)

    @staticmethod
    def force_total_parallelism_one(supplier: ProcessorSupplier | ProcessorFactory) -> ProcessorMetaSupplier:
        """Exactly one processor in the whole cluster, on the first member.

        For vertices that must see every item, such as a sink writing to one
        file. Pair it with ``Edge.all_to_one()`` or a distributed edge.
        """
        if not isinstance(supplier, ProcessorSupplier):
            supplier = ProcessorSupplier.of(supplier)
        return _TotalParallelismOne(supplier)


class _SameForEveryMember(ProcessorMetaSupplier):
    def __init__(self, supplier: ProcessorSupplier, preferred_local_parallelism: int) -> None:
        self.supplier = supplier
        self._preferred = preferred_local_parallelism

    def preferred_local_parallelism(self) -> int:
        return self._preferred

    def get(self, member_index: int) -> ProcessorSupplier:
        return self.supplier

    def __repr__(self) -> str:
        return repr(self.supplier)


class _TotalParallelismOne(ProcessorMetaSupplier):
    def __init__(self, supplier: ProcessorSupplier) -> None:
        self.supplier = supplier

    def preferred_local_parallelism(self) -> int:
        return 1

    @property
    def is_total_parallelism_one(self) -> bool:
        return True

    def get(self, member_index: int) -> ProcessorSupplier:
        return self.supplier if member_index == 0 else ProcessorSupplier.of(Processor)


def as_meta_supplier(value: object, owner: str) -> ProcessorMetaSupplier:
    """Normalize what a vertex was given into a meta supplier, or say what is wrong."""
    if isinstance(value, ProcessorMetaSupplier):
        return value
    if isinstance(value, ProcessorSupplier):
        return ProcessorMetaSupplier.of(value)
    if isinstance(value, type) and issubclass(value, Processor):
        return ProcessorMetaSupplier.of(value)
    if isinstance(value, Processor):
        raise TypeError(
            f"{owner}: got a Processor instance; give a zero-argument callable that makes one "
            f"(for example `lambda: {type(value).__qualname__}(...)`), since every parallel "
            "instance needs its own processor"
        )
    if callable(value):
        return ProcessorMetaSupplier.of(value)
    raise TypeError(
        f"{owner}: expected a ProcessorMetaSupplier, a ProcessorSupplier or a callable returning a "
        f"Processor, got {type(value).__qualname__}"
    )


def _describe(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)
