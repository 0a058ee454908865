"""Built-in sources saved mid-way and restored into the same or another number of processors.

Each test runs ``N`` processors of a source by hand (:class:`SourceRun`), lets
them get unequally far (processor ``i`` makes ``i + 1`` times as many calls
before the snapshot), saves every processor's position, throws the
processors away (a failure right after the snapshot), restores ``M`` fresh
ones from the saved entries (each entry of a source is a broadcast key, so
every new processor gets all of them), runs those to the end, and checks that
what was emitted before the snapshot plus what was emitted after the restore
is the whole reference exactly once: nothing lost, nothing twice.
"""

from __future__ import annotations

import json
import pickle
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from jetlet import config
from jetlet.core import Inbox, Processor, ProcessorMetaSupplier, processors, snapshot_keys
from jetlet.core.processors import sources
from jetlet.nexmark import events, nexmark_source
from jetlet.pipeline import Sources
from jetlet.testing import TestOutbox, make_context

CAPACITY = 7
RESCALES = [(3, 2), (3, 4), (3, 3), (1, 3), (4, 1)]
"""(processors that save, processors that restore)."""

Entry = tuple[Any, Any]


class SourceRun:
    """``count`` processors of a source, each with its own small outbox."""

    def __init__(self, meta: ProcessorMetaSupplier, count: int) -> None:
        contexts = [
            make_context(
                vertex_name="source",
                global_processor_index=index,
                local_parallelism=count,
                processing_guarantee=config.ProcessingGuarantee.EXACTLY_ONCE,
            )
            for index in range(count)
        ]
        meta.init(contexts[0])
        supplier = meta.get(0)
        supplier.init(contexts[0])
        self.processors: list[Processor] = supplier.get(count)
        self.outboxes = [TestOutbox(1, CAPACITY) for _ in range(count)]
        self.emitted: list[Any] = []
        self.done = [False] * count
        for processor, outbox, context in zip(self.processors, self.outboxes, contexts, strict=True):
            processor.init(outbox, context)

    def _drain(self, index: int) -> list[Entry]:
        saved: list[Entry] = []
        output: list[list[Any]] = [self.emitted]
        self.outboxes[index].drain(output, saved)
        return saved

    def step(self, index: int, calls: int) -> None:
        """Up to ``calls`` calls of ``complete()`` of processor ``index``."""
        for _ in range(calls):
            if self.done[index]:
                return
            self.done[index] = self.processors[index].complete()
            assert not self._drain(index)

    def step_unequally(self, calls: int) -> None:
        """Processor ``i`` makes ``(i + 1) * calls`` calls."""
        for index in range(len(self.processors)):
            self.step(index, (index + 1) * calls)

    def run_to_end(self, max_calls: int = 100_000) -> None:
        for index in range(len(self.processors)):
            self.step(index, max_calls)
            assert self.done[index], f"processor {index} did not finish in {max_calls} calls"

    def run_until(self, size: int, max_calls: int = 10_000) -> None:
        """Run every processor (round robin) until ``size`` items came out (for streams)."""
        for _ in range(max_calls):
            if len(self.emitted) >= size:
                return
            for index in range(len(self.processors)):
                self.step(index, 1)
        raise AssertionError(f"only {len(self.emitted)} of {size} items came out")

    def snapshot(self) -> list[Entry]:
        """Every processor's entries (through pickle, as a snapshot store keeps them); then a failure."""
        entries: list[Entry] = []
        for index, processor in enumerate(self.processors):
            for _ in range(1000):
                done = processor.save_to_snapshot()
                entries.extend(self._drain(index))
                if done:
                    break
            else:
                raise AssertionError("save_to_snapshot() never returned True")
        self.close()
        restored: list[Entry] = pickle.loads(pickle.dumps(entries))
        return restored

    def close(self) -> None:
        for processor in self.processors:
            processor.close()


def restore(meta: ProcessorMetaSupplier, entries: list[Entry], count: int) -> SourceRun:
    """``count`` fresh processors, each given every entry (source positions are broadcast keys)."""
    assert all(snapshot_keys.partition_or_broadcast(key, 271) is None for key, _ in entries)
    run = SourceRun(meta, count)
    for processor in run.processors:
        processor.restore_from_snapshot(Inbox(entries))
        assert processor.finish_snapshot_restore()
    return run


