"""Given a generator source that yields slowly, when a job reads it, then its items show at once.

Issue 16 item 3: a source read up to 1,024 items before it emitted, so a
generator yielding 10 items a second showed nothing for 100 s. A generator
source now emits what it yielded within a millisecond; a generator with
nothing to give yields ``None``; one that waits is declared
``cooperative=False``.
"""

from __future__ import annotations

import itertools
import queue
import time
from collections.abc import Iterator
from typing import Any

import pytest

import jetlet
from jetlet import Pipeline, Sinks, Sources
from jetlet.core.processors import sources as source_processors
from jetlet.testing import wait_until

DEADLINE_S = 20.0  # a loaded machine: long, but far below the 1,024 items the old source waited for


def _cancel(job: Any) -> None:
    job.cancel()
    with pytest.raises(jetlet.JetletError):
        job.join(timeout=30)


def test_a_blocking_generator_declared_non_cooperative_emits_each_item_as_it_comes(
    jet_embedded: jetlet.EmbeddedInstance,
) -> None:
    # given a generator that waits on a queue (giving None when it waited in vain)
    feed: queue.Queue[str] = queue.Queue()

    def poll(_context: Any) -> Iterator[str | None]:
        while True:
            try:
                yield feed.get(timeout=0.05)
            except queue.Empty:
                yield None

    p = Pipeline()
    p.read_from(
        Sources.stream_from_generator(poll, "queue", cooperative=False)
    ).without_timestamps().write_to(Sinks.list("out"))
    job = jet_embedded.new_job(p)
    try:
        # when one item arrives, then it is in the sink (not after 1,024 of them)
        feed.put("first")
        wait_until(
            lambda: list(jet_embedded.get_list("out")) == ["first"], "the first item emitted", DEADLINE_S
        )
        # when two more arrive, then both follow
        feed.put("second")
        feed.put("third")
        wait_until(
            lambda: list(jet_embedded.get_list("out")) == ["first", "second", "third"],
            "the next items emitted",
            DEADLINE_S,
        )
    finally:
        _cancel(job)


def test_a_burst_then_nothing_is_emitted_without_waiting_on_polls_past_the_none(
    jet_embedded: jetlet.EmbeddedInstance,
) -> None:
    # given a blocking poller whose queue holds a burst of 30 items, then nothing (each empty poll: 1 s)
    feed: queue.Queue[int] = queue.Queue()
    for number in range(30):
        feed.put(number)

    def poll(_context: Any) -> Iterator[int | None]:
        while True:
            try:
                yield feed.get(timeout=1.0)
            except queue.Empty:
                yield None

    p = Pipeline()
    p.read_from(
        Sources.stream_from_generator(poll, "burst", cooperative=False)
    ).without_timestamps().write_to(Sinks.list("out"))
    job = jet_embedded.new_job(p)
    try:
        # then the whole burst is out within a few seconds: reading stopped at the None, not 60 polls later
        wait_until(lambda: len(jet_embedded.get_list("out")) == 30, "the burst emitted", 8.0)
        assert sorted(jet_embedded.get_list("out")) == list(range(30))
    finally:
        _cancel(job)


def test_a_cooperative_generator_polling_without_waiting_yields_none_for_nothing_now(
    jet_embedded: jetlet.EmbeddedInstance,
) -> None:
    # given a cooperative generator that polls a queue and yields None when it is empty
    feed: queue.Queue[int] = queue.Queue()

    def poll(_context: Any) -> Iterator[int | None]:
        while True:
            try:
                yield feed.get_nowait()
            except queue.Empty:
                yield None

    p = Pipeline()
    p.read_from(Sources.stream_from_generator(poll, "queue")).without_timestamps().write_to(Sinks.list("out"))
    job = jet_embedded.new_job(p)
    try:
        for expected in range(1, 4):
            feed.put(expected)
            wait_until(
                lambda n=expected: list(jet_embedded.get_list("out")) == list(range(1, n + 1)),  # type: ignore[misc]
                f"item {expected} emitted",
                DEADLINE_S,
            )
    finally:
        _cancel(job)


def test_a_slow_generator_without_nones_shows_its_first_items_long_before_a_batch(
    jet_embedded: jetlet.EmbeddedInstance,
) -> None:
    # given a generator yielding an item every 20 ms (a batch of 1,024 would take 20 s)
    def slow(_context: Any) -> Iterator[int]:
        for number in itertools.count():
            time.sleep(0.02)
            yield number

    p = Pipeline()
    p.read_from(Sources.stream_from_generator(slow, "slow", cooperative=False)).without_timestamps().write_to(
        Sinks.list("out")
    )
    started = time.monotonic()
    job = jet_embedded.new_job(p)
    try:
        # then its first items are in the sink within a fraction of a batch's time
        wait_until(lambda: len(jet_embedded.get_list("out")) >= 5, "five items emitted", DEADLINE_S)
        assert time.monotonic() - started < 1024 * 0.02
    finally:
        _cancel(job)


def test_a_fast_generator_still_fills_whole_batches() -> None:
    # given a generator that yields at once, when read, then a read returns the full batch
    read = source_processors.read_promptly
    items = source_processors.ending(range(5000))
    assert read(items, 1024) == (list(range(1024)), False)
    # and a None is "nothing now": the read ends there, and the next one goes on after it
    items = source_processors.ending([1, 2, None, 3, 4])
    assert read(items, 1024) == ([1, 2], False)
    assert read(items, 1024) == ([3, 4], True)
    # and the end of the generator is reported, also after a read that filled the batch
    items = source_processors.ending([7, 8])
    assert read(items, 2) == ([7, 8], False)
    assert read(items, 2) == ([], True)
