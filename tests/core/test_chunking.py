"""Chunks sized by the step's outputs per input: a selective step behind a nearly full outbox."""

from __future__ import annotations

from typing import Any

from jetlet.core import Inbox, Outbox
from jetlet.core.processors import chain, chunking
from jetlet.testing import make_context


def test_given_one_to_one_chunks_when_sizing_then_the_room_is_taken() -> None:
    sizer = chunking.ChunkSizer()
    assert sizer.inputs_for(room=10, available=1000) == 10
    sizer.observed(inputs=10, outputs=10)
    assert sizer.inputs_for(room=7, available=1000) == 7
    assert sizer.inputs_for(room=7, available=5) == 5


def test_given_a_selective_chunk_when_sizing_then_room_over_the_ratio_is_taken() -> None:
    sizer = chunking.ChunkSizer()
    sizer.observed(inputs=500, outputs=10)  # one output per fifty inputs
    assert sizer.inputs_for(room=3, available=1000) == 150
    assert sizer.inputs_for(room=30, available=1000) == 1000


def test_given_a_chunk_without_outputs_when_sizing_then_everything_available_is_taken() -> None:
    sizer = chunking.ChunkSizer()
    sizer.observed(inputs=3, outputs=0)
    assert sizer.inputs_for(room=1, available=4096) == 4096


def test_given_an_expanding_chunk_when_sizing_then_fewer_than_the_room_but_at_least_one() -> None:
    sizer = chunking.ChunkSizer()
    sizer.observed(inputs=2, outputs=20)
    assert sizer.inputs_for(room=50, available=1000) == 5
    assert sizer.inputs_for(room=3, available=1000) == 1


def test_given_a_selective_filter_behind_a_nearly_full_outbox_then_few_calls_and_exact_output() -> None:
    # NEXMark Q8's shape: a step keeping one item in fifty, its outbox bucket almost full
    # because the downstream queue backs up. Sized by the room alone the step was called
    # with three items at a time, hundreds of calls per inbox.
    calls: list[int] = []

    def keep_fiftieth(batch: list[Any]) -> list[Any]:
        calls.append(len(batch))
        return [x for x in batch if x % 50 == 0]

    data = list(range(1, 5001))
    p = chain.ChainP(keep_fiftieth)
    outbox = Outbox(1, capacity=64)
    p.init(outbox, make_context())
    inbox = Inbox(data)
    out: list[Any] = []
    outbox.buckets[0].extend([-1] * 61)  # room 3
    for _ in range(1000):  # bounded: each pass frees the bucket, as delivery would
        p.process(0, inbox)
        out.extend(x for x in outbox.buckets[0] if x != -1)
        outbox.buckets[0] = [-1] * 61
        if not inbox:
            break
    assert out == [x for x in data if x % 50 == 0]
    assert not inbox
    assert len(calls) < 20, f"{len(calls)} calls for {len(data)} items"
    assert sum(calls) >= len(data)
