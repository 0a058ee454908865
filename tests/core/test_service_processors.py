"""Service processors: service lifecycle, using_service_p, and map_using_service_async_p
(futures and coroutines, ordered and unordered, bounded in-flight)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import threading
from typing import Any

import pytest

import jetlet
from jetlet.core import DAG, Edge, Inbox, Outbox, Processor, ProcessorMetaSupplier, processors
from jetlet.core.processors import service as service_p
from jetlet.service import ServiceFactories, ServiceFactory
from jetlet.testing import make_context, verify_processor


def _done(value: Any) -> concurrent.futures.Future[Any]:
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    future.set_result(value)
    return future


def _data(n: int = 40) -> list[int]:
    rng = random.Random(77)
    return [rng.randint(-100, 100) for _ in range(n)]


def _start(meta: ProcessorMetaSupplier, count: int = 1) -> tuple[Any, list[Processor], list[Outbox]]:
    context = make_context(local_parallelism=count)
    meta.init(context)
    supplier = meta.get(0)
    supplier.init(context)
    made = supplier.get(count)
    outboxes = []
    for index, p in enumerate(made):
        outbox = Outbox(1)
        p.init(outbox, make_context(global_processor_index=index, local_parallelism=count))
        outboxes.append(outbox)
    return supplier, made, outboxes


class _Lifecycle:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.lock = threading.Lock()

    def factory(self) -> ServiceFactory[Any, Any]:
        def create_context(ctx: Any) -> str:
            self.events.append("create_context")
            return "shared"

        def create_service(ctx: Any, shared: str) -> dict[str, Any]:
            self.events.append(f"create_service({shared},{ctx.global_processor_index})")
            return {"factor": 3}

        return ServiceFactory(
            create_context,
            create_service,
            destroy_service_fn=lambda s: self.events.append("destroy_service"),
            destroy_context_fn=lambda c: self.events.append(f"destroy_context({c})"),
        )


# -- lifecycle -----------------------------------------------------------------------
def test_given_service_factory_when_supplier_makes_two_processors_then_one_context_two_services() -> None:
    life = _Lifecycle()
    meta = service_p.using_service_p(life.factory(), lambda svc: lambda batch: batch)
    supplier, made, _ = _start(meta, count=2)
    assert life.events == ["create_context", "create_service(shared,0)", "create_service(shared,1)"]
    for p in made:
        p.close()
    supplier.close(None)
    supplier.close(None)  # a second close does not destroy twice
    assert life.events[3:] == ["destroy_service", "destroy_service", "destroy_context(shared)"]


def test_given_embedded_job_when_it_ends_then_services_and_context_are_destroyed() -> None:
    life = _Lifecycle()
    out: list[int] = []
    dag = DAG()
    src = dag.new_vertex("src", processors.source_from_iterable([1, 2, 3]))
    mapper = dag.new_vertex(
        "map", service_p.using_service_p(life.factory(), lambda svc: lambda b: [x * svc["factor"] for x in b])
    )
    sink = dag.new_vertex("sink", processors.list_sink_p(out))
    dag.edge(Edge.between(src, mapper)).edge(Edge.between(mapper, sink))
    with jetlet.embedded() as jet:
        jet.new_job(dag).join(10)
    assert out == [3, 6, 9]
    assert life.events[0] == "create_context"
    assert life.events.count("destroy_service") == 1
    assert life.events[-1] == "destroy_context(shared)"


def test_given_shared_and_non_shared_factories_when_built_then_they_make_services_as_documented() -> None:
    shared = ServiceFactories.shared_service(lambda ctx: object())
    the_context = shared.create_context_fn(make_context())
    assert shared.create_service_fn(make_context(), the_context) is the_context
    per_processor = ServiceFactories.non_shared_service(lambda ctx: [ctx.global_processor_index])
    assert per_processor.create_context_fn(make_context()) is None
    assert per_processor.create_service_fn(
        make_context(global_processor_index=4, local_parallelism=5), None
    ) == [4]
    assert per_processor.is_cooperative and not per_processor.to_non_cooperative().is_cooperative


# -- using_service_p -------------------------------------------------------------------
def test_given_service_step_when_verified_then_output_matches_reference() -> None:
    factory = ServiceFactories.non_shared_service(lambda ctx: {"offset": 1000})
    data = _data()
    meta = service_p.using_service_p(factory, lambda svc: lambda b: [x + svc["offset"] for x in b if x % 2])
    verify_processor(meta).input(data).expect_output([x + 1000 for x in data if x % 2])


def test_given_non_cooperative_factory_when_using_service_then_processor_is_non_cooperative() -> None:
    factory = ServiceFactories.non_shared_service(lambda ctx: None).to_non_cooperative()
    _, (p,), _ = _start(service_p.using_service_p(factory, lambda svc: lambda b: b))
    assert not p.is_cooperative()


# -- map_using_service_async_p ----------------------------------------------------------
_NO_SERVICE = ServiceFactories.non_shared_service(lambda ctx: None)


def processors_async(fn: Any, **kwargs: Any) -> ProcessorMetaSupplier:
    return service_p.map_using_service_async_p(_NO_SERVICE, fn, **kwargs)


# The async processor swaps the last item it takes for an in-flight marker, so the inbox length does
# not change on the call that takes it: that call shows progress only by emitting. Results that are
# ready at once are emitted in the same call; where a call takes an item whose result is not ready yet
# (or is None, so nothing is emitted) the harness's progress assertion is disabled.
def test_given_completed_futures_when_async_map_verified_then_output_in_order() -> None:
    data = _data()
    meta = processors_async(lambda svc, x: _done(x * 2))
    verify_processor(meta).input(data).expect_output([x * 2 for x in data])


def test_given_none_results_when_async_map_then_they_are_dropped() -> None:
    data = _data()
    meta = processors_async(lambda svc, x: _done(x if x > 0 else None))
    verify_processor(meta).disable_progress_assertion().input(data).expect_output([x for x in data if x > 0])


def test_given_timestamped_events_when_async_map_then_results_keep_timestamps() -> None:
    events = [(ts, x) for ts, x in enumerate(_data(10))]
    meta = processors_async(lambda svc, x: _done(-x), timestamped=True)
    verify_processor(meta).input(events).expect_output([(ts, -x) for ts, x in events])


def test_given_coroutines_when_async_map_verified_then_results_in_input_order_and_loop_thread_stops() -> None:
    async def triple(svc: Any, x: int) -> int:
        await asyncio.sleep(0)
        return x * 3

    data = _data(25)
    before = {t for t in threading.enumerate() if t.name.startswith("jetlet-async-")}
    # the results arrive on another thread, so a call may legitimately find nothing ready yet
    verify_processor(processors_async(triple, max_concurrent_ops=3)).disable_progress_assertion().input(
        data
    ).expect_output([x * 3 for x in data])
    after = {t for t in threading.enumerate() if t.name.startswith("jetlet-async-") and t.is_alive()}
    assert after <= before


def test_given_thread_pool_futures_when_async_map_unordered_then_same_multiset() -> None:
    data = _data(30)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        meta = processors_async(
            lambda svc, x: pool.submit(lambda: x + 1), max_concurrent_ops=4, preserve_order=False
        )
        verify_processor(meta).disable_progress_assertion().unordered().input(data).expect_output(
            [x + 1 for x in data]
        )


class _Manual:
    """Hands out futures that the test completes when it chooses."""

    def __init__(self) -> None:
        self.futures: dict[Any, concurrent.futures.Future[Any]] = {}

    def call(self, svc: Any, item: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.futures[item] = future
        return future

    def in_flight(self) -> int:
        return sum(not f.done() for f in self.futures.values())


def test_given_max_concurrent_ops_when_processing_then_never_more_in_flight_and_inbox_keeps_the_rest() -> (
    None
):
    # given at most 2 calls in flight
    manual = _Manual()
    _, (p,), (outbox,) = _start(processors_async(manual.call, max_concurrent_ops=2))
    inbox = Inbox(["a", "b", "c", "d"])
    # when
    p.process(0, inbox)
    # then only two calls were started, the rest waits in the inbox
    assert list(manual.futures) == ["a", "b"]
    assert list(inbox) == ["c", "d"]
    # when one finishes, one more is taken
    manual.futures["a"].set_result("A")
    p.process(0, inbox)
    assert list(manual.futures) == ["a", "b", "c"] and manual.in_flight() == 2
    assert outbox.buckets == [["A"]]


def test_given_results_out_of_order_when_ordered_then_emitted_in_input_order() -> None:
    manual = _Manual()
    _, (p,), (outbox,) = _start(processors_async(manual.call, max_concurrent_ops=3))
    inbox = Inbox([1, 2, 3])
    p.process(0, inbox)
    # the whole inbox is in flight; a marker keeps it non-empty while items are held
    assert len(inbox) == 1
    manual.futures[3].set_result("three")
    manual.futures[2].set_result("two")
    assert p.try_process() and outbox.buckets == [[]]
    assert not p.complete()
    manual.futures[1].set_result("one")
    assert p.complete()
    assert outbox.buckets == [["one", "two", "three"]]
    p.process(0, inbox)
    assert not inbox  # nothing held any more: the marker is gone


def test_given_results_out_of_order_when_unordered_then_emitted_as_they_complete() -> None:
    manual = _Manual()
    _, (p,), (outbox,) = _start(processors_async(manual.call, max_concurrent_ops=3, preserve_order=False))
    p.process(0, Inbox([1, 2, 3]))
    manual.futures[3].set_result("three")
    assert p.try_process()
    manual.futures[1].set_result("one")
    manual.futures[2].set_result("two")
    assert p.complete()
    assert outbox.buckets == [["three", "one", "two"]]


def test_given_full_outbox_when_results_ready_then_they_wait_and_complete_reports_not_done() -> None:
    manual = _Manual()
    _, (p,), _ = _start(processors_async(manual.call))
    small = Outbox(1, capacity=1)
    p.init(small, make_context())
    p.process(0, Inbox(["x", "y"]))
    manual.futures["x"].set_result("X")
    manual.futures["y"].set_result("Y")
    assert not p.complete()
    assert small.buckets == [["X"]]
    small.buckets[0] = []
    assert p.complete() and small.buckets == [["Y"]]


def test_given_failed_future_when_collected_then_its_error_surfaces() -> None:
    manual = _Manual()
    _, (p,), _ = _start(processors_async(manual.call))
    p.process(0, Inbox(["bad"]))
    manual.futures["bad"].set_exception(KeyError("lookup failed"))
    with pytest.raises(KeyError, match="lookup failed"):
        p.complete()


def test_given_fn_returning_plain_value_when_processing_then_type_error_explains() -> None:
    _, (p,), _ = _start(processors_async(lambda svc, x: x))
    with pytest.raises(TypeError, match=r"must return a concurrent\.futures\.Future or a coroutine, got int"):
        p.process(0, Inbox([1]))


@pytest.mark.parametrize("bad", [0, -1])
def test_given_bad_max_concurrent_ops_when_building_then_value_error(bad: int) -> None:
    with pytest.raises(ValueError, match="max_concurrent_ops must be >= 1"):
        processors_async(lambda svc, x: _done(x), max_concurrent_ops=bad)
