"""Sources (iterable, generator, rate) and sinks (list, callback, batch callback, logger, noop)."""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest

from jetlet.core import Outbox, ProcessorContext, Watermark, processors
from jetlet.core.processors import sources
from jetlet.testing import make_context, verify_processor


def _ctx(index: int, total: int) -> ProcessorContext:
    return make_context(global_processor_index=index, local_parallelism=total)


def _data(n: int = 100) -> list[int]:
    rng = random.Random(42)
    return [rng.randint(0, 10**6) for _ in range(n)]


# -- sources -------------------------------------------------------------------
def test_given_list_when_source_from_iterable_then_emits_all_items_in_order() -> None:
    data = _data(2500)  # more than one batch of 1024
    verify_processor(processors.source_from_iterable(data)).expect_output(data)


def test_given_parallel_processors_when_source_from_iterable_then_each_item_once_split_by_index() -> None:
    # given 3 processors, each emitting its share
    data = _data(50)
    for index in range(3):
        # then processor i emits items i, i+3, ...
        verify_processor(processors.source_from_iterable(data)).context(_ctx(index, 3)).expect_output(
            data[index::3]
        )


def test_given_source_when_asked_then_it_prefers_one_processor_per_member() -> None:
    assert processors.source_from_iterable([1]).preferred_local_parallelism() == 1
    assert processors.source_from_generator(lambda ctx: [1]).preferred_local_parallelism() == 1
    assert processors.source_rate(1.0, count=1).preferred_local_parallelism() == 1


def test_given_iterable_yielding_none_when_source_runs_then_type_error() -> None:
    with pytest.raises(TypeError, match="yielded None"):
        verify_processor(processors.source_from_iterable([1, None])).expect_output([1])


def test_given_generator_function_when_source_from_generator_then_it_is_called_with_each_context() -> None:
    def generate(ctx: ProcessorContext) -> Any:
        return (
            f"{ctx.global_processor_index}:{i}"
            for i in range(ctx.global_processor_index, 7, ctx.total_parallelism)
        )

    verify_processor(processors.source_from_generator(generate)).context(_ctx(1, 2)).expect_output(
        ["1:1", "1:3", "1:5"]
    )


def test_given_non_cooperative_generator_when_made_then_processor_says_so() -> None:
    meta = processors.source_from_generator(lambda ctx: [1], cooperative=False)
    (p,) = meta.get(0).get(1)
    assert not p.is_cooperative()
    (q,) = processors.source_from_generator(lambda ctx: [1]).get(0).get(1)
    assert q.is_cooperative()


def test_given_source_and_small_outbox_when_completing_then_emitted_counter_matches() -> None:
    (p,) = processors.source_from_iterable(list(range(10))).get(0).get(1)
    outbox = Outbox(1, capacity=4)
    p.init(outbox, make_context())
    assert p.complete() is False
    assert outbox.buckets == [[0, 1, 2, 3]]
    assert p.emitted == 4  # type: ignore[attr-defined]


def test_given_high_rate_and_count_when_source_rate_then_emits_exactly_count_items() -> None:
    # a rate so high that every item is due at once: nothing waits on the clock
    verify_processor(processors.source_rate(1e12, lambda s: s * 10, count=40)).expect_output(
        [s * 10 for s in range(40)]
    )


def test_given_parallel_rate_sources_when_run_then_they_split_the_sequence() -> None:
    emitted: list[int] = []
    for index in range(3):
        run = verify_processor(processors.source_rate(1e12, count=10)).context(_ctx(index, 3))
        run.expect_output(list(range(index, 10, 3)))
        emitted.extend(range(index, 10, 3))
    assert sorted(emitted) == list(range(10))


def test_given_zero_count_when_source_rate_then_completes_at_once_with_nothing() -> None:
    verify_processor(processors.source_rate(5.0, count=0)).expect_output([])


def test_given_slow_unbounded_rate_when_completing_then_emits_only_what_is_due_and_never_finishes() -> None:
    # one item per 1000 s: item 0 is due at the start, item 1 not within this test
    (p,) = processors.source_rate(0.001).get(0).get(1)
    outbox = Outbox(1)
    p.init(outbox, make_context())
    assert p.complete() is False
    assert p.complete() is False
    assert outbox.buckets == [[0]]


@pytest.mark.parametrize(("rate", "count"), [(0, None), (-1.0, 5), (1.0, -1)])
def test_given_bad_rate_or_count_when_source_rate_then_value_error(rate: float, count: int | None) -> None:
    with pytest.raises(ValueError, match="source_rate"):
        processors.source_rate(rate, count=count)


def test_given_batch_constant_when_read_then_one_outbox_worth() -> None:
    assert sources.BATCH == 1024


# -- sinks ---------------------------------------------------------------------
def test_given_items_and_watermarks_when_list_sink_p_then_items_collected_and_watermarks_swallowed() -> None:
    # given
    data = _data(20)
    target: list[Any] = []
    with_wm = [*data[:10], Watermark(5), *data[10:]]
    # when verified (3 runs) it emits nothing
    verify_processor(processors.list_sink_p(target)).input(with_wm).expect_outputs([])
    # then every run appended every item, and no watermark
    assert target == data * 3


def test_given_items_when_callback_sink_p_then_called_once_per_item_in_order() -> None:
    seen: list[Any] = []
    verify_processor(processors.callback_sink_p(seen.append)).disable_snapshots().input(
        [1, 2, 3]
    ).expect_outputs([])
    assert seen == [1, 2, 3] * 2


def test_given_items_when_batch_callback_sink_p_then_batches_cover_all_items() -> None:
    batches: list[list[Any]] = []
    verify_processor(processors.batch_callback_sink_p(batches.append)).input_batch_size(
        4
    ).disable_snapshots().input(list(range(10))).expect_outputs([])
    assert [x for b in batches for x in b] == list(range(10)) * 2
    assert max(len(b) for b in batches) == 4


def test_given_cooperative_flag_when_sinks_made_then_processors_report_it() -> None:
    assert not processors.callback_sink_p(print, cooperative=False)().is_cooperative()
    assert not processors.batch_callback_sink_p(print, cooperative=False)().is_cooperative()
    assert processors.list_sink_p([])().is_cooperative()


def test_given_items_when_logger_sink_p_then_each_is_logged_at_level_with_context_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="jetlet.test.test"):
        verify_processor(
            processors.logger_sink_p(lambda x: f"<{x}>", logging.WARNING)
        ).disable_snapshots().input(["a", "b"]).expect_outputs([])
    records = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert (
        records
        == [("jetlet.test.test", logging.WARNING, "<a>"), ("jetlet.test.test", logging.WARNING, "<b>")] * 2
    )


def test_given_items_when_noop_p_then_nothing_is_emitted_and_inbox_emptied() -> None:
    verify_processor(processors.noop_p()).input(_data(10)).expect_outputs([])
    verify_processor(processors.noop_p()).input(_data(3)).expect_output([])
