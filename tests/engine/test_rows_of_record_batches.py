"""Record batches count as their rows: in queue capacities, the inbox limit and the item counts.

An item whose class defines ``__jetlet_rows__`` (``ColumnBatch``), or a ``(timestamp, item)``
event of one, is as many rows as it holds; every other item is one, as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import jetlet
from jetlet._execution.inbound import InboundStream, WatermarkCoalescer
from jetlet._execution.queues import SpscQueue
from jetlet._execution.sizing import rows_of
from jetlet.batches import ColumnBatch
from jetlet.core import Inbox
from jetlet.pipeline import Pipeline, Sinks, SourceBuilder


def _batch(rows: int) -> ColumnBatch:
    return ColumnBatch({"v": np.arange(rows), "t": np.arange(rows)}, "t")


def test_a_batch_of_1024_rows_fills_a_queue_of_capacity_1024() -> None:
    # given a queue sized for 1,024 items
    queue = SpscQueue(1_024)
    # when a (timestamp, batch) event of 1,024 rows is offered, then it fills the queue
    assert queue.offer_batch([(1_023, _batch(1_024))]) == 1
    assert (queue.size(), queue.room(), queue.high_water_mark) == (1_024, 0, 1_024)
    assert queue.offer_batch([(1, _batch(1))]) == 0
    # and polling it frees all 1,024 rows
    assert len(queue.poll()) == 1
    assert (queue.size(), queue.room()) == (0, 1_024)


def test_a_queue_takes_as_many_batches_as_their_rows_leave_room_for_and_one_when_empty() -> None:
    queue = SpscQueue(1_000)
    assert queue.offer_batch([_batch(600), _batch(300), _batch(200)]) == 2  # 900 rows; 1,100 would not fit
    assert queue.offer_batch([_batch(200)]) == 0  # 100 rows of room left
    assert queue.offer_batch([_batch(99), _batch(0), _batch(0)]) == 2  # an empty batch takes one slot
    assert queue.size() == 1_000
    while queue.poll() is not None:
        pass
    assert queue.size() == 0
    assert queue.offer_batch([_batch(5_000), _batch(1)]) == 1  # an empty queue takes one, however large
    assert queue.size() == 5_000


def test_ordinary_items_count_one_each_as_before() -> None:
    queue = SpscQueue(1_024)
    assert queue.offer_batch(list(range(2_000))) == 1_024
    assert queue.size() == 1_024
    assert rows_of([(5, "x"), (6, "y")]) == 2
    assert rows_of([(5, _batch(7)), (6, _batch(3))]) == 10


def test_an_input_counts_the_rows_it_received() -> None:
    # given five queued lists of one 1,000-row batch each, in a queue of 5,000 rows
    queue = SpscQueue(5_000)
    for _ in range(5):
        assert queue.offer_batch([(0, _batch(1_000))]) == 1
    assert queue.room() == 0
    stream = InboundStream(0, 0, [queue], WatermarkCoalescer(1), 0)
    inbox = Inbox()
    # when the input drains into an inbox, then it took the five batches and counted 5,000 rows
    stream.drain_to(inbox, 1_024)
    assert len(inbox) == 5
    assert (stream.received_items, stream.received_batches) == (5_000, 5)


def _batches(count: int, rows: int) -> Any:
    def fill(remaining: list[int], buffer: Any) -> None:
        if remaining:
            remaining.pop()
            buffer.add(_batch(rows))
        else:
            buffer.close()

    return SourceBuilder.batch("batches", lambda _context: list(range(count))).fill_buffer_fn(fill).build()


def test_a_jobs_received_and_emitted_counts_are_rows_of_batches() -> None:
    # given a job that moves 30 batches of 500 rows through a map_batches stage
    p = Pipeline()
    p.read_from(_batches(30, 500)).map_batches(lambda b: b.filter(b["v"] % 5 == 0)).set_name(
        "fifth"
    ).write_to(Sinks.list("out"))
    with jetlet.embedded() as jet:
        job = jet.new_job(p)
        job.join(60)
        metrics = job.metrics()
        out = list(jet.get_list("out"))
    # then the stage received 15,000 rows and emitted 3,000 (not 30 batches each)
    stage = {name: values for name, values in metrics.items() if "fifth" in name}
    assert sum(v["receivedCount"] for v in stage.values()) == 15_000
    assert sum(v["emittedCount"] for v in stage.values()) == 3_000 == sum(map(len, out))


def test_the_planner_marks_the_edges_that_carry_batches_for_their_queues_in_rows() -> None:
    # given a stream of batches through timestamps, map_batches, a batch window and a row map
    def fill(_state: None, buffer: Any) -> None:
        buffer.add(_batch(3), 2)

    source = SourceBuilder.timestamped_stream("s", lambda _context: None).fill_buffer_fn(fill).build()
    p = Pipeline()
    batches = p.read_from(source).with_native_timestamps(0).map_batches(lambda b: b)
    batches.write_to(Sinks.noop())
    windows = batches.aggregate_batch_windows(jetlet.pipeline.WindowDefinition.tumbling(10), "v")
    windows.map(lambda w: w.end).write_to(Sinks.noop())
    # when it is planned, then every edge up to the window's results carries batches, and no other
    dag = p.to_dag()
    marked = {
        (e.source_name, e.dest_name): e.carries_batches
        for v in dag.vertices()
        for e in dag.outbound_edges(v.name)
    }
    assert {edge for edge, batch in marked.items() if not batch} == {
        ("batch-window", "fused(map, map)"),  # window results, then the map and the unwrapping of events
        ("fused(map, map)", "noop-2"),
    }
    assert marked[("map-2", "noop")]  # the unwrapped batches into the first sink
    assert jetlet.config.EdgeConfig().batch_queue_size == 32 * 1_024
