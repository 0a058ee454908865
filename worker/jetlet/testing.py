"""A test harness for processors, as Jet's ``TestSupport``.

:func:`verify_processor` runs one processor by hand, without an engine,
through every callback of its contract, and checks its output::

    from jetlet.core import processors
    from jetlet.testing import verify_processor

    verify_processor(processors.map_p(str.upper)).input(["a", "b"]).expect_output(["A", "B"])

Each verification runs the processor several times, and each run must give
the expected output:

1. with a roomy outbox (the batch paths);
2. with an outbox of capacity 1 that refuses everything on every other call
   (the "outbox full, return and retry" paths);
3. like 2, and after every input item also saving the processor's state to a
   snapshot, throwing the processor away, and restoring a fresh one from that
   snapshot (the state paths), unless snapshots are disabled.

In every run the harness asserts *progress* (a call with room in the outbox
and items in the inbox must consume or emit something; ``complete()`` that
returns False must have emitted) and that no call of a cooperative processor
takes longer than the cooperative time limit.

Inputs may contain :class:`~jetlet.core.watermark.Watermark` objects: the
harness delivers the items before it and then calls
``try_process_watermark``. Emitted watermarks appear in the output.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from jetlet import config
from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import processor as proc
from jetlet.core import snapshot_writer
from jetlet.core import watermark as wm

__all__ = ["TestOutbox", "TestSupport", "make_context", "verify_processor", "wait_until"]


class TestOutbox(outbox_mod.Outbox):
    """An outbox that can be *blocked*: while blocked it refuses every offer."""

    __test__ = False  # not a pytest test class

    __slots__ = ("blocked",)

    def __init__(self, bucket_count: int, capacity: int) -> None:
        super().__init__(bucket_count, capacity)
        self.blocked = False

    def offer(self, item: Any, ordinal: outbox_mod.Ordinals = outbox_mod.ALL_ORDINALS) -> bool:
        return not self.blocked and super().offer(item, ordinal)

    def offer_batch(self, items: list[Any], ordinal: outbox_mod.Ordinals = outbox_mod.ALL_ORDINALS) -> int:
        return 0 if self.blocked else super().offer_batch(items, ordinal)

    def room(self, ordinal: outbox_mod.Ordinals = outbox_mod.ALL_ORDINALS) -> int:
        return 0 if self.blocked else super().room(ordinal)

    def has_room(self, ordinal: int = outbox_mod.ALL_ORDINALS) -> bool:
        return not self.blocked and super().has_room(ordinal)

    def offer_to_snapshot(self, key: Any, value: Any) -> bool:
        return not self.blocked and super().offer_to_snapshot(key, value)

    def drain(self, outputs: list[list[Any]], snapshot: list[tuple[Any, Any]]) -> int:
        """Move everything emitted into ``outputs`` (per ordinal) and ``snapshot``; return the count."""
        moved = 0
        for ordinal, bucket in enumerate(self.buckets):
            if bucket:
                outputs[ordinal].extend(bucket)
                moved += len(bucket)
                self.buckets[ordinal] = []
            control = self.take_control(ordinal)
            if control is not None:
                outputs[ordinal].append(control)
                moved += 1
        if self.snapshot_bucket:
            snapshot.extend(self.snapshot_bucket)
            moved += len(self.snapshot_bucket)
            self.snapshot_bucket.clear()
        return moved


def make_context(
    vertex_name: str = "test",
    global_processor_index: int = 0,
    local_parallelism: int = 1,
    member_index: int = 0,
    member_count: int = 1,
    processing_guarantee: config.ProcessingGuarantee = config.ProcessingGuarantee.NONE,
) -> proc.ProcessorContext:
    """A processor context for running a processor outside a job."""
    return proc.ProcessorContext(
        job_id=0,
        job_name="test",
        vertex_name=vertex_name,
        member_count=member_count,
        local_parallelism=local_parallelism,
        total_parallelism=local_parallelism * member_count,
        partition_count=config.DEFAULT_PARTITION_COUNT,
        processing_guarantee=processing_guarantee,
        job_arguments={},
        logger=logging.getLogger(f"jetlet.test.{vertex_name}"),
        member_index=member_index,
        global_processor_index=global_processor_index,
        local_processor_index=global_processor_index % local_parallelism,
    )


class TestSupport:
    """Fluent builder of one processor verification; see the module doc."""

    __test__ = False  # not a pytest test class

    def __init__(self, supplier: object) -> None:
        self._meta = proc.as_meta_supplier(supplier, "verify_processor")
        self._inputs: list[list[Any]] = [[]]
        self._priorities: list[int] | None = None
        self._expected: list[list[Any]] | None = None
        self._checker: Callable[[list[Any], list[Any]], bool] | None = None
        self._ordered = True
        self._snapshots = True
        self._progress = True
        self._call_complete = True
        self._cooperative_limit_s = 1.0
        self._context = make_context()
        self._input_batch = 1

    # -- configuration ------------------------------------------------------
    def input(self, items: Sequence[Any]) -> TestSupport:
        """Items for input ordinal 0."""
        self._inputs = [list(items)]
        return self

    def inputs(
        self, per_ordinal: Sequence[Sequence[Any]], priorities: Sequence[int] | None = None
    ) -> TestSupport:
        """Items for each input ordinal; lower ``priorities`` are fed first (all 0 by default)."""
        self._inputs = [list(items) for items in per_ordinal]
        self._priorities = list(priorities) if priorities is not None else None
        return self

    def expect_output(self, items: Sequence[Any]) -> TestSupport:
        """The expected output of ordinal 0; runs the verification."""
        return self.expect_outputs([items])

    def expect_outputs(self, per_ordinal: Sequence[Sequence[Any]]) -> TestSupport:
        """The expected output of each output ordinal; runs the verification."""
        self._expected = [list(items) for items in per_ordinal]
        self.verify()
        return self

    def output_checker(self, checker: Callable[[list[Any], list[Any]], bool]) -> TestSupport:
        """Compare outputs with ``checker(expected, actual)`` instead of equality."""
        self._checker = checker
        return self

    def unordered(self) -> TestSupport:
        """Compare outputs as bags (multisets), ignoring order."""
        self._ordered = False
        return self

    def disable_snapshots(self) -> TestSupport:
        self._snapshots = False
        return self

    def disable_progress_assertion(self) -> TestSupport:
        self._progress = False
        return self

    def disable_complete_call(self) -> TestSupport:
        """Do not call ``complete()`` (for streaming processors that never complete)."""
        self._call_complete = False
        return self

    def cooperative_time_limit(self, seconds: float) -> TestSupport:
        self._cooperative_limit_s = seconds
        return self

    def input_batch_size(self, size: int) -> TestSupport:
        """How many items the harness puts into the inbox at a time (1 by default)."""
        self._input_batch = max(1, size)
        return self

    def context(self, context: proc.ProcessorContext) -> TestSupport:
        self._context = context
        return self

    # -- running ------------------------------------------------------------
    def verify(self) -> None:
        """Run every mode and raise ``AssertionError`` on the first mismatch."""
        if self._expected is None:
            raise ValueError("nothing to verify: call expect_output() or expect_outputs()")
        modes = [
            ("roomy outbox", 1024, False, False),
            ("outbox of 1, blocked every other call", 1, True, False),
        ]
        if self._snapshots:
            modes.append(
                ("outbox of 1, blocked every other call, snapshot+restore after each item", 1, True, True)
            )
        for name, capacity, blocking, snapshots in modes:
            actual = _Run(self, capacity, blocking, snapshots).run()
            for ordinal, (expected, got) in enumerate(zip(self._expected, actual, strict=True)):
                if not self._matches(expected, got):
                    raise AssertionError(
                        f"mode '{name}': output ordinal {ordinal} differs\n"
                        f"  expected: {expected!r}\n  actual:   {got!r}"
                    )

    def _matches(self, expected: list[Any], actual: list[Any]) -> bool:
        if self._checker is not None:
            return self._checker(expected, actual)
        if self._ordered:
            return expected == actual
        remaining = list(actual)
        for item in expected:
            try:
                remaining.remove(item)
            except ValueError:
                return False
        return not remaining

    def new_processor(self) -> proc.Processor:
        self._meta.init(self._context)
        supplier = self._meta.get(self._context.member_index)
        supplier.init(self._context)
        (made,) = supplier.get(1)
        return made


class _Run:
    """One run of a processor through its whole lifecycle."""

    def __init__(self, spec: TestSupport, capacity: int, blocking: bool, snapshots: bool) -> None:
        self.spec = spec
        self.capacity = capacity
        self.blocking = blocking
        self.snapshots = snapshots
        assert spec._expected is not None
        self.outputs: list[list[Any]] = [[] for _ in spec._expected]
        self.calls = 0
        self.processor, self.outbox = self._fresh()

    def _fresh(self) -> tuple[proc.Processor, TestOutbox]:
        processor = self.spec.new_processor()
        outbox = TestOutbox(len(self.outputs), self.capacity)
        processor.init(outbox, self.spec._context)
        return processor, outbox

    def _call(self, what: str, fn: Callable[[], Any]) -> tuple[Any, int]:
        """Call one callback with the blocking schedule; return its result and what it emitted."""
        self.calls += 1
        self.outbox.blocked = self.blocking and self.calls % 2 == 0
        started = time.perf_counter()
        result = fn()
        took = time.perf_counter() - started
        if self.processor.is_cooperative() and took > self.spec._cooperative_limit_s:
            raise AssertionError(
                f"{what} of a cooperative processor took {took * 1000:.0f} ms "
                f"(limit {self.spec._cooperative_limit_s * 1000:.0f} ms)"
            )
        was_blocked = self.outbox.blocked
        self.outbox.blocked = False
        snapshot: list[tuple[Any, Any]] = []
        emitted = self.outbox.drain(self.outputs, snapshot)
        if snapshot:
            raise AssertionError(f"{what} offered to the snapshot outside save_to_snapshot()")
        return result, (emitted if not was_blocked else -1)

    def _until_true(self, what: str, fn: Callable[[], bool]) -> None:
        for _ in range(1_000_000):
            done, emitted = self._call(what, fn)
            if done:
                return
            if self.spec._progress and emitted == 0:
                raise AssertionError(f"{what} returned False without emitting anything (no progress)")
        raise AssertionError(f"{what} never returned True")

    def run(self) -> list[list[Any]]:
        spec = self.spec
        ordinals = list(range(len(spec._inputs)))
        priorities = spec._priorities or [0] * len(ordinals)
        for ordinal in sorted(ordinals, key=lambda o: (priorities[o], o)):
            self._feed(ordinal, spec._inputs[ordinal])
            self._until_true(f"complete_edge({ordinal})", functools.partial(self._complete_edge, ordinal))
        if spec._call_complete:
            self._until_true("complete()", self.processor.complete)
        self.processor.close()
        return self.outputs

    def _process_watermark(self, watermark: wm.Watermark) -> bool:
        if watermark.is_idle_message():  # as the engine's tasklet does
            return self.processor.try_process_idle()
        return self.processor.try_process_watermark(watermark)

    def _complete_edge(self, ordinal: int) -> bool:
        return self.processor.complete_edge(ordinal)

    def _feed(self, ordinal: int, items: list[Any]) -> None:
        inbox = inbox_mod.Inbox()
        position = 0
        while position < len(items):
            item = items[position]
            if isinstance(item, wm.Watermark):
                self._until_true(
                    f"try_process_watermark({item})",
                    functools.partial(self._process_watermark, item),
                )
                position += 1
                continue
            chunk: list[Any] = []
            while position < len(items) and len(chunk) < self.spec._input_batch:
                if isinstance(items[position], wm.Watermark):
                    break
                chunk.append(items[position])
                position += 1
            inbox.add_batch(chunk)
            self._drain_inbox(ordinal, inbox)
            if self.snapshots:
                self._snapshot_and_restore()

    def _drain_inbox(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        for _ in range(1_000_000):
            if not inbox:
                return
            before = len(inbox)
            _, emitted = self._call(f"process({ordinal})", lambda: self.processor.process(ordinal, inbox))
            if self.spec._progress and emitted == 0 and len(inbox) == before:
                raise AssertionError(
                    f"process({ordinal}) neither took an item from the inbox nor emitted anything "
                    "(no progress)"
                )
        raise AssertionError(f"process({ordinal}) never emptied the inbox")

    def _snapshot_and_restore(self) -> None:
        saved: list[tuple[Any, Any]] = []
        for _ in range(1_000_000):
            self.calls += 1
            self.outbox.blocked = self.blocking and self.calls % 2 == 0
            done = self.processor.save_to_snapshot()
            self.outbox.blocked = False
            self.outbox.drain(self.outputs, saved)
            if done:
                break
        else:
            raise AssertionError("save_to_snapshot() never returned True")
        saved = snapshot_writer.read_back_lent(saved)  # as the member stores them, then a restore
        self.processor.close()
        self.processor, self.outbox = self._fresh()
        if saved:
            self.processor.restore_from_snapshot(inbox_mod.Inbox(saved))
            self._until_true("finish_snapshot_restore()", self.processor.finish_snapshot_restore)


def verify_processor(supplier: object) -> TestSupport:
    """Start verifying the processors that ``supplier`` makes (see the module doc)."""
    return TestSupport(supplier)


_FIRST_CHECK_S = 0.001
_LAST_CHECK_S = 0.05


MAX_LOAD_FACTOR = 4.0
"""The most a deadline of :func:`wait_until` is stretched on a busy machine."""


def load_factor() -> float:
    """How much longer waits should be allowed on this machine now: the one-minute load average per
    core, at least 1 and at most :data:`MAX_LOAD_FACTOR` (1 where the load is not known).

    >>> 1.0 <= load_factor() <= MAX_LOAD_FACTOR
    True
    """
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    return min(MAX_LOAD_FACTOR, max(1.0, load / (os.cpu_count() or 1)))


def wait_until(
    condition: Callable[[], object],
    what: str,
    timeout: float = 30.0,
    changed: threading.Condition | None = None,
) -> None:
    """Return once ``condition()`` holds; ``AssertionError`` naming ``what`` after ``timeout`` seconds.

    The deadline scales with the machine's load (:func:`load_factor`): on a
    machine with more runnable work than cores the same wait is allowed
    proportionally longer (up to :data:`MAX_LOAD_FACTOR` times), so a test
    that waits on a condition does not fail only because the machine is busy.

    With ``changed`` (a condition variable notified whenever the state that
    ``condition`` reads changes) it waits on that notification. State with no
    notification (another process's, through its API) is checked again after
    waits that grow from 1 ms to 50 ms, as Jet's ``assertTrueEventually``.

    >>> ready = threading.Event()
    >>> threading.Timer(0.01, ready.set).start()
    >>> wait_until(ready.is_set, "the timer fired")
    """
    timeout *= load_factor()
    deadline = time.monotonic() + timeout
    if changed is not None:
        with changed:
            if changed.wait_for(condition, timeout):
                return
        raise AssertionError(f"timed out after {timeout:g} s waiting until {what}")
    pause = _FIRST_CHECK_S
    idle = threading.Event()
    while not condition():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"timed out after {timeout:g} s waiting until {what}")
        idle.wait(min(pause, remaining))
        pause = min(pause * 2, _LAST_CHECK_S)
