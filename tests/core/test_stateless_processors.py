"""map_p, filter_p, flat_map_p and the chain processor in every harness mode, against plain Python."""

from __future__ import annotations

import random
from typing import Any

import pytest

from jetlet.core import Inbox, Outbox, Watermark, processors
from jetlet.core.processors import chain
from jetlet.testing import make_context, verify_processor

_RNG_SEED = 1234


def _data(n: int = 60) -> list[int]:
    rng = random.Random(_RNG_SEED)
    return [rng.randint(-1000, 1000) for _ in range(n)]


def test_given_random_ints_when_map_p_then_output_is_the_mapped_list() -> None:
    data = _data()
    verify_processor(processors.map_p(lambda x: x * x - 1)).input(data).expect_output(
        [x * x - 1 for x in data]
    )


def test_given_map_returning_none_when_map_p_then_those_items_are_dropped() -> None:
    data = _data()
    fn = lambda x: None if x % 3 == 0 else str(x)  # noqa: E731
    verify_processor(processors.map_p(fn)).input(data).expect_output([str(x) for x in data if x % 3 != 0])


def test_given_random_ints_when_filter_p_then_output_is_the_filtered_list() -> None:
    data = _data()
    verify_processor(processors.filter_p(lambda x: x > 0)).input(data).expect_output(
        [x for x in data if x > 0]
    )


def test_given_random_counts_when_flat_map_p_then_output_is_the_flattened_list() -> None:
    data = [abs(x) % 5 for x in _data(40)]
    fn = lambda n: range(n)  # noqa: E731
    verify_processor(processors.flat_map_p(fn)).input(data).expect_output([i for n in data for i in range(n)])


def test_given_flat_map_returning_none_or_lists_when_flat_map_p_then_none_means_nothing() -> None:
    data = _data(40)
    fn = lambda x: None if x < 0 else [x, -x]  # noqa: E731
    verify_processor(processors.flat_map_p(fn)).input(data).expect_output(
        [y for x in data if x >= 0 for y in (x, -x)]
    )


def test_given_watermarks_when_stateless_processors_run_then_watermarks_pass_through_in_place() -> None:
    wm1, wm2 = Watermark(1), Watermark(2)
    verify_processor(processors.map_p(lambda x: x * 2)).input([1, wm1, 2, wm2]).expect_output(
        [2, wm1, 4, wm2]
    )
    verify_processor(processors.filter_p(bool)).input([0, wm1, 3]).expect_output([wm1, 3])
    verify_processor(processors.flat_map_p(lambda x: [x] * 2)).input([wm1, 5]).expect_output([wm1, 5, 5])


def test_given_batch_inbox_and_small_outbox_when_map_p_processes_then_it_takes_only_what_fits() -> None:
    # given 10 items and an outbox with room for 4
    p = processors.map_p(lambda x: x + 100)()
    outbox = Outbox(1, capacity=4)
    p.init(outbox, make_context())
    inbox = Inbox(range(10))
    # when
    p.process(0, inbox)
    # then only 4 were taken and emitted; the rest wait in the inbox
    assert outbox.buckets == [[100, 101, 102, 103]]
    assert list(inbox) == list(range(4, 10))


def test_given_flat_map_output_larger_than_outbox_when_processing_then_item_stays_until_fully_emitted() -> (
    None
):
    p = processors.flat_map_p(lambda x: [x] * 5)()
    outbox = Outbox(1, capacity=2)
    p.init(outbox, make_context())
    inbox = Inbox(["a", "b"])
    emitted: list[str] = []
    heads: list[Any] = []
    for _ in range(10):
        p.process(0, inbox)
        heads.append(inbox.peek())
        emitted.extend(outbox.buckets[0])
        outbox.buckets[0] = []
        if not inbox:
            break
    assert emitted == ["a"] * 5 + ["b"] * 5
    assert heads[:2] == ["a", "a"]


# -- chain processor ----------------------------------------------------------
def _map_step(fn: Any) -> chain.BatchStep:
    return lambda batch: [fn(x) for x in batch]


def _filter_step(pred: Any) -> chain.BatchStep:
    return lambda batch: [x for x in batch if pred(x)]


def _flat_step(fn: Any) -> chain.BatchStep:
    return lambda batch: [y for x in batch for y in fn(x)]


@pytest.mark.parametrize("batch_size", [1, 3, 8])
def test_given_composed_steps_when_chain_p_then_output_equals_the_composed_reference(batch_size: int) -> None:
    # given map -> filter -> flat_map composed into one step
    data = _data(50)
    step = chain.compose(
        [
            _map_step(lambda x: x + 7),
            _filter_step(lambda x: x % 2 == 0),
            _flat_step(lambda x: [x] * (abs(x) % 3)),
        ]
    )
    expected = [y for x in data if (x + 7) % 2 == 0 for y in [x + 7] * (abs(x + 7) % 3)]
    # when / then
    verify_processor(chain.chain_p(step)).input_batch_size(batch_size).input(data).expect_output(expected)


def test_given_one_step_when_compose_then_it_is_returned_as_is() -> None:
    step = _map_step(str)
    assert chain.compose([step]) is step


def test_given_step_that_empties_batch_when_composed_then_later_steps_are_not_called() -> None:
    calls: list[list[Any]] = []

    def spy(batch: list[Any]) -> list[Any]:
        calls.append(batch)
        return batch

    step = chain.compose([_filter_step(lambda x: False), spy])
    assert step([1, 2]) == [] and calls == []
    assert chain.compose([_map_step(abs), spy])([-1]) == [1] and calls == [[1]]


def test_given_non_cooperative_chain_when_asked_then_says_so() -> None:
    assert chain.chain_p(_map_step(str), cooperative=False)().is_cooperative() is False
    assert chain.chain_p(_map_step(str))().is_cooperative() is True


def test_given_expanding_step_with_small_outbox_when_processing_then_the_chunk_is_held_in_inbox() -> None:
    # the processor holds pending outputs, so the chunk's inputs stay visible in the inbox
    p = chain.ChainP(_flat_step(lambda x: [x] * 3))
    outbox = Outbox(1, capacity=4)
    p.init(outbox, make_context())
    inbox = Inbox([1, 2])
    p.process(0, inbox)
    assert outbox.buckets == [[1, 1, 1, 2]]
    assert list(inbox) == [1, 2]
    outbox.buckets[0] = []
    p.process(0, inbox)
    assert outbox.buckets == [[2, 2]]
    assert not inbox