def _exactly_once(emitted: list[Any], reference: list[Any]) -> None:
    assert len(emitted) == len(reference)
    assert Counter(emitted) == Counter(reference)


# -- re-iterable collections --------------------------------------------------------
class Reiterable:
    """A collection that is neither a list nor a range: each ``iter()`` starts over."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[str]:
        return (f"item{i}" for i in range(self.n))


COLLECTIONS: dict[str, Callable[[], ProcessorMetaSupplier]] = {
    "Sources.items": lambda: Sources.items(*[f"item{i}" for i in range(500)]).supplier,
    "from_iterable(range)": lambda: Sources.from_iterable(range(500)).supplier,
    "from_iterable(re-iterable)": lambda: Sources.from_iterable(Reiterable(500)).supplier,
}


def _collection_reference(name: str) -> list[Any]:
    return list(range(500)) if "range" in name else [f"item{i}" for i in range(500)]


@pytest.mark.parametrize("name", COLLECTIONS)
@pytest.mark.parametrize(("saved_by", "restored_into"), RESCALES)
def test_collection_source_restores_exactly_into_any_parallelism(
    name: str, saved_by: int, restored_into: int
) -> None:
    # given processors that emitted unequal parts of their slices
    meta = COLLECTIONS[name]()
    first = SourceRun(meta, saved_by)
    first.step_unequally(3)
    # when restored into another parallelism and run to the end
    second = restore(meta, first.snapshot(), restored_into)
    second.run_to_end()
    # then every item came out once
    _exactly_once(first.emitted + second.emitted, _collection_reference(name))


@pytest.mark.parametrize("name", COLLECTIONS)
def test_collection_source_survives_two_rescales_in_a_row(name: str) -> None:
    # given 3 processors, restored into 2 that also get unequally far (past the old positions in part),
    meta = COLLECTIONS[name]()
    first = SourceRun(meta, 3)
    first.step_unequally(4)
    second = restore(meta, first.snapshot(), 2)
    second.step(0, 2)
    second.step(1, 9)
    # when those are restored into 4 and run to the end
    third = restore(meta, second.snapshot(), 4)
    third.run_to_end()
    # then the indices the first processors emitted ahead of the second ones are still not repeated
    _exactly_once(first.emitted + second.emitted + third.emitted, _collection_reference(name))


def test_strided_cursor_forgets_old_positions_once_every_processor_passed_them() -> None:
    # given a cursor restored from 2 processors and then from 3 that all went past the first ones
    cursor = sources.StridedCursor(0, 3)
    cursor.restore([sources.SlicePosition(0, 2, 10), sources.SlicePosition(1, 2, 5)], "test")
    saved = [sources.SlicePosition(i, 3, 30 + i, cursor.position().earlier) for i in range(3)]
    # when restored again
    again = sources.StridedCursor(1, 2)
    again.restore(saved, "test")
    # then only the latest vector is kept, and the walk starts at the lowest next
    assert again.position().earlier == ((30, 31, 32),)
    assert list(again.take(4, 100)) == [31, 33, 35, 37]  # 31: processor 1 of 3 had not emitted it


def test_strided_cursor_refuses_an_incomplete_snapshot() -> None:
    cursor = sources.StridedCursor(0, 2)
    with pytest.raises(ValueError, match=r"positions of processors \[0, 2\] of 3"):
        cursor.restore([sources.SlicePosition(0, 3, 3), sources.SlicePosition(2, 3, 5)], "source 'x'")


# -- one-shot iterators and generators ---------------------------------------------------
@pytest.mark.parametrize("restored_into", [1, 3])
def test_one_shot_iterator_copy_resumes_after_the_snapshot(restored_into: int) -> None:
    # given a job with a one-shot iterator, as it travels to a member (a pickled copy per execution)
    data = [f"line{i}" for i in range(100)]
    shipped = cloudpickle.dumps(processors.source_from_iterable(iter(data)))
    first = SourceRun(cloudpickle.loads(shipped), 2)
    first.step(0, 4)
    # when a new execution (a fresh copy) is restored into another parallelism
    second = restore(cloudpickle.loads(shipped), first.snapshot(), restored_into)
    second.run_to_end()
    # then processor 0 skipped what was emitted and the rest came out once
    assert 0 < len(first.emitted) < len(data)
    assert first.emitted + second.emitted == data


def test_one_shot_iterator_read_past_the_snapshot_cannot_be_restored() -> None:
    # given a generator source, one object in this process, read further after the snapshot
    meta = processors.source_from_iterable(f"line{i}" for i in range(100))
    first = SourceRun(meta, 1)
    first.step(0, 2)
    entries = first.snapshot()
    again = SourceRun(meta, 1)
    again.step(0, 1)
    again.close()
    # when a restore needs the items taken since, then it fails naming the source and the fix
    with pytest.raises(ValueError, match=r"source 'source' reads a one-shot iterator, and 7 of its items"):
        restore(meta, entries, 1)


def _squares(context: Any) -> Iterator[int]:
    n, index = context.total_parallelism, context.global_processor_index
    return (i * i for i in range(index, 200, n))


def test_generator_source_resumes_each_processor_after_its_emitted_items() -> None:
    # given a batch_from_generator source on 3 processors, unequally far
    meta = Sources.batch_from_generator(_squares, "squares").supplier
    first = SourceRun(meta, 3)
    first.step_unequally(2)
    # when restored into the same parallelism
    second = restore(meta, first.snapshot(), 3)
    second.run_to_end()
    # then every square came out once
    _exactly_once(first.emitted + second.emitted, [i * i for i in range(200)])


@pytest.mark.parametrize("restored_into", [2, 4])
def test_generator_source_refuses_another_parallelism_naming_the_source(restored_into: int) -> None:
    meta = Sources.stream_from_generator(_squares, "squares").supplier
    first = SourceRun(meta, 3)
    first.step_unequally(1)
    with pytest.raises(ValueError, match=r"source 'squares' was saved by 3 processors .* restored into"):
        restore(meta, first.snapshot(), restored_into)


# -- the rate source -----------------------------------------------------------------------
class FakeTime:
    """Stands in for the ``time`` module of the sources: a monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.mark.parametrize(("saved_by", "restored_into"), RESCALES)
