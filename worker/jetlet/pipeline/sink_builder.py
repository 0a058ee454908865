"""``SinkBuilder``: a custom sink from a few plain functions (Jet's ``SinkBuilder``).

``create_fn(context)`` makes the sink's *state* (a connection, a file) once
per processor; ``receive_fn(state, item)`` takes one item;
``flush_fn(state)`` makes what was received durable or visible;
``destroy_fn(state)`` releases the state::

    sink = (
        SinkBuilder.sink("file", lambda context: open(f"out-{context.global_processor_index}", "w"))
        .receive_fn(lambda f, item: f.write(f"{item}\\n"))
        .flush_fn(lambda f: f.flush())
        .destroy_fn(lambda f: f.close())
        .build()
    )

The processor (:class:`WriteBufferedP`, as Jet's) is non-cooperative, since
the functions may block. In ``init`` it calls ``create_fn(context)``; for
each inbox batch it calls ``receive_fn`` for every item and then
``flush_fn`` once; it ignores watermarks; ``close()`` calls ``destroy_fn``,
also after a failure. By default there is one processor per member
(``preferred_local_parallelism(n)`` changes that), and each one's context
tells it its ``global_processor_index`` and ``total_parallelism``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import processor as proc
from jetlet.core import watermark as wm
from jetlet.errors import require_callable
from jetlet.pipeline import sinks as sinks_mod

C = TypeVar("C")


@dataclasses.dataclass(frozen=True)
class _SinkSpec:
    name: str
    create_fn: Callable[[proc.ProcessorContext], Any]
    receive_fn: Callable[[Any, Any], object]
    flush_fn: Callable[[Any], object] | None
    destroy_fn: Callable[[Any], object] | None


class WriteBufferedP(proc.Processor):
    """The processor of a builder sink; see the module doc."""

    def __init__(self, spec: _SinkSpec) -> None:
        self._spec = spec
        self._state: Any = None
        self._created = False

    def is_cooperative(self) -> bool:
        return False

    def init(self, outbox: outbox_mod.Outbox, context: proc.ProcessorContext) -> None:
        super().init(outbox, context)
        self._state = self._spec.create_fn(context)
        self._created = True

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        state, receive = self._state, self._spec.receive_fn
        for item in inbox.take_all():
            receive(state, item)
        if self._spec.flush_fn is not None:
            self._spec.flush_fn(state)

    def try_process_watermark(self, watermark: wm.Watermark) -> bool:
        return True

    def close(self) -> None:
        if self._created:
            self._created = False
            if self._spec.destroy_fn is not None:
                self._spec.destroy_fn(self._state)


def _require_callable(sink: str, what: str, fn: object) -> None:
    require_callable(fn, f"SinkBuilder {sink!r}: {what}")


class SinkBuilder(Generic[C]):
    """Builds a :class:`~jetlet.pipeline.sinks.Sink`; start with :meth:`sink`."""

    def __init__(self, name: str, create_fn: Callable[[proc.ProcessorContext], C]) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"SinkBuilder: name must be a non-empty string, got {name!r}")
        _require_callable(name, "create_fn", create_fn)
        self._name = name
        self._create_fn = create_fn
        self._receive_fn: Callable[[C, Any], object] | None = None
        self._flush_fn: Callable[[C], object] | None = None
        self._destroy_fn: Callable[[C], object] | None = None
        self._local_parallelism = 1

    @staticmethod
    def sink(name: str, create_fn: Callable[[proc.ProcessorContext], C]) -> SinkBuilder[C]:
        """Start a sink whose processors each hold ``create_fn(context)`` as their state."""
        return SinkBuilder(name, create_fn)

    def receive_fn(self, fn: Callable[[C, Any], object]) -> SinkBuilder[C]:
        """``fn(state, item)`` takes one item (required)."""
        _require_callable(self._name, "receive_fn", fn)
        self._receive_fn = fn
        return self

    def flush_fn(self, fn: Callable[[C], object]) -> SinkBuilder[C]:
        """``fn(state)`` runs after each batch of received items."""
        _require_callable(self._name, "flush_fn", fn)
        self._flush_fn = fn
        return self

    def destroy_fn(self, fn: Callable[[C], object]) -> SinkBuilder[C]:
        """``fn(state)`` releases the state when the processor closes."""
        _require_callable(self._name, "destroy_fn", fn)
        self._destroy_fn = fn
        return self

    def preferred_local_parallelism(self, preferred_local_parallelism: int) -> SinkBuilder[C]:
        """How many processors each member runs when the stage sets none (1 by default)."""
        value = preferred_local_parallelism
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(
                f"SinkBuilder {self._name!r}: preferred_local_parallelism must be an int >= 1, got {value!r}"
            )
        self._local_parallelism = value
        return self

    def build(self) -> sinks_mod.Sink[Any]:
        if self._receive_fn is None:
            raise ValueError(f"SinkBuilder {self._name!r}: receive_fn is required before build()")
        spec = _SinkSpec(self._name, self._create_fn, self._receive_fn, self._flush_fn, self._destroy_fn)
        supplier = proc.ProcessorMetaSupplier.of(
            functools.partial(WriteBufferedP, spec), preferred_local_parallelism=self._local_parallelism
        )
        return sinks_mod.Sink(self._name, supplier)
