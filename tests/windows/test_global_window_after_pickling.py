"""A global window's processor as a member gets it (its factory pickled) still folds a batch at once."""

from __future__ import annotations

import pickle
from typing import Any

from jetlet import _pickling
from jetlet.aggregate import AggregateOperation
from jetlet.core import Inbox, Outbox, event_time
from jetlet.core.processors import windows
from jetlet.testing import make_context

_calls: list[str] = []


def _one(total: int, item: int) -> int:
    _calls.append("item")
    return total + item


def _batch(total: int, items: list[int]) -> int:
    _calls.append("batch")
    return total + sum(items)


def test_given_a_pickled_global_window_factory_when_a_batch_arrives_then_it_is_folded_in_one_call() -> None:
    op: AggregateOperation[Any, Any] = (
        AggregateOperation.with_create(int)
        .and_accumulate(_one)
        .and_combine(int.__add__)
        .and_accumulate_batch(_batch)
    )
    policy = event_time.sliding_win_policy(1000, 1000)
    factory = windows.accumulate_by_frame_p(windows.GLOBAL_KEY, lambda item: item[0], policy, op, events=True)
    shipped = pickle.loads(_pickling.dumps(factory))  # what a member runs
    processor = shipped()
    processor.init(Outbox(1), make_context())
    events = [(10 + n, n) for n in range(100)]  # one frame
    _calls.clear()
    processor.process(0, Inbox(events))
    assert _calls == ["batch"]
    assert windows.as_global_key(pickle.loads(pickle.dumps(windows.GLOBAL_KEY))) is windows.GLOBAL_KEY
    assert windows.as_global_key(len) is len