def test_rate_source_restores_exactly_and_paces_from_the_restore(
    monkeypatch: pytest.MonkeyPatch, saved_by: int, restored_into: int
) -> None:
    # given 10 items a second, 60 in all, run for 2.5 s
    clock = FakeTime()
    monkeypatch.setattr(sources, "time", clock)
    meta = Sources.test_stream(10, lambda seq: f"event{seq}", count=60).supplier
    first = SourceRun(meta, saved_by)
    clock.now += 2.5
    first.step_unequally(1)
    emitted_before = len(first.emitted)
    assert 0 < emitted_before <= 26
    # when the job is down for 100 s and then restored into another parallelism
    clock.now += 100
    entries = first.snapshot()
    paced_from = min(position.next for _, position in entries)
    second = restore(meta, entries, restored_into)
    for index in range(restored_into):
        second.step(index, 5)
    # then at the moment of the restore, what was missed while down does not come in a burst: only the
    # lowest number not emitted before is due
    assert len(second.emitted) <= 1
    # and a second later the next ten are, whoever emits them (no stall waiting for the old start's pace)
    clock.now += 1.0
    for index in range(restored_into):
        second.step(index, 5)
    due = {f"event{seq}" for seq in range(paced_from + 11)} - set(first.emitted)
    assert sorted(second.emitted) == sorted(due)
    # and once the pace reaches the end, every item came out once
    clock.now += 6.1
    second.run_to_end()
    _exactly_once(first.emitted + second.emitted, [f"event{seq}" for seq in range(60)])


