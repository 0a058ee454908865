"""The SPSC batch queue: capacity in items, batch offer and poll, control items, high-water mark."""

from __future__ import annotations

import pytest

from jetlet._execution.queues import DONE_ITEM, SpscQueue


def test_given_an_empty_queue_when_a_batch_fits_then_it_is_taken_whole_and_polled_back() -> None:
    queue = SpscQueue(capacity=8)
    batch = [1, 2, 3]
    assert queue.offer_batch(batch) == 3
    assert queue.size() == 3
    assert queue.room() == 5
    assert queue.poll() == [1, 2, 3]
    assert queue.size() == 0
    assert queue.poll() is None


def test_given_a_batch_larger_than_the_room_when_offered_then_only_the_prefix_that_fits_is_taken() -> None:
    queue = SpscQueue(capacity=4)
    assert queue.offer_batch([1, 2, 3]) == 3
    assert queue.offer_batch([4, 5, 6]) == 1
    assert queue.room() == 0
    assert queue.offer_batch([7]) == 0
    assert queue.poll() == [1, 2, 3]
    assert queue.poll() == [4]
    assert queue.poll() is None


def test_given_a_full_queue_when_the_consumer_polls_then_the_room_comes_back() -> None:
    queue = SpscQueue(capacity=2)
    queue.offer_batch([1, 2])
    assert queue.offer_batch([3]) == 0
    queue.poll()
    assert queue.offer_batch([3, 4, 5]) == 2
    assert queue.size() == 2


def test_given_control_items_when_offered_then_they_keep_their_place_and_do_not_count_against_capacity() -> (
    None
):
    queue = SpscQueue(capacity=1)
    queue.offer_batch(["a"])
    queue.offer_control(DONE_ITEM)
    assert queue.size() == 1
    assert queue.poll() == ["a"]
    assert queue.poll() is DONE_ITEM
    assert queue.size() == 0


def test_given_offers_and_polls_when_interleaved_then_the_high_water_mark_is_the_largest_size_seen() -> None:
    queue = SpscQueue(capacity=10)
    queue.offer_batch([1, 2, 3])
    queue.offer_batch([4, 5])
    queue.poll()
    queue.poll()
    queue.offer_batch([6])
    assert queue.high_water_mark == 5
    queue.offer_batch(list(range(20)))
    assert queue.high_water_mark == queue.capacity == 10


def test_given_a_capacity_below_one_when_a_queue_is_made_then_it_is_refused() -> None:
    with pytest.raises(ValueError, match="capacity"):
        SpscQueue(capacity=0)
