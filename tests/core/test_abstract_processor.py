"""AbstractProcessor: per-item hooks, try_emit, emit_from_traverser across a full outbox, FlatMapper."""

from __future__ import annotations

from typing import Any

import pytest

from jetlet.core import AbstractProcessor, Inbox, Outbox, Traverser, traverse_items, traverse_list
from jetlet.testing import make_context, verify_processor


def _init(processor: AbstractProcessor, buckets: int = 1, capacity: int = 1024) -> Outbox:
    outbox = Outbox(buckets, capacity)
    processor.init(outbox, make_context())
    return outbox


def _take(outbox: Outbox, ordinal: int = 0) -> list[Any]:
    items = outbox.buckets[ordinal]
    outbox.buckets[ordinal] = []
    return items


class _ByItem(AbstractProcessor):
    def __init__(self) -> None:
        self.seen: list[tuple[int, Any]] = []

    def try_process_item(self, ordinal: int, item: Any) -> bool:
        self.seen.append((ordinal, item))
        return self.try_emit((ordinal, item))


class _ByOrdinal(_ByItem):
    def try_process1(self, item: Any) -> bool:
        self.seen.append((-1, item))
        return True


def test_given_try_process_item_when_process_then_every_item_reaches_it_with_its_ordinal() -> None:
    p = _ByItem()
    outbox = _init(p)
    for ordinal in (0, 3, 7):
        inbox = Inbox(["a", "b"])
        p.process(ordinal, inbox)
        assert not inbox
    assert p.seen == [(0, "a"), (0, "b"), (3, "a"), (3, "b"), (7, "a"), (7, "b")]
    assert _take(outbox) == p.seen


def test_given_try_process1_override_when_process_then_ordinal_1_uses_it_and_others_the_generic_hook() -> (
    None
):
    p = _ByOrdinal()
    _init(p)
    p.process(1, Inbox(["x"]))
    p.process(0, Inbox(["y"]))
    assert p.seen == [(-1, "x"), (0, "y")]


def test_given_hook_returning_false_when_process_then_item_stays_in_inbox_and_is_retried() -> None:
    # given an outbox of capacity 1
    p = _ByItem()
    outbox = _init(p, capacity=1)
    inbox = Inbox([1, 2, 3])
    # when
    p.process(0, inbox)
    # then the first item was emitted, the second refused and kept at the head
    assert list(inbox) == [2, 3]
    assert _take(outbox) == [(0, 1)]
    p.process(0, inbox)
    assert list(inbox) == [3]


def test_given_no_hook_when_receiving_an_item_then_type_error_names_the_ordinal() -> None:
    p = AbstractProcessor()
    _init(p)
    with pytest.raises(TypeError, match="input 2 but overrides neither try_process2"):
        p.process(2, Inbox(["x"]))


def test_given_on_init_when_init_then_hook_sees_context_and_logger_is_the_context_logger() -> None:
    class _Init(AbstractProcessor):
        vertex = ""

        def on_init(self, context: Any) -> None:
            self.vertex = context.vertex_name

    p = _Init()
    _init(p)
    assert p.vertex == "test"
    assert p.logger is p.context.logger


def test_given_try_emit_to_ordinal_when_bucket_full_then_false_and_other_ordinal_unaffected() -> None:
    p = AbstractProcessor()
    outbox = _init(p, buckets=2, capacity=1)
    assert p.try_emit("a", 0)
    assert not p.try_emit("b", 0)
    assert p.try_emit("c", 1)
    assert not p.try_emit("d")  # all ordinals: both full
    assert outbox.buckets == [["a"], ["c"]]


def test_given_full_outbox_when_emit_from_traverser_then_resumes_with_the_refused_item() -> None:
    # given a traverser of 5 items and an outbox that takes 2 per call
    p = AbstractProcessor()
    outbox = _init(p, capacity=2)
    traverser = traverse_items(*range(5))
    emitted: list[int] = []
    # when the same traverser is passed again after each False
    results = []
    for _ in range(10):
        done = p.emit_from_traverser(traverser)
        results.append(done)
        emitted.extend(_take(outbox))
        if done:
            break
    # then nothing was lost or duplicated
    assert emitted == [0, 1, 2, 3, 4]
    assert results == [False, False, True]


def test_given_pending_item_when_a_different_traverser_is_passed_then_pending_item_is_not_mixed_in() -> None:
    p = AbstractProcessor()
    outbox = _init(p, capacity=1)
    assert not p.emit_from_traverser(traverse_items("a1", "a2"))
    _take(outbox)
    assert not p.emit_from_traverser(traverse_items("b1", "b2"))
    assert _take(outbox) == ["b1"]


def test_given_traverser_with_temporary_gap_when_emitting_then_true_at_gap_and_later_items_follow() -> None:
    p = AbstractProcessor()
    outbox = _init(p)
    values = iter([1, None, 2])
    traverser: Traverser[int] = Traverser.of(lambda: next(values, None))
    assert p.emit_from_traverser(traverser)
    assert p.emit_from_traverser(traverser)
    assert _take(outbox) == [1, 2]


def test_given_snapshot_traverser_when_snapshot_bucket_fills_then_resumes_without_loss() -> None:
    p = AbstractProcessor()
    outbox = _init(p, capacity=2)
    entries = traverse_list([(k, k * k) for k in range(5)])
    saved: list[tuple[Any, Any]] = []
    while not p.emit_from_traverser_to_snapshot(entries):
        saved.extend(outbox.snapshot_bucket)
        outbox.snapshot_bucket.clear()
    saved.extend(outbox.snapshot_bucket)
    assert saved == [(k, k * k) for k in range(5)]


class _Repeater(AbstractProcessor):
    """Emits each number n as n copies of itself through a FlatMapper."""

    def on_init(self, context: Any) -> None:
        self._mapper = self.flat_mapper(lambda n: traverse_list([n] * n))

    def try_process0(self, item: Any) -> bool:
        return self._mapper.try_process(item)


def test_given_flat_mapper_when_outbox_is_tiny_then_it_finishes_an_item_before_taking_the_next() -> None:
    p = _Repeater()
    outbox = _init(p, capacity=2)
    inbox = Inbox([3, 1, 2])
    out: list[int] = []
    for _ in range(10):
        p.process(0, inbox)
        out.extend(_take(outbox))
        if not inbox:
            break
    assert out == [3, 3, 3, 1, 2, 2]


def test_given_flat_mapper_processor_when_verified_in_every_mode_then_output_matches_reference() -> None:
    data = [3, 0, 1, 4, 2]
    verify_processor(_Repeater).input(data).expect_output([n for n in data for _ in range(n)])


def test_given_flat_mapper_to_second_ordinal_when_processing_then_only_that_bucket_fills() -> None:
    class _ToOne(AbstractProcessor):
        def try_process0(self, item: Any) -> bool:
            return self.flat_mapper(lambda x: traverse_items(x, x), ordinal=1).try_process(item)

    p = _ToOne()
    outbox = _init(p, buckets=2)
    p.process(0, Inbox(["z"]))
    assert outbox.buckets == [[], ["z", "z"]]
