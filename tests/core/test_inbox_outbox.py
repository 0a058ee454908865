"""Inbox FIFO operations and the bounded Outbox: offer, offer_batch, room, watermarks, snapshot bucket."""

from __future__ import annotations

import random

import pytest

from jetlet.core import ALL_ORDINALS, Inbox, Outbox, Watermark


# -- Inbox ------------------------------------------------------------------
def test_given_items_when_peek_poll_remove_then_fifo_order() -> None:
    inbox = Inbox([1, 2, 3])
    assert len(inbox) == 3 and bool(inbox) and not inbox.is_empty()
    assert inbox.peek() == 1 and len(inbox) == 3
    assert inbox.poll() == 1
    assert inbox.remove() == 2
    assert list(inbox) == [3]


def test_given_empty_inbox_when_peek_poll_remove_then_none_none_index_error() -> None:
    inbox = Inbox()
    assert not inbox and inbox.is_empty()
    assert inbox.peek() is None and inbox.poll() is None
    with pytest.raises(IndexError):
        inbox.remove()


def test_given_items_when_drain_to_with_limit_then_prefix_moves_and_rest_stays() -> None:
    inbox = Inbox(range(10))
    target = ["x"]
    assert inbox.drain_to(target, 4) == 4
    assert target == ["x", 0, 1, 2, 3]
    assert inbox.drain_to(target, 100) == 6
    assert target[-6:] == [4, 5, 6, 7, 8, 9] and not inbox
    assert inbox.drain_to(target) == 0


def test_given_items_when_discarding_a_prefix_then_the_rest_stays_in_order() -> None:
    inbox = Inbox(range(10))
    inbox.discard(4)
    assert list(inbox) == [4, 5, 6, 7, 8, 9]
    inbox.discard(0)
    assert len(inbox) == 6
    inbox.discard(100)
    assert inbox.is_empty()


def test_given_items_when_drain_and_take_all_then_everything_is_removed_in_order() -> None:
    seen: list[int] = []
    inbox = Inbox([5, 6])
    assert inbox.drain(seen.append) == 2 and seen == [5, 6] and not inbox
    inbox.add_batch([7, 8])
    assert inbox.take_all() == [7, 8] and not inbox
    inbox.add_batch([1])
    inbox.clear()
    assert not inbox
    assert repr(Inbox([1])) == "Inbox([1])"


# -- Outbox -----------------------------------------------------------------
def test_given_capacity_when_offering_past_it_then_offer_returns_false_and_keeps_the_first_items() -> None:
    outbox = Outbox(1, capacity=3)
    assert [outbox.offer(i) for i in range(5)] == [True, True, True, False, False]
    assert outbox.buckets == [[0, 1, 2]]
    assert outbox.room() == 0 and not outbox.has_room()


def test_given_several_ordinals_when_offering_to_one_then_only_that_bucket_takes_it() -> None:
    outbox = Outbox(3, capacity=2)
    assert outbox.offer("a", 1)
    assert outbox.offer("b", [0, 2])
    assert outbox.buckets == [["b"], ["a"], ["b"]]


def test_given_one_full_bucket_when_offering_to_all_then_none_takes_it() -> None:
    # all-or-nothing: a retry never duplicates
    outbox = Outbox(2, capacity=1)
    assert outbox.offer("first", 0)
    assert not outbox.offer("x", ALL_ORDINALS)
    assert outbox.buckets == [["first"], []]
    assert outbox.has_room(1) and not outbox.has_room(0) and not outbox.has_room()
    assert outbox.room(1) == 1 and outbox.room() == 0


def test_given_none_when_offered_then_type_error() -> None:
    for outbox in (Outbox(1), Outbox(2)):
        with pytest.raises(TypeError, match="None cannot be emitted"):
            outbox.offer(None)


def test_given_random_batches_when_offer_batch_then_count_equals_room_taken_and_order_kept() -> None:
    rng = random.Random(3)
    outbox = Outbox(2, capacity=50)
    reference: list[list[int]] = [[], []]
    for step in range(40):
        items = [step * 100 + i for i in range(rng.randint(0, 30))]
        ordinal = rng.choice([0, 1, ALL_ORDINALS])
        targets = [0, 1] if ordinal == ALL_ORDINALS else [ordinal]
        room = min(50 - len(reference[t]) for t in targets)
        taken = outbox.offer_batch(items, ordinal)
        assert taken == min(room, len(items))
        for t in targets:
            reference[t].extend(items[:taken])
        if rng.random() < 0.3:
            outbox.buckets[0], reference[0] = [], []
    assert outbox.buckets == reference


def test_given_empty_target_list_when_offer_batch_then_everything_counts_as_taken() -> None:
    outbox = Outbox(1, capacity=1)
    assert outbox.offer_batch([1, 2, 3], []) == 3
    assert outbox.buckets == [[]]
    assert outbox.room([]) == 1


def test_given_watermark_when_bucket_has_data_then_refused_and_when_empty_then_bucket_closes() -> None:
    outbox = Outbox(1, capacity=4)
    outbox.offer("data")
    assert not outbox.offer(Watermark(5))
    outbox.buckets[0] = []
    assert outbox.offer(Watermark(5))
    # no data after a pending watermark until the engine takes it
    assert not outbox.offer("later") and outbox.room() == 0
    assert outbox.take_control(0) == Watermark(5)
    assert outbox.offer("later")
    assert outbox.take_control(0) is None


def test_given_watermark_to_all_when_one_bucket_busy_then_none_gets_it() -> None:
    outbox = Outbox(2, capacity=4)
    outbox.offer("x", 1)
    assert not outbox.offer(Watermark(1))
    assert outbox.controls == [None, None]


def test_given_snapshot_bucket_when_full_then_offer_to_snapshot_refuses() -> None:
    outbox = Outbox(0, capacity=2)
    assert outbox.bucket_count() == 0 and outbox.capacity() == 2
    assert outbox.offer_to_snapshot("k1", 1)
    assert outbox.offer_to_snapshot("k2", [2])
    assert not outbox.offer_to_snapshot("k3", 3)
    assert outbox.snapshot_bucket == [("k1", 1), ("k2", [2])]
    assert not outbox.is_empty()
    outbox.snapshot_bucket.clear()
    assert outbox.is_empty()


@pytest.mark.parametrize(("buckets", "capacity"), [(-1, 4), (1, 0)])
def test_given_bad_shape_when_creating_outbox_then_value_error(buckets: int, capacity: int) -> None:
    with pytest.raises(ValueError, match="bad outbox shape"):
        Outbox(buckets, capacity)
