"""Cheap snapshot copies: a ``copy_fn`` replaces the pickle on the processing thread, and the snapshot
still holds exactly the state at the barrier while processing goes on."""

from __future__ import annotations

import functools
import random
import sys
import threading
from typing import Any

import pytest

from jetlet.aggregate import AggregateOperation, operations
from jetlet.core import Inbox, Outbox, snapshot_writer
from jetlet.core.processors import aggregation, stateful
from jetlet.pipeline import stages
from jetlet.testing import make_context


class CountingState:
    """A list of values that counts its copies and its pickles (by key)."""

    copies: dict[str, int] = {}
    pickles: dict[str, int] = {}

    def __init__(self, key: str = "", values: list[int] | None = None) -> None:
        self.key = key
        self.values = values if values is not None else []

    def copy(self) -> CountingState:
        CountingState.copies[self.key] = CountingState.copies.get(self.key, 0) + 1
        return CountingState(self.key, list(self.values))

    def __reduce__(self) -> tuple[Any, ...]:
        CountingState.pickles[self.key] = CountingState.pickles.get(self.key, 0) + 1
        return CountingState, (self.key, list(self.values))


def _key(item: tuple[str, int]) -> str:
    return item[0]


def _append(state: CountingState, key: str, item: tuple[str, int]) -> None:
    state.key = key
    state.values.append(item[1])


def _save(processor: Any, vertex: str = "test") -> list[tuple[Any, Any]]:
    """The processor's entries of one snapshot, as the engine collects them (not yet stored)."""
    outbox = Outbox(1, capacity=100_000)
    processor.init(outbox, make_context(vertex))
    assert processor.save_to_snapshot()
    saved = list(outbox.snapshot_bucket)
    processor.init(Outbox(1, capacity=100_000), make_context(vertex))
    return saved


