"""``SourceBuilder``: custom batch, stream and timestamped stream sources, in real jobs and by hand."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jetlet
from jetlet import config
from jetlet import job as job_mod
from jetlet.aggregate import counting
from jetlet.core import DAG, Edge, event_time, processors
from jetlet.core import processor as proc
from jetlet.core.processors import watermarks
from jetlet.core.watermark import Watermark
from jetlet.errors import JobCancelledError, JobFailedError
from jetlet.pipeline import Pipeline, Sinks, WindowDefinition
from jetlet.pipeline.source_builder import (
    BUFFER_CAPACITY,
    SourceBuffer,
    SourceBuilder,
    TimestampedSourceBuffer,
)
from jetlet.testing import TestOutbox, make_context, verify_processor, wait_until

JOIN_TIMEOUT_S = 30
DEADLINE_S = 20


def wait_while_running(job: job_mod.Job, condition: Callable[[], bool]) -> None:
    """Wait until ``condition`` is false or the job ends (the test then checks what it produced)."""
    wait_until(
        lambda: not condition() or job.future.done(), "the job produced what the test awaits", DEADLINE_S
    )


class Recorder:
    """What the source's functions saw, from every processor thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.created: list[tuple[int, int]] = []
        self.destroyed: list[int] = []

    def create(self, context: proc.ProcessorContext) -> None:
        with self.lock:
            self.created.append((context.global_processor_index, context.total_parallelism))

    def destroy(self, index: int) -> None:
        with self.lock:
            self.destroyed.append(index)


class LineReader:
    """A source state: the lines of this processor's slice of the files, and a position."""

    def __init__(self, context: proc.ProcessorContext, directory: Path) -> None:
        self.index = context.global_processor_index
        mine = sorted(directory.iterdir())[context.global_processor_index :: context.total_parallelism]
        self.lines = [line for path in mine for line in path.read_text(encoding="utf-8").splitlines()]
        self.position = 0


def fill_lines(reader: LineReader, buffer: SourceBuffer[str]) -> None:
    """Adds at most 50 lines per call, closes the buffer after the last one."""
    chunk = reader.lines[reader.position : reader.position + 50]
    for line in chunk:
        buffer.add(line)
    reader.position += len(chunk)
    if reader.position >= len(reader.lines):
        buffer.close()


