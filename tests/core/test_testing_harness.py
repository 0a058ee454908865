"""jetlet.testing: the harness passes correct processors and catches broken ones with a helpful message."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from jetlet.core import AbstractProcessor, Inbox, Processor, Watermark, processors
from jetlet.testing import TestOutbox, make_context, verify_processor


class _Doubler(AbstractProcessor):
    """Correct: emits 2x each item, retrying when the outbox is full."""

    def try_process0(self, item: Any) -> bool:
        return self.try_emit(item * 2)


class _Dropper(Processor):
    """Broken: takes every item and ignores offer()'s False, so items are lost when the outbox is full."""

    def process(self, ordinal: int, inbox: Inbox) -> None:
        for item in inbox.take_all():
            self.outbox.offer(item)


class _ForgetfulCounter(Processor):
    """Broken: counts items and emits the count at the end, but saves nothing to snapshots."""

    def __init__(self) -> None:
        self.count = 0

    def process(self, ordinal: int, inbox: Inbox) -> None:
        self.count += len(inbox.take_all())

    def complete(self) -> bool:
        return self.outbox.offer(self.count)


class _Counter(_ForgetfulCounter):
    """Correct: as above, with snapshot support."""

    def save_to_snapshot(self) -> bool:
        return self.outbox.offer_to_snapshot("count", self.count)

    def restore_from_snapshot(self, inbox: Inbox) -> None:
        self.count = sum(value for _, value in inbox.take_all())


class _Stuck(Processor):
    """Broken: never takes an item and never emits."""

    def process(self, ordinal: int, inbox: Inbox) -> None:
        return None


class _StuckComplete(Processor):
    """Broken: complete() says 'not done' without emitting anything."""

    def complete(self) -> bool:
        return False


class _Blocking(Processor):
    """Broken when cooperative: blocks in process() (as a slow I/O call would)."""

    def __init__(self, cooperative: bool = True) -> None:
        self._cooperative = cooperative

    def is_cooperative(self) -> bool:
        return self._cooperative

    def process(self, ordinal: int, inbox: Inbox) -> None:
        threading.Event().wait(0.05)  # stands for a blocking call, not for synchronisation
        for _ in range(self.outbox.offer_batch(list(inbox))):
            inbox.remove()


class _SnapshotOutsideSave(Processor):
    """Broken: writes state to the snapshot during process()."""

    def process(self, ordinal: int, inbox: Inbox) -> None:
        self.outbox.offer_to_snapshot("k", inbox.take_all())


def test_given_correct_processor_when_verified_then_passes_every_mode() -> None:
    verify_processor(_Doubler).input([1, 2, 3, 4]).expect_output([2, 4, 6, 8])


def test_given_correct_stateful_processor_when_verified_then_passes_with_snapshots() -> None:
    verify_processor(_Counter).input(list("abcdefg")).expect_output([7])


def test_given_wrong_expectation_when_verified_then_message_shows_mode_expected_and_actual() -> None:
    with pytest.raises(AssertionError) as caught:
        verify_processor(_Doubler).input([1, 2]).expect_output([2, 5])
    message = str(caught.value)
    assert "mode 'roomy outbox'" in message
    assert "output ordinal 0 differs" in message
    assert "expected: [2, 5]" in message and "actual:   [2, 4]" in message


def test_given_processor_ignoring_full_outbox_when_verified_then_dropped_items_are_reported() -> None:
    # the roomy mode (run first) passes: the loss shows only with the outbox of 1
    with pytest.raises(
        AssertionError, match=r"mode 'outbox of 1, blocked every other call'.*differs"
    ) as caught:
        verify_processor(_Dropper).input([1, 2, 3, 4, 5, 6]).expect_output([1, 2, 3, 4, 5, 6])
    assert "expected: [1, 2, 3, 4, 5, 6]" in str(caught.value)


def test_given_processor_losing_state_when_verified_then_snapshot_mode_fails() -> None:
    # without snapshots it is fine; with snapshot+restore after each item the count restarts
    verify_processor(_ForgetfulCounter).input([1, 2, 3]).disable_snapshots().expect_output([3])
    with pytest.raises(
        AssertionError, match=r"snapshot\+restore after each item'.*\n.*expected: \[3\]\n.*actual:   \[0\]"
    ):
        verify_processor(_ForgetfulCounter).input([1, 2, 3]).expect_output([3])


def test_given_processor_making_no_progress_when_verified_then_no_progress_is_reported() -> None:
    with pytest.raises(AssertionError, match=r"process\(0\) neither took an item from the inbox nor emitted"):
        verify_processor(_Stuck).input([1]).expect_output([])


def test_given_complete_returning_false_without_output_when_verified_then_no_progress_is_reported() -> None:
    with pytest.raises(AssertionError, match=r"complete\(\) returned False without emitting anything"):
        verify_processor(_StuckComplete).expect_output([])


def test_given_cooperative_processor_that_blocks_when_verified_then_time_limit_is_reported() -> None:
    with pytest.raises(
        AssertionError, match=r"process\(0\) of a cooperative processor took \d+ ms \(limit 10 ms\)"
    ):
        verify_processor(_Blocking).cooperative_time_limit(0.01).input([1]).expect_output([1])


