"""Chunks sized by the step's outputs per input: a selective step behind a nearly full outbox."""

from __future__ import annotations

from typing import Any

from jetlet.core import Inbox, Outbox
from jetlet.core.processors import chain, chunking, hash_join, stateful
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


def test_given_a_chunk_without_outputs_when_sizing_then_everything_available_up_to_the_cap() -> None:
    sizer = chunking.ChunkSizer()
    sizer.observed(inputs=3, outputs=0)
    assert sizer.inputs_for(room=20, available=4096) == 4096
    # a step that emitted nothing may expand the next chunk: at most the cap times the room
    assert sizer.inputs_for(room=1, available=4096) == chunking.MAX_INPUTS_PER_ROOM


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
    assert len(calls) < 100, f"{len(calls)} calls for {len(data)} items"
    assert sum(calls) >= len(data)


class _CountingOutbox(Outbox):
    """An outbox that counts how often a processor asks for its room (once per chunk)."""

    __slots__ = ("room_calls",)

    def __init__(self) -> None:
        super().__init__(1, capacity=64)
        self.room_calls = 0

    def room(self, ordinal: int = -1) -> int:
        self.room_calls += 1
        return super().room(ordinal)


def _run_behind_a_nearly_full_bucket(processor: Any, ordinal: int, data: list[Any]) -> tuple[list[Any], int]:
    """Feed ``data`` with the bucket kept at 61 of 64 (room 3); return (outputs, chunks)."""
    outbox = _CountingOutbox()
    processor.init(outbox, make_context())
    inbox = Inbox(data)
    out: list[Any] = []
    outbox.buckets[0].extend([-1] * 61)
    for _ in range(1000):  # bounded: each pass frees the bucket, as delivery would
        processor.process(ordinal, inbox)
        out.extend(x for x in outbox.buckets[0] if x != -1)
        outbox.buckets[0] = [-1] * 61
        if not inbox:
            break
    assert not inbox
    return out, outbox.room_calls


def test_given_a_selective_stateful_filter_behind_a_nearly_full_outbox_then_few_chunks_exact_output() -> None:
    data = list(range(1, 5001))
    p = stateful.stateful_p(stateful.FILTER, None, int, lambda _state, x: x % 50 == 0)()
    out, chunks = _run_behind_a_nearly_full_bucket(p, 0, data)
    assert out == [x for x in data if x % 50 == 0]
    assert chunks < 200, f"{chunks} chunks for {len(data)} items"  # about 1,700 sized by the room


def test_given_a_probe_with_few_matches_behind_a_nearly_full_outbox_then_few_chunks_exact_output() -> None:
    p = hash_join.HashJoinP(
        [hash_join.JoinClause.on_keys(lambda x: x, lambda x: x)], lambda x, match: (x, match), True, False
    )
    build = Inbox([x for x in range(1, 5001) if x % 50 == 0])
    outbox = _CountingOutbox()
    p.init(outbox, make_context())
    p.process(1, build)
    assert p.complete_edge(1)
    data = list(range(1, 5001))
    out, chunks = _run_behind_a_nearly_full_bucket(p, 0, data)
    assert out == [(x, x) for x in data if x % 50 == 0]
    assert chunks < 200, f"{chunks} chunks for {len(data)} items"