def write_files(directory: Path, count: int) -> list[str]:
    directory.mkdir()
    every: list[str] = []
    for f in range(count):
        lines = [f"file {f} line {n}" for n in range(f * 40 + 7)]
        (directory / f"{f:02}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        every += lines
    return every


def line_source(directory: Path, recorder: Recorder, lp: int | None) -> Any:
    def create(context: proc.ProcessorContext) -> LineReader:
        recorder.create(context)
        return LineReader(context, directory)

    builder = (
        SourceBuilder.batch("lines", create)
        .fill_buffer_fn(fill_lines)
        .destroy_fn(lambda reader: recorder.destroy(reader.index))
    )
    return (builder.distributed(lp) if lp is not None else builder).build()


@pytest.mark.parametrize("lp", [1, 4])
def test_distributed_batch_source_reads_each_processors_slice(
    jet: jetlet.EmbeddedInstance, tmp_path: Path, lp: int
) -> None:
    # given ten files and a distributed builder source reading its slice of them
    expected = write_files(tmp_path / "in", 10)
    recorder = Recorder()
    p = Pipeline()
    p.read_from(line_source(tmp_path / "in", recorder, lp)).write_to(Sinks.list("out"))
    # when the job completes
    jet.new_job(p).join(timeout=JOIN_TIMEOUT_S)
    # then every line arrived once, each processor made and destroyed its state once
    assert collections.Counter(jet.get_list("out")) == collections.Counter(expected)
    assert sorted(recorder.created) == [(i, lp) for i in range(lp)]
    assert sorted(recorder.destroyed) == list(range(lp))


def test_non_distributed_batch_source_runs_once_in_the_cluster(
    jet: jetlet.EmbeddedInstance, tmp_path: Path
) -> None:
    # given a builder source that is not distributed
    expected = write_files(tmp_path / "in", 3)
    recorder = Recorder()
    p = Pipeline()
    p.read_from(line_source(tmp_path / "in", recorder, None)).write_to(Sinks.list("out"))
    # when the job completes
    jet.new_job(p).join(timeout=JOIN_TIMEOUT_S)
    # then one processor read everything, in order
    assert recorder.created == [(0, 1)]
    assert jet.get_list("out") == expected


def test_batch_builder_source_passes_the_processor_harness(tmp_path: Path) -> None:
    # given a source of 123 lines
    expected = write_files(tmp_path / "in", 3)
    # when the harness runs it with a roomy outbox and a blocked outbox of 1, then it emits them in order
    verify_processor(line_source(tmp_path / "in", Recorder(), None).supplier).expect_output(expected)


class Counter:
    """A stream state: the next number to emit, up to an exclusive limit."""

    def __init__(self, limit: int) -> None:
        self.next = 0
        self.limit = limit
        self.restored: list[list[Any]] = []


def fill_numbers(counter: Counter, buffer: SourceBuffer[int]) -> None:
    for n in range(counter.next, min(counter.next + 7, counter.limit)):
        buffer.add(n)
    counter.next = min(counter.next + 7, counter.limit)


def restore_numbers(counter: Counter, saved: list[int]) -> None:
    counter.restored.append(list(saved))
    counter.next = saved[0]


def numbers_stream(limit: int, states: list[Counter]) -> Any:
    def create(_context: proc.ProcessorContext) -> Counter:
        states.append(Counter(limit))
        return states[-1]

    return (
        SourceBuilder.stream("numbers", create)
        .fill_buffer_fn(fill_numbers)
        .create_snapshot_fn(lambda counter: counter.next)
        .restore_snapshot_fn(restore_numbers)
        .build()
    )


def new_processor(supplier: proc.ProcessorMetaSupplier, outbox: TestOutbox) -> proc.Processor:
    context = make_context(processing_guarantee=config.ProcessingGuarantee.EXACTLY_ONCE)
    made = verify_processor(supplier).context(context).new_processor()
    made.init(outbox, context)
    return made


def run_calls(call: Callable[[], bool], outbox: TestOutbox, emitted: list[Any], times: int) -> bool:
    """Call ``call`` up to ``times`` times or until it returns True, moving what it emitted."""
    done = False
    for _ in range(times):
        done = call()
        emitted.extend(outbox.buckets[0])
        outbox.buckets[0] = []
        if done:
            break
    return done


def test_stream_source_saves_its_state_and_resumes_from_a_snapshot() -> None:
    # given a stream of 0..99 whose fills outrun an outbox of 3, run part of the way
    states: list[Counter] = []
    supplier = numbers_stream(100, states).supplier
    outbox = TestOutbox(1, 3)
    first = new_processor(supplier, outbox)
    emitted: list[int] = []
    run_calls(first.complete, outbox, emitted, 10)
    # when it saves a snapshot (emitting what it holds first) and a fresh processor restores from it
    assert run_calls(first.save_to_snapshot, outbox, emitted, 10), "save_to_snapshot never finished"
    snapshot = list(outbox.snapshot_bucket)
    outbox.snapshot_bucket.clear()
    first.close()
    second = new_processor(supplier, outbox)
    second.restore_from_snapshot(jetlet.core.Inbox(snapshot))
    assert second.finish_snapshot_restore()
    run_calls(second.complete, outbox, emitted, 200)
    # then the restored state got the one saved object and the stream went on with no gap and no repeat
    assert states[1].restored == [[snapshot[0][1]]]
    assert 0 < snapshot[0][1] < 100
    assert emitted == list(range(100))


def test_a_cooperative_stream_source_runs_in_a_job_on_the_cooperative_thread(
    jet: jetlet.EmbeddedInstance,
) -> None:
    # given a stream builder source declared cooperative, and the same source without it
    threads: set[str] = set()

    def create(_context: proc.ProcessorContext) -> Counter:
        return Counter(300)

    def fill(counter: Counter, buffer: SourceBuffer[int]) -> None:
        threads.add(threading.current_thread().name)
        fill_numbers(counter, buffer)

    builder = SourceBuilder.stream("numbers", create).fill_buffer_fn(fill)
    blocking = builder.build().supplier
    cooperative = builder.cooperative().build().supplier
    assert not verify_processor(blocking).new_processor().is_cooperative()
    assert verify_processor(cooperative).new_processor().is_cooperative()
    # when the cooperative one runs in a job
    p = Pipeline()
    p.read_from(builder.build()).without_timestamps().write_to(Sinks.list("out"))
    job = jet.new_job(p)
    wait_while_running(job, lambda: len(jet.get_list("out")) < 300)
    # then every item arrived, filled on the instance's cooperative thread
    assert sorted(jet.get_list("out")) == list(range(300))
    assert threads == {"jetlet-cooperative-0"}
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(timeout=JOIN_TIMEOUT_S)


def test_stream_source_runs_in_a_job_until_cancelled(jet: jetlet.EmbeddedInstance) -> None:
    # given a stream builder source that emits 0..299 and then nothing more, in an exactly-once job
    states: list[Counter] = []
    p = Pipeline()
    p.read_from(numbers_stream(300, states)).without_timestamps().map(lambda n: n * 2).write_to(
        Sinks.list("out")
    )
    job = jet.new_job(p, config.JobConfig(processing_guarantee=config.ProcessingGuarantee.EXACTLY_ONCE))
    # when every item arrived
    wait_while_running(job, lambda: len(jet.get_list("out")) < 300)
    out = jet.get_list("out")
    # then the stream is still running, and it ends by cancellation
    assert sorted(out) == [n * 2 for n in range(300)]
    assert not job.future.done()
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(timeout=JOIN_TIMEOUT_S)


def test_timestamped_stream_emits_events_with_the_given_timestamps(jet: jetlet.EmbeddedInstance) -> None:
    # given a timestamped stream source whose items carry their own timestamps
    items = [(n * 10 + 5, f"item {n}") for n in range(50)]

    def fill(position: list[int], buffer: TimestampedSourceBuffer[str]) -> None:
        for timestamp, item in items[position[0] : position[0] + 8]:
            buffer.add(item, timestamp)
        position[0] += 8

    source = SourceBuilder.timestamped_stream("stamped", lambda _context: [0]).fill_buffer_fn(fill).build()
    got: list[Any] = []
    dag = DAG()
    src = dag.new_vertex("source", source.supplier)
    sink = dag.new_vertex("sink", processors.list_sink_p(got))
    dag.edge(Edge.between(src, sink))
    # when a job runs until every event arrived
    job = jet.new_job(dag)
    wait_while_running(job, lambda: len(got) < len(items))
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(timeout=JOIN_TIMEOUT_S)
    # then the source emitted (timestamp, item) events, says so, and reads the native timestamp from them
    assert got == items
    assert source.emits_events
    assert source.native_timestamps is not None and source.native_timestamps(got[3]) == 35


def test_timestamped_buffer_stamps_an_item_without_timestamp_with_the_wall_clock() -> None:
    # given a timestamped buffer
    buffer: TimestampedSourceBuffer[str] = TimestampedSourceBuffer("stamped", "timestamped stream")
    # when an item is added without a timestamp
    before = time.time_ns() // 1_000_000
    buffer.add("x")
    after = time.time_ns() // 1_000_000
    # then its event carries the current time in ms
    ((stamp, item),) = buffer.take()
    assert item == "x" and before <= stamp <= after


def test_source_buffer_refuses_what_a_source_may_not_do() -> None:
    # given a batch buffer and a stream buffer, when misused, then each error says what was wrong
    batch: SourceBuffer[int] = SourceBuffer("b", "batch")
    with pytest.raises(TypeError, match="cannot add None"):
        batch.add(None)  # type: ignore[arg-type]
    for n in range(BUFFER_CAPACITY):
        batch.add(n)
    with pytest.raises(OverflowError, match=f"more than {BUFFER_CAPACITY} items in one call"):
        batch.add(-1)
    batch.close()
    with pytest.raises(RuntimeError, match="add\\(\\) after the buffer was closed"):
        batch.add(0)
    with pytest.raises(RuntimeError, match="only a batch source may close its buffer"):
        SourceBuffer("s", "stream").close()
    with pytest.raises(TypeError, match="timestamp must be an int"):
        TimestampedSourceBuffer("t", "timestamped stream").add("x", 1.5)  # type: ignore[arg-type]


def test_add_all_adds_a_batch_as_add_would_and_refuses_a_bad_one_whole() -> None:
    # given buffers filled item by item and by batch, then they hold the same entries
    one_by_one: TimestampedSourceBuffer[str] = TimestampedSourceBuffer("t", "timestamped stream")
    for item, stamp in [("a", 5), ("b", 7)]:
        one_by_one.add(item, stamp)
    batched: TimestampedSourceBuffer[str] = TimestampedSourceBuffer("t", "timestamped stream")
    batched.add_all(["a", "b"], [5, 7])
    assert batched.take() == one_by_one.take() == [(5, "a"), (7, "b")]
    # and hand their timestamps out beside the events, once (take() dropped those taken with it)
    one_by_one.add("c", 9)
    batched.add_all(["c", "d"], [9, 3])
    assert one_by_one.take_with_timestamps() == ([(9, "c")], [9])
    assert batched.take_with_timestamps() == ([(9, "c"), (3, "d")], [9, 3])
    assert batched.take_with_timestamps() == ([], [])
    plain: SourceBuffer[int] = SourceBuffer("b", "batch")
    plain.add(1)
    plain.add_all([2, 3])
    assert plain.take() == [1, 2, 3]
    # when a batch is bad, then nothing of it is added and the error names the problem
    with pytest.raises(TypeError, match="cannot add None"):
        plain.add_all([4, None, 5])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"timestamp must be an int \(ms\), got 2\.5"):
        batched.add_all(["x", "y"], [1, 2.5])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"timestamp must be an int \(ms\), got '3'"):
        batched.add_all(["x", "y"], [1, "3"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="2 items and 1 timestamps"):
        batched.add_all(["x", "y"], [1])
    with pytest.raises(OverflowError, match=f"more than {BUFFER_CAPACITY} items in one call"):
        plain.add_all(list(range(BUFFER_CAPACITY + 1)))
    assert plain.take() == [] and batched.take() == []
    plain.close()
    with pytest.raises(RuntimeError, match="add_all\\(\\) after the buffer was closed"):
        plain.add_all([1])


def test_a_failing_fill_fails_the_job_and_still_destroys_the_state(jet: jetlet.EmbeddedInstance) -> None:
    # given a source whose fill adds more than the buffer holds
    destroyed: list[str] = []

    def fill(_state: None, buffer: SourceBuffer[int]) -> None:
        for n in range(BUFFER_CAPACITY + 1):
            buffer.add(n)

    source = (
        SourceBuilder.batch("greedy", lambda _context: None)
        .fill_buffer_fn(fill)
        .destroy_fn(lambda _state: destroyed.append("done"))
        .build()
    )
    p = Pipeline()
    p.read_from(source).write_to(Sinks.list("out"))
    # when the job runs, then it fails with the buffer's error and the state was destroyed
    with pytest.raises(JobFailedError) as failure:
        jet.new_job(p).join(timeout=JOIN_TIMEOUT_S)
    assert isinstance(failure.value.__cause__, OverflowError)
    assert destroyed == ["done"]


def empty_iterator(_context: proc.ProcessorContext) -> Iterator[int]:
    return iter(())


def test_source_builder_arguments_are_validated() -> None:
    # given bad arguments, when the builder gets them, then the error names the argument
    with pytest.raises(ValueError, match="SourceBuilder: name must be a non-empty string"):
        SourceBuilder.batch("", empty_iterator)
    with pytest.raises(TypeError, match="SourceBuilder 's': create_fn must be callable"):
        SourceBuilder.stream("s", "nope")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="SourceBuilder 's': fill_buffer_fn must be callable"):
        SourceBuilder.stream("s", empty_iterator).fill_buffer_fn(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'s': preferred_local_parallelism must be an int >= 1, got 0"):
        SourceBuilder.stream("s", empty_iterator).distributed(0)
    with pytest.raises(ValueError, match="'s': fill_buffer_fn is required before build"):
        SourceBuilder.batch("s", empty_iterator).build()
    with pytest.raises(ValueError, match="create_snapshot_fn and restore_snapshot_fn go together"):
        builder = SourceBuilder.stream("s", empty_iterator).fill_buffer_fn(print)
        builder.create_snapshot_fn(lambda _state: 0).build()


def test_timestamped_events_keep_their_shape_through_insert_watermarks_without_wrapping() -> None:
    # given the events of a timestamped builder source, out of order by at most 3 ms
    source = SourceBuilder.timestamped_stream("stamped", empty_iterator).fill_buffer_fn(print).build()
    events = [(10, "a"), (8, "b"), (14, "c"), (13, "d")]
    assert source.native_timestamps is not None
    policy = event_time.EventTimePolicy(timestamp_fn=source.native_timestamps, allowed_lag=3, wrap_fn=None)
    # when watermarks are inserted with the source's native timestamps and no wrapping (the stage's contract)
    # then the events pass unchanged, followed by the limiting-lag watermarks
    verify_processor(watermarks.insert_watermarks_p(policy)).input(events).expect_output(
        [(10, "a"), Watermark(7), (8, "b"), (14, "c"), Watermark(11), (13, "d")]
    )


def test_timestamped_builder_source_windows_by_its_native_timestamps(jet: jetlet.EmbeddedInstance) -> None:
    # given a finite timestamped builder source, 3 events per 100 ms, out of order by up to 20 ms
    events = [(n * 33 + (20 if n % 5 == 0 else 0), f"k{n % 3}") for n in range(300)]

    def fill(position: list[int], buffer: TimestampedSourceBuffer[str]) -> None:
        for timestamp, item in events[position[0] : position[0] + 16]:
            buffer.add(item, timestamp)
        position[0] += 16

    stamped = SourceBuilder.timestamped_stream("stamped", lambda _context: [0]).fill_buffer_fn(fill).build()
    p = Pipeline()
    (
        p.read_from(stamped)
        .with_native_timestamps(allowed_lag=50)
        .grouping_key(lambda item: item)
        .window(WindowDefinition.tumbling(1000))
        .aggregate(counting())
        .write_to(Sinks.list("counts"))
    )
    # when the job has seen every event's window close (the stream never ends: cancel it then)
    job = jet.new_job(p)
    complete = {(start, key) for start in range(0, 9000, 1000) for key in ("k0", "k1", "k2")}
    wait_while_running(job, lambda: not complete <= {(r.start, r.key) for r in jet.get_list("counts")})
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(timeout=JOIN_TIMEOUT_S)
    # then each window counted its events by the source's own timestamps (items are bare, not events)
    expected = collections.Counter((ts // 1000 * 1000, item) for ts, item in events)
    got = {(r.start, r.key): r.result for r in jet.get_list("counts")}
    assert {k: got[k] for k in complete} == {k: expected[k] for k in complete}
