"""Store processors: sinks and sources of the member's named lists, maps and observables."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from jetlet._store import DataStore
from jetlet.core import ProcessorContext, Watermark
from jetlet.core.processors import store
from jetlet.testing import make_context, verify_processor


def _ctx(data_store: DataStore, index: int = 0, total: int = 1) -> ProcessorContext:
    return dataclasses.replace(
        make_context(global_processor_index=index, local_parallelism=total), data_store=data_store
    )


def test_given_items_when_list_sink_p_then_named_list_gets_them_and_watermarks_are_swallowed() -> None:
    data_store = DataStore()
    verify_processor(store.list_sink_p("out")).context(_ctx(data_store)).disable_snapshots().input(
        [1, Watermark(3), 2]
    ).expect_outputs([])
    assert data_store.get_list("out") == [1, 2, 1, 2]  # two harness runs


def test_given_items_when_map_sink_p_then_last_value_per_key_wins() -> None:
    data_store = DataStore()
    items = [("a", 1), ("b", 2), ("a", 3)]
    verify_processor(store.map_sink_p("m", lambda i: i[0], lambda i: i[1])).context(_ctx(data_store)).input(
        items
    ).expect_outputs([])
    assert data_store.get_map("m") == {"a": 3, "b": 2}


def test_given_merge_fn_when_map_sink_p_then_values_are_merged() -> None:
    data_store = DataStore()
    items = [("a", 1), ("b", 2), ("a", 3)]
    verify_processor(
        store.map_sink_p("m", lambda i: i[0], lambda i: i[1], lambda old, new: old + new)
    ).context(_ctx(data_store)).disable_snapshots().input(items).expect_outputs([])
    assert data_store.get_map("m") == {"a": 8, "b": 4}  # two runs of 1+3 and 2


def test_given_update_fn_when_map_update_sink_p_then_it_sees_the_old_value_or_none() -> None:
    data_store = DataStore()
    calls: list[Any] = []

    def update(old: Any, item: str) -> int:
        calls.append(old)
        return (old or 0) + len(item)

    verify_processor(store.map_update_sink_p("m", lambda w: w[0], update)).context(
        _ctx(data_store)
    ).disable_snapshots().input(["ab", "abc", "x"]).expect_outputs([])
    assert calls[:3] == [None, 2, None]
    assert data_store.get_map("m") == {"a": 10, "x": 2}


def test_given_observable_sink_when_job_ends_then_items_published_and_observable_completed() -> None:
    data_store = DataStore()
    meta = store.observable_sink_p("obs")
    context = _ctx(data_store)
    meta.init(context)
    (p,) = meta.get(0).get(1)
    from jetlet.core import Inbox, Outbox

    p.init(Outbox(0), context)
    p.process(0, Inbox(["r1", "r2"]))
    observable = data_store.get_observable("obs")
    assert observable.items() == ["r1", "r2"] and not observable.is_done
    meta.close(None)
    assert observable.is_done
    assert list(observable.iterate(timeout=1)) == ["r1", "r2"]


def test_given_failed_job_when_observable_sink_closes_then_observable_fails_with_the_error() -> None:
    data_store = DataStore()
    meta = store.observable_sink_p("obs")
    meta.init(_ctx(data_store))
    meta.close(RuntimeError("job failed"))
    with pytest.raises(RuntimeError, match="job failed"):
        list(data_store.get_observable("obs").iterate(timeout=1))


def test_given_named_list_when_list_source_p_on_three_processors_then_each_item_once() -> None:
    data_store = DataStore()
    data_store.get_list("in").extend(range(20))
    for index in range(3):
        verify_processor(store.list_source_p("in")).context(_ctx(data_store, index, 3)).expect_output(
            list(range(index, 20, 3))
        )


def test_given_no_data_store_when_store_sink_runs_then_runtime_error_explains() -> None:
    with pytest.raises(RuntimeError, match="needs the member's data store"):
        verify_processor(store.list_sink_p("out")).input([1]).expect_outputs([])
    with pytest.raises(RuntimeError, match=r"Sources\.list needs the member's data store"):
        verify_processor(store.list_source_p("in")).expect_output([])