# -- files -----------------------------------------------------------------------------------
def _write_files(directory: Path) -> list[str]:
    """Five files of 0..40 lines; returns every line."""
    directory.mkdir()
    lines = []
    for number, count in enumerate([13, 0, 40, 7, 25]):
        content = [f"file{number} line{line}" for line in range(count)]
        (directory / f"part{number}.txt").write_text(
            "".join(f"{line}\n" for line in content), encoding="utf-8"
        )
        lines += content
    return lines


@pytest.mark.parametrize(("saved_by", "restored_into"), RESCALES)
def test_files_source_resumes_every_file_after_its_emitted_lines(
    tmp_path: Path, saved_by: int, restored_into: int
) -> None:
    lines = _write_files(tmp_path / "in")
    meta = Sources.files(tmp_path / "in", glob="*.txt").supplier
    first = SourceRun(meta, saved_by)
    first.step_unequally(2)
    second = restore(meta, first.snapshot(), restored_into)
    second.run_to_end()
    _exactly_once(first.emitted + second.emitted, lines)


@pytest.mark.parametrize(("saved_by", "restored_into"), [(2, 3), (3, 1)])
def test_json_source_counts_blank_lines_in_its_offsets(
    tmp_path: Path, saved_by: int, restored_into: int
) -> None:
    # given JSON Lines files with blank lines among the objects
    directory = tmp_path / "in"
    directory.mkdir()
    objects = []
    for number in range(4):
        rows = [{"file": number, "row": row} for row in range(9 * number + 3)]
        text = "".join(f"{json.dumps(row)}\n" + ("\n" if row["row"] % 4 == 0 else "") for row in rows)
        (directory / f"f{number}.json").write_text(text, encoding="utf-8")
        objects += rows
    meta = Sources.json(directory).supplier
    first = SourceRun(meta, saved_by)
    first.step_unequally(1)
    second = restore(meta, first.snapshot(), restored_into)
    second.run_to_end()
    emitted = [json.dumps(item, sort_keys=True) for item in first.emitted + second.emitted]
    _exactly_once(emitted, [json.dumps(item, sort_keys=True) for item in objects])


# -- NEXMark (a SourceBuilder source) --------------------------------------------------------
@pytest.mark.parametrize(("saved_by", "restored_into"), [(2, 3), (3, 2), (2, 2)])
def test_nexmark_source_restores_exactly_into_any_parallelism(saved_by: int, restored_into: int) -> None:
    # given a 600-event NEXMark stream on processors that got unequally far
    meta = nexmark_source(count=600, local_parallelism=saved_by).supplier
    first = SourceRun(meta, saved_by)
    first.step_unequally(4)
    assert 0 < len(first.emitted) < 600
    # when restored into another parallelism and run until every event is out
    second = restore(meta, first.snapshot(), restored_into)
    second.run_until(600 - len(first.emitted))
    second.close()
    # then each event came out once, with its event time
    emitted = [(ts, repr(item)) for ts, item in first.emitted + second.emitted]
    _exactly_once(emitted, [(item.date_time, repr(item)) for item in events(0, 600)])


def test_source_builder_gives_the_saved_objects_in_order_of_the_saving_processor() -> None:
    # given a distributed builder source whose snapshot objects name their processor
    from jetlet.pipeline import SourceBuilder

    received: list[list[Any]] = []

    def fill(state: list[int], buffer: Any) -> None:
        buffer.close()

    meta = (
        SourceBuilder.batch("named", lambda context: [context.global_processor_index])
        .fill_buffer_fn(fill)
        .create_snapshot_fn(lambda state: f"saved by {state[0]}")
        .restore_snapshot_fn(lambda state, objects: received.append(list(objects)))
        .distributed(3)
        .build()
        .supplier
    )
    entries = SourceRun(meta, 3).snapshot()
    # when the entries reach a processor in reverse order
    run = SourceRun(meta, 1)
    run.processors[0].restore_from_snapshot(Inbox(list(reversed(entries))))
    assert run.processors[0].finish_snapshot_restore()
    # then restore_snapshot_fn gets them by processor index, under broadcast keys
    assert received == [["saved by 0", "saved by 1", "saved by 2"]]
    assert all(isinstance(key, snapshot_keys.ProcessorKey) for key, _ in entries)