def test_given_non_cooperative_processor_that_blocks_when_verified_then_passes() -> None:
    verify_processor(lambda: _Blocking(cooperative=False)).cooperative_time_limit(
        0.01
    ).disable_snapshots().input([1]).expect_output([1])


def test_given_snapshot_write_outside_save_when_verified_then_reported() -> None:
    with pytest.raises(AssertionError, match=r"offered to the snapshot outside save_to_snapshot"):
        verify_processor(_SnapshotOutsideSave).input([1]).expect_output([])


def test_given_unordered_when_output_is_permuted_then_passes_but_multiset_difference_fails() -> None:
    verify_processor(processors.map_p(lambda x: x)).input([1, 2, 2]).unordered().expect_output([2, 1, 2])
    with pytest.raises(AssertionError):
        verify_processor(processors.map_p(lambda x: x)).input([1, 2, 2]).unordered().expect_output([2, 1, 1])
    with pytest.raises(AssertionError):
        verify_processor(processors.map_p(lambda x: x)).input([1, 2]).unordered().expect_output([2, 1, 1])


def test_given_output_checker_when_verified_then_it_decides() -> None:
    calls: list[tuple[list[Any], list[Any]]] = []

    def checker(expected: list[Any], actual: list[Any]) -> bool:
        calls.append((expected, actual))
        return sorted(actual) == expected

    verify_processor(processors.map_p(lambda x: -x)).input([1, 2]).output_checker(checker).expect_output(
        [-2, -1]
    )
    assert len(calls) == 3  # one per mode
    with pytest.raises(AssertionError):
        verify_processor(processors.map_p(str)).input([1]).output_checker(lambda e, a: False).expect_output(
            ["1"]
        )


def test_given_watermarks_in_input_when_verified_then_they_are_forwarded_in_place() -> None:
    wm = Watermark(10)
    verify_processor(processors.map_p(lambda x: x + 1)).input([1, wm, 2]).expect_output([2, wm, 3])


def test_given_several_inputs_with_priorities_when_verified_then_lower_priority_is_fed_first() -> None:
    class _Tag(AbstractProcessor):
        def try_process_item(self, ordinal: int, item: Any) -> bool:
            return self.try_emit((ordinal, item))

    verify_processor(_Tag).inputs([["a"], ["b"], ["c"]], priorities=[2, 0, 1]).expect_output(
        [(1, "b"), (2, "c"), (0, "a")]
    )


def test_given_two_output_ordinals_when_expect_outputs_then_each_is_compared() -> None:
    class _Split(AbstractProcessor):
        def try_process0(self, item: Any) -> bool:
            return self.try_emit(item, 0 if item % 2 == 0 else 1)

    verify_processor(_Split).input([1, 2, 3, 4]).expect_outputs([[2, 4], [1, 3]])
    with pytest.raises(AssertionError, match="output ordinal 1 differs"):
        verify_processor(_Split).input([1, 2]).expect_outputs([[2], [3]])


def test_given_disable_complete_call_when_verified_then_complete_is_not_called() -> None:
    verify_processor(_Counter).input([1, 2]).disable_complete_call().expect_output([])


def test_given_input_batch_size_when_verified_then_inbox_holds_several_items() -> None:
    sizes: list[int] = []

    class _Sizes(Processor):
        def process(self, ordinal: int, inbox: Inbox) -> None:
            sizes.append(len(inbox))
            if self.outbox.offer(inbox.peek()):
                inbox.remove()

    verify_processor(_Sizes).input([1, 2, 3]).input_batch_size(3).disable_snapshots().expect_output([1, 2, 3])
    assert max(sizes) == 3


def test_given_no_expectation_when_verify_then_value_error() -> None:
    with pytest.raises(ValueError, match="nothing to verify"):
        verify_processor(_Doubler).input([1]).verify()


def test_given_disabled_progress_assertion_when_processor_stalls_once_then_passes() -> None:
    class _SlowStart(Processor):
        stalled = False

        def process(self, ordinal: int, inbox: Inbox) -> None:
            if not self.stalled:
                self.stalled = True
                return
            for _ in range(self.outbox.offer_batch(list(inbox))):
                inbox.remove()

    with pytest.raises(AssertionError, match="no progress"):
        verify_processor(_SlowStart).input([1]).expect_output([1])
    verify_processor(_SlowStart).input([1]).disable_progress_assertion().expect_output([1])


def test_given_test_outbox_when_blocked_then_every_offer_refuses() -> None:
    outbox = TestOutbox(1, 4)
    outbox.blocked = True
    assert not outbox.offer(1) and outbox.offer_batch([1, 2]) == 0
    assert outbox.room() == 0 and not outbox.has_room() and not outbox.offer_to_snapshot("k", 1)
    outbox.blocked = False
    assert outbox.offer(1) and outbox.offer_to_snapshot("k", 1)
    outputs: list[list[Any]] = [[]]
    snapshot: list[tuple[Any, Any]] = []
    assert outbox.drain(outputs, snapshot) == 2
    assert outputs == [[1]] and snapshot == [("k", 1)] and outbox.is_empty()


def test_given_make_context_when_called_then_indices_are_consistent() -> None:
    ctx = make_context("v", global_processor_index=5, local_parallelism=2, member_index=2, member_count=3)
    assert ctx.vertex_name == "v" and ctx.total_parallelism == 6
    assert ctx.local_processor_index == 1 and ctx.member_index == 2
    assert not ctx.snapshots_enabled