def _stored(saved: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """What the member stores of ``saved`` (frozen off the processing thread), read back."""
    return [(key, snapshot_writer.read_back(value)) for key, value in snapshot_writer.settle_lent(saved)]


def _reference(*runs: list[tuple[str, int]]) -> dict[str, list[int]]:
    values: dict[str, list[int]] = {}
    for run in runs:
        for key, value in run:
            values.setdefault(key, []).append(value)
    return values


def test_given_copy_fn_when_lent_states_change_after_barrier_then_copied_and_barrier_state_kept() -> None:
    # given a keyed stateful map with a copy_fn, whose states are saved to a snapshot not yet stored
    CountingState.copies.clear()
    CountingState.pickles.clear()
    before = [("a", 1), ("b", 2), ("c", 3), ("a", 4)]
    after = [("a", 5), ("c", 6), ("a", 7), ("c", 8)]
    processor = stateful.StatefulP(
        stateful.MAP, _key, CountingState, _append, timestamped=False, copy_fn=CountingState.copy
    )
    processor.init(Outbox(1, capacity=1_000), make_context())
    processor.process(0, Inbox(list(before)))
    saved = _save(processor)
    # when items after the barrier change a's and c's states (each twice) before the member stores it
    processor.process(0, Inbox(list(after)))
    # then the processing thread copied each changed state once and pickled none
    assert CountingState.copies == {"a": 1, "c": 1}
    assert CountingState.pickles == {}
    # and the stored snapshot holds every state as it was at the barrier (a copy taken any later
    # than the first change would hold a's 5 or c's 6)
    stored = {key: (state.values, ts) for key, (state, ts) in _stored(saved)}
    assert stored == {key: (values, 0) for key, values in _reference(before).items()}
    # and the states themselves went on from there
    assert {key: slot[0].values for key, slot in _stored(_save(processor))} == _reference(before, after)


def test_given_copy_fn_and_a_store_thread_freezing_meanwhile_then_the_snapshot_is_the_barrier_state() -> None:
    # given 5,000 keys' states lent to a snapshot with a copy_fn, and 20,000 more items over those keys
    rng = random.Random(9)
    keys = [f"k{i}" for i in range(5_000)]
    before = [(key, rng.randint(1, 9)) for key in keys]
    after = [(rng.choice(keys), rng.randint(1, 9)) for _ in range(20_000)]
    processor = stateful.StatefulP(
        stateful.MAP, _key, list, lambda s, k, i: s.append(i[1]), False, copy_fn=list.copy
    )
    processor.init(Outbox(1, capacity=100_000), make_context())
    processor.process(0, Inbox(list(before)))
    saved = _save(processor)
    # when a store thread freezes the snapshot while the processor goes on, in chunks, on this thread
    stored: list[tuple[Any, Any]] = []
    store = threading.Thread(target=lambda: stored.extend(_stored(saved)))
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # the threads take turns often, so both reach some of the states
    try:
        store.start()
        for start in range(0, len(after), 100):
            processor.init(Outbox(1, capacity=100_000), make_context())
            processor.process(0, Inbox(after[start : start + 100]))
        store.join(timeout=60)
    finally:
        sys.setswitchinterval(switch_interval)
    # then the snapshot holds every key's state at the barrier, whichever thread reached it first
    assert not store.is_alive()
    assert dict(stored) == {key: [[value], 0] for key, value in before}
    assert {key: slot[0] for key, slot in _stored(_save(processor))} == _reference(before, after)


def test_given_a_change_while_the_store_thread_copies_a_state_then_the_barrier_state_is_saved() -> None:
    # given a state lent with a copy function, during whose first call (the store thread's copy)
    # the processor changes that state, as it may between any two steps of the store thread
    state = {"a": [1]}
    interleaved = False

    def copy(value: list[int]) -> list[int]:
        nonlocal interleaved
        if not interleaved:
            interleaved = True
            loan.before_change("a")  # the processor: claims and copies "a" unless already claimed
            state["a"].append(3)  # then changes it in place
        return list(value)

    loan = snapshot_writer.Loan(state, copy=copy)
    # when the store thread saves "a"
    saved = loan.saved("a")
    # then the snapshot holds the state at the barrier, not the changed one the store thread copied
    assert snapshot_writer.read_back(saved) == [1]


def _failing_copy(state: Any) -> Any:
    raise ValueError("cannot copy this")


def test_given_a_failing_copy_fn_when_a_lent_state_changes_then_the_error_names_the_stage() -> None:
    processor = stateful.StatefulP(
        stateful.MAP, _key, list, lambda s, k, i: None, False, copy_fn=_failing_copy
    )
    processor.init(Outbox(1, capacity=1_000), make_context("running-totals"))
    processor.process(0, Inbox([("a", 1)]))
    _save(processor, "running-totals")
    with pytest.raises(
        snapshot_writer.CopyError, match=r"stage 'running-totals'.*ValueError: cannot copy this"
    ):
        processor.process(0, Inbox([("a", 2)]))


def test_given_a_keyed_aggregation_with_copied_accumulators_then_its_snapshot_is_the_barrier_state() -> None:
    # given a keyed aggregation to lists (copy_fn: a new list) saved to a snapshot not yet stored
    before = [("a", 1), ("b", 2), ("a", 3)]
    after = [("a", 4), ("b", 5)]
    processor = aggregation.aggregate_by_key_p(_key, operations.mapping(_value, operations.to_list()))()
    processor.init(Outbox(1, capacity=1_000), make_context())
    processor.process(0, Inbox(list(before)))
    saved = _save(processor)
    # then the entries are copies taken at the barrier, left for the member to pickle
    assert all(type(value) is snapshot_writer.Copied for _, value in saved)
    # and when items after the barrier change the accumulators in place, the snapshot keeps the barrier state
    processor.process(0, Inbox(list(after)))
    assert dict(_stored(saved)) == _reference(before)


def _value(item: tuple[str, int]) -> int:
    return item[1]


def test_given_immutable_accumulators_then_the_snapshot_keeps_them_as_they_are() -> None:
    processor = aggregation.aggregate_by_key_p(_key, operations.summing(_value))()
    processor.init(Outbox(1, capacity=1_000), make_context())
    processor.process(0, Inbox([("a", 1), ("b", 2), ("a", 3)]))
    saved = _save(processor)
    assert [(key, value.value) for key, value in saved] == [("a", 4), ("b", 2)]
    assert dict(_stored(saved)) == {"a": 4, "b": 2}


def test_given_an_aggregation_whose_copy_fn_fails_then_the_snapshot_error_names_the_stage() -> None:
    op = operations.to_list().and_copy(_failing_copy)
    processor = aggregation.aggregate_by_key_p(_key, op)()
    processor.init(Outbox(1, capacity=1_000), make_context("lists"))
    processor.process(0, Inbox([("a", 1)]))
    with pytest.raises(snapshot_writer.CopyError, match="stage 'lists'"):
        _save(processor, "lists")


def test_given_an_operation_without_copy_fn_then_its_accumulators_are_pickled_at_the_barrier() -> None:
    op = AggregateOperation.with_create(list).and_accumulate(lambda acc, item: [*acc, item])
    assert op.copy_fn is None
    processor = aggregation.aggregate_by_key_p(_key, op)()
    processor.init(Outbox(1, capacity=1_000), make_context())
    processor.process(0, Inbox([("a", 1)]))
    assert [type(value) for _, value in _save(processor)] == [list]  # the engine pickles it at once


_COPIED_OPERATIONS = {
    "counting": operations.counting(),
    "summing": operations.summing(),
    "averaging": operations.averaging(),
    "linear_trend": operations.linear_trend(lambda p: p, lambda p: p * p),
    "min_by": operations.min_by(lambda x: -x),
    "max_by": operations.max_by(lambda x: -x),
    "pick_any": operations.pick_any(),
    "top_n": operations.top_n(3),
    "bottom_n": operations.bottom_n(3),
    "to_list": operations.to_list(),
    "to_set": operations.to_set(),
    "to_list and_then": operations.to_list().and_then(sorted),
    "all_of": operations.all_of(operations.counting(), operations.to_list(), operations.top_n(2)),
    "mapping": operations.mapping(lambda x: x * 2, operations.to_set()),
}


@pytest.mark.parametrize("name", list(_COPIED_OPERATIONS))
def test_given_a_built_in_copy_fn_when_the_original_folds_on_then_the_copy_keeps_its_result(
    name: str,
) -> None:
    op = _COPIED_OPERATIONS[name]
    assert op.copy_fn is not None
    accumulate = op.accumulate_fn()
    acc = functools.reduce(accumulate, [5, 2, 8], op.create_fn())
    copy = op.copy_fn(acc)
    for item in [1, 9, 7]:
        acc = accumulate(acc, item)
    expected = op.export_fn(functools.reduce(accumulate, [5, 2, 8], op.create_fn()))
    result = op.export_fn(copy)
    assert result == expected or (result != result and expected != expected)  # NaN equals NaN here


def test_given_a_rolling_aggregation_then_its_state_copy_is_a_new_slot_with_the_copied_accumulator() -> None:
    _, _, copy_immutable = stages._rolling(operations.averaging(), keyed=True)
    _, _, copy_list = stages._rolling(operations.to_list(), keyed=True)
    _, _, no_copy = stages._rolling(AggregateOperation.with_create(list).and_accumulate(list.__add__), True)
    state = [(2, 7)]
    assert (
        copy_immutable is not None and copy_immutable(state) == state and copy_immutable(state) is not state
    )
    lists = [[1, 2]]
    assert copy_list is not None
    copied = copy_list(lists)
    lists[0].append(3)
    assert copied == [[1, 2]]
    assert no_copy is None


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1024])
def test_settled_groups_give_every_lent_key_once_in_order_between_the_other_entries(size: int) -> None:
    # given a lent state of five keys (two lent without a copy, three with) between two plain entries
    copied_loan = snapshot_writer.Loan({"c": [3], "d": [4], "e": [5]}, copy=list.copy)
    frozen_loan = snapshot_writer.Loan({"a": [1], "b": [2]})
    entries = [
        ("first", b"x"),
        (None, snapshot_writer.Lent(frozen_loan)),
        ("middle", snapshot_writer.Copied(9)),
        (None, snapshot_writer.Lent(copied_loan)),
        ("last", b"y"),
    ]
    # when settled in groups of ``size``
    groups = list(snapshot_writer.settled_groups(entries, size))
    # then no group is larger, and together they are every entry, a lent one per key, in order
    assert all(0 < len(group) <= size for group in groups)
    settled = [entry for group in groups for entry in group]
    assert [key for key, _ in settled] == ["first", "a", "b", "middle", "c", "d", "e", "last"]
    values = {key: value for key, value in settled}
    assert [snapshot_writer.read_back(values[k]) for k in "abcde"] == [[1], [2], [3], [4], [5]]
    assert values["first"] == b"x" and values["last"] == b"y"
    assert not frozen_loan.unclaimed and not copied_loan.unclaimed  # every lent state claimed


def test_a_loan_gives_the_store_thread_what_the_processor_copied_even_none_and_its_copy_error() -> None:
    # given a loan of three states whose copy is None for "none" and fails for "bad"
    def copy(state: Any) -> Any:
        if state == "bad":
            raise ValueError("cannot copy this")
        return None if state == "none" else list(state)

    loan = snapshot_writer.Loan({"none": "none", "bad": "bad", "list": [1]}, copy=copy)
    # when the processor claims each one before changing it
    loan.before_change("none")
    loan.before_change("list")
    with pytest.raises(ValueError, match="cannot copy this"):
        loan.before_change("bad")
    # then the store thread gets the copies as Copied values, None included, and the copy's error
    none, listed = loan.saved("none"), loan.saved("list")
    assert type(none) is snapshot_writer.Copied and none.value is None
    assert type(listed) is snapshot_writer.Copied and listed.value == [1]
    with pytest.raises(ValueError, match="cannot copy this"):
        loan.saved("bad")
