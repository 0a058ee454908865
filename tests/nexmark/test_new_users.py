"""Query 8 with the people broadcast (jetlet.nexmark.new_users): the window join, its restore, the
watermark stride it asks for, and the query against the plain loop through a restart on two members."""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator
from typing import Any

import pytest

import jetlet
from jetlet import config
from jetlet._planner import planner
from jetlet.aggregate import counting
from jetlet.core import processor as proc
from jetlet.core.inbox import Inbox
from jetlet.core.processors import pending
from jetlet.core.snapshot_keys import ProcessorKey
from jetlet.core.watermark import IDLE_MESSAGE, Watermark
from jetlet.local_cluster import local_cluster
from jetlet.nexmark import fast_generator, joins
from jetlet.nexmark.bench import jobs, plain
from jetlet.nexmark.fast_source import fast_nexmark_source
from jetlet.nexmark.model import IdNameReserve
from jetlet.nexmark.new_users import AUCTIONS, PEOPLE, SNAPSHOT_TAG, new_user_auctions_p
from jetlet.pipeline import Pipeline, Sinks, Sources, WindowDefinition
from jetlet.testing import TestOutbox, make_context, verify_processor, wait_until

DEADLINE_S = 60.0


@pytest.fixture
def jet() -> Iterator[jetlet.EmbeddedInstance]:
    with jetlet.embedded() as instance:
        yield instance


def started(index: int = 0, total: int = 1) -> tuple[proc.Processor, TestOutbox]:
    """A join of 100 ms windows, processor ``index`` of ``total``, ready to take input."""
    processor = new_user_auctions_p(100)()
    outbox = TestOutbox(1, 1_000)
    context = make_context(global_processor_index=index, member_index=index, member_count=total)
    processor.init(outbox, context)
    return processor, outbox


def watermark(processor: proc.Processor, outbox: TestOutbox, at: Watermark) -> list[Any]:
    """What ``processor`` emits for the watermark ``at`` (it is always accepted within a few offers)."""
    outputs: list[list[Any]] = [[]]
    for _ in range(10):
        accepted = processor.try_process_watermark(at)
        outbox.drain(outputs, [])
        if accepted:
            return outputs[0]
    raise AssertionError("the watermark was not accepted")


def test_a_window_joins_each_auction_with_every_registration_of_its_seller_at_the_window_end() -> None:
    processor, outbox = started()
    # given two registrations of person 7 and one of person 8 in the window [0, 100), person 7's two
    # auctions, person 9's auction (never registered), and person 7's auction of the next window
    processor.process(PEOPLE, Inbox([(5, (7, "ann")), (10, (8, "bob")), (60, (7, "ann2"))]))
    processor.process(AUCTIONS, Inbox([(20, (7, 50)), (30, (9, 70)), (99, (7, 80)), (100, (7, 90))]))
    # when the watermark reaches 100, then 200
    first = watermark(processor, outbox, Watermark(100))
    second = watermark(processor, outbox, Watermark(200))
    # then the first window's pairs came out stamped with its end, before the watermark; the next
    # window had no registration of person 7, so nothing
    assert collections.Counter(first[:-1]) == collections.Counter(
        (100, IdNameReserve(7, name, reserve)) for name in ("ann", "ann2") for reserve in (50, 80)
    )
    assert first[-1] == Watermark(100) and second == [Watermark(200)]


@pytest.mark.parametrize(("index", "late"), [(0, 2), (1, 1)], ids=["processor 0", "processor 1"])
def test_items_of_an_emitted_window_are_dropped_and_an_idle_input_closes_nothing(
    index: int, late: int
) -> None:
    processor, outbox = started(index, 2)
    processor.process(PEOPLE, Inbox([(150, (7, "ann"))]))
    assert watermark(processor, outbox, Watermark(100)) == [Watermark(100)]
    # given a person and an auction of the window [0, 100), which the watermark has passed
    processor.process(PEOPLE, Inbox([(50, (7, "late"))]))
    processor.process(AUCTIONS, Inbox([(99, (7, 1)), (150, (7, 2))]))
    # then idle inputs close nothing (the message goes on); the next watermark closes [100, 200)
    outputs: list[list[Any]] = [[]]
    assert processor.try_process_idle()
    outbox.drain(outputs, [])
    assert outputs[0] == [IDLE_MESSAGE]
    assert watermark(processor, outbox, Watermark(200)) == [(200, IdNameReserve(7, "ann", 2)), Watermark(200)]
    # and the late items were counted, a late person by processor 0 only (every processor gets it)
    assert processor.metrics()["lateEventsDropped"] == late


def test_when_the_input_ends_every_open_window_comes_out() -> None:
    (
        verify_processor(new_user_auctions_p(100))
        .inputs([[(20, (7, 50)), (150, (7, 60))], [(10, (7, "ann")), (120, (7, "bob"))]])
        .disable_progress_assertion()
        .unordered()
        .expect_output([(100, IdNameReserve(7, "ann", 50)), (200, IdNameReserve(7, "bob", 60))])
    )


def saves() -> list[tuple[ProcessorKey, Any]]:
    """What three processors saved: every processor holds the window ending at 200 with the same
    people; processor 0 had emitted the window ending at 100 (its watermark 100), which processors 1
    and 2 still hold (theirs 60 and 50)."""
    people_100 = {7: ["ann"]}
    people_200 = {8: ["bob"]}
    return [
        (
            ProcessorKey(SNAPSHOT_TAG, 2),
            (50, {100: ({7: [30]}, dict(people_100)), 200: ({8: [3]}, dict(people_200))}),
        ),
        (ProcessorKey(SNAPSHOT_TAG, 0), (100, {200: ({8: [1]}, dict(people_200))})),
        (
            ProcessorKey(SNAPSHOT_TAG, 1),
            (60, {100: ({7: [20]}, dict(people_100)), 200: ({8: [2]}, dict(people_200))}),
        ),
    ]


@pytest.mark.parametrize(
    ("index", "total", "auctions_of"),
    [(0, 1, (0, 1, 2)), (0, 2, (0, 2)), (1, 2, (1,)), (1, 3, (1,))],
    ids=["3 into 1", "3 into 2, first", "3 into 2, second", "3 into 3"],
)
def test_a_restored_join_takes_the_auctions_of_its_share_of_the_saves_and_each_window_s_people_once(
    index: int, total: int, auctions_of: tuple[int, ...]
) -> None:
    # given what three processors saved (auction reserves 1, 2, 3 of person 8 and 20, 30 of person 7
    # were saved by processors 0, 1, 2, 1, 2)
    processor, outbox = started(index, total)
    processor.restore_from_snapshot(Inbox(saves()))
    assert processor.finish_snapshot_restore()
    # when the watermark passes both windows
    got = watermark(processor, outbox, Watermark(200))
    # then it joined the auctions saved by processors j with j % total == index (each auction on one
    # processor), each with one copy of its window's people
    saved_by = {8: {0: 1, 1: 2, 2: 3}, 7: {1: 20, 2: 30}}
    expected = [(100, IdNameReserve(7, "ann", saved_by[7][j])) for j in auctions_of if j in saved_by[7]]
    expected += [(200, IdNameReserve(8, "bob", saved_by[8][j])) for j in auctions_of]
    assert collections.Counter(got[:-1]) == collections.Counter(expected)


def test_processors_restored_from_the_same_saves_keep_people_of_their_own() -> None:
    # given two processors of one member restoring the very same entries (the member decodes a
    # snapshot's broadcast entries once for all its processors)
    entries = saves()
    first, first_out = started(0, 2)
    second, second_out = started(1, 2)
    for processor in (first, second):
        processor.restore_from_snapshot(Inbox(list(entries)))
        assert processor.finish_snapshot_restore()
    # when a new registration of person 8 comes to both (broadcast), and the window closes
    for processor in (first, second):
        processor.process(PEOPLE, Inbox([(180, (8, "bob2"))]))
    got = watermark(first, first_out, Watermark(200)) + watermark(second, second_out, Watermark(200))
    # then each of person 8's auctions (reserves 1 and 3 on the first, 2 on the second) came out once
    # with each registration: the processors did not add the new one to one shared list
    pairs = collections.Counter(item for item in got if not isinstance(item, Watermark))
    assert pairs[(200, IdNameReserve(8, "bob2", 1))] == 1
    assert sorted(r.reserve for _, r in pairs if r.name == "bob2") == [1, 2, 3]
    assert sorted(r.reserve for _, r in pairs if r.name == "bob") == [1, 2, 3]


def test_a_restored_join_drops_what_every_save_had_closed() -> None:
    # given saves whose watermarks were 100 and 150 (the lowest is restored)
    entries = [
        (ProcessorKey(SNAPSHOT_TAG, 0), (100, {200: ({}, {8: ["bob"]})})),
        (ProcessorKey(SNAPSHOT_TAG, 1), (150, {200: ({8: [2]}, {8: ["bob"]})})),
    ]
    processor, outbox = started()
    processor.restore_from_snapshot(Inbox(entries))
    assert processor.finish_snapshot_restore()
    # when a person and an auction of the window [0, 100) come again (replayed), then the watermark
    processor.process(PEOPLE, Inbox([(50, (7, "ann"))]))
    processor.process(AUCTIONS, Inbox([(60, (7, 1))]))
    got = watermark(processor, outbox, Watermark(200))
    # then they were late, as they were before the snapshot: only the window ending at 200 comes out
    assert got == [(200, IdNameReserve(8, "bob", 2)), Watermark(200)]
    assert processor.metrics()["lateEventsDropped"] == 2


def test_a_restored_join_refuses_another_stage_s_snapshot() -> None:
    processor, _ = started()
    with pytest.raises(ValueError, match="query 8's join cannot restore"):
        processor.restore_from_snapshot(Inbox([(ProcessorKey("winning-bids-partial", 0), {})]))


@pytest.mark.parametrize("window_ms", [0, 2.5])
def test_a_bad_window_is_refused_naming_it_when_the_pipeline_is_built(window_ms: Any) -> None:
    p = Pipeline()
    events = p.read_from(fast_nexmark_source(fast_generator.FastConfig(), 10, False)).with_native_timestamps(
        0
    )
    with pytest.raises(ValueError, match=f"query 8's window_ms must be an int >= 1, got {window_ms}"):
        joins.q8_monitor_new_users(events, window_ms)


# -- custom_transform's watermark_stride ---------------------------------------------------------


class WatermarksSeen(proc.Processor):
    """Emits ``(t, t)`` for each watermark ``t`` it is given (before passing it on); drops the items."""

    def __init__(self) -> None:
        self._output = pending.PendingOutput()

    def process(self, ordinal: int, inbox: Inbox) -> None:
        inbox.take_all()

    def try_process_watermark(self, watermark: Watermark) -> bool:
        return self._output.watermark(self.outbox, watermark, lambda t: [(t, t)])


@pytest.mark.parametrize("stride", [None, 10])
def test_custom_transform_watermark_stride_makes_the_sources_watermarks_that_fine(
    jet: jetlet.EmbeddedInstance, stride: int | None
) -> None:
    # given items stamped 0..999 ms and 5 s in a pipeline without windows, into a custom stage that asks for
    # watermarks every 10 ms (or says nothing)
    p = Pipeline()
    source = Sources.stream_from_generator(lambda _: [*range(1_000), 5_000])
    stage = p.read_from(source).with_timestamps(lambda t: t, 0)
    stage.custom_transform("seen", WatermarksSeen, watermark_stride=stride).write_to(Sinks.list("seen"))
    # when it runs until an item at 5 s moved the watermark past the first second
    job = jet.new_job(p)
    wait_until(lambda: any(t >= 1_000 for t in jet.get_list("seen")), "a watermark at 5 s", DEADLINE_S)
    job.cancel()
    seen = [t for t in jet.get_list("seen") if t < 1_000]
    # then with the stride it saw a watermark in every 10 ms up to the last item's; without one,
    # none within the second (Jet's throttle in a pipeline without windows)
    if stride is None:
        assert [t for t in seen if t % 1_000] == []
    else:
        assert set(range(10, 1_000, 10)) <= set(seen) and all(t % 10 == 0 for t in seen)


def test_a_bad_watermark_stride_or_one_without_timestamps_is_refused_naming_the_stage() -> None:
    p = Pipeline()
    source = p.read_from(Sources.stream_from_generator(lambda _: [1]))
    with pytest.raises(
        ValueError, match="custom_transform 'seen': watermark_stride must be an int >= 1, got 0"
    ):
        source.with_timestamps(lambda t: t, 0).custom_transform("seen", WatermarksSeen, watermark_stride=0)
    with pytest.raises(
        ValueError, match=r"'seen': watermark_stride needs timestamps, and stage '.*' has none"
    ):
        source.without_timestamps().custom_transform("seen", WatermarksSeen, watermark_stride=10)


@pytest.mark.parametrize(
    ("slide", "stride", "expected"),
    [(None, None, 1_000), (15, 10, 5), (None, 1_500, 750), (2_000, None, 1_000), (None, 20, 20)],
)
def test_the_watermark_stride_is_the_gcd_of_the_slides_and_strides_and_at_most_a_second(
    slide: int | None, stride: int | None, expected: int
) -> None:
    p = Pipeline()
    stage = p.read_from(Sources.stream_from_generator(lambda _: [1])).with_timestamps(lambda t: t, 0)
    stage.custom_transform("seen", WatermarksSeen, watermark_stride=stride).write_to(Sinks.list("a"))
    if slide is not None:
        stage.window(WindowDefinition.sliding(2 * slide, slide)).aggregate(counting()).write_to(
            Sinks.list("b")
        )
    assert planner.watermark_stride(p._graph) == expected


# -- on two members, against the plain loop, through a restart ---------------------------------------


def plain_new_users(cfg: fast_generator.FastConfig, count: int, window_ms: int) -> collections.Counter[Any]:
    """The plain loop's query 8 over the first ``count`` events: the windows that end by the last event
    (so does the job's watermark, the streaming source does not end)."""
    events = fast_generator.fast_events(range(count), cfg)
    step, out = plain.NewUsersLoop(window_ms), list[object]()
    for start in range(0, len(events), plain.BATCH):
        step(events[start : start + plain.BATCH], out)
    return collections.Counter(out)


@pytest.mark.parametrize("stop", ["restart", "suspend"])
def test_query_8_broadcast_comes_out_right_on_two_members_through_a_restore(stop: str) -> None:
    # given 3 s of events paced at 20,000 events/s from a second from now, two source processors and
    # two join processors per member (which restore from the same decoded snapshot entries), 500 ms
    # windows, the plain loop's results, and a snapshot every 200 ms
    cfg = fast_generator.FastConfig(rate=20_000, keys=300, base_time=int(time.time() * 1000) + 1_000)
    count, window_ms = 60_000, 500
    expected = plain_new_users(cfg, count, window_ms)
    assert expected.total() > 300
    p = Pipeline()
    source = fast_nexmark_source(cfg, count, paced=True, local_parallelism=2)
    events = p.read_from(source).with_native_timestamps(0)
    everyone = events.map(joins.person_id_name).broadcast()
    joined = events.map(joins.auction_seller_reserve).custom_transform(
        "q8", new_user_auctions_p(window_ms), everyone, watermark_stride=window_ms
    )
    joined.set_local_parallelism(2).write_to(Sinks.list("q8"))
    guarantee = config.ProcessingGuarantee.EXACTLY_ONCE
    with local_cluster(2) as client:
        job = client.new_job(
            p, config.JobConfig(processing_guarantee=guarantee, snapshot_interval_millis=200)
        )
        # when, a third of the way through, the job restarts from its last snapshot, or is suspended
        # (a last snapshot, then it stops) and resumed
        wait_until(lambda: len(client.get_list("q8")) >= expected.total() // 3, "a third of it", DEADLINE_S)
        taken = job.snapshot.get("count", 0)
        wait_until(lambda: job.snapshot.get("count", 0) > taken, "a snapshot after that", DEADLINE_S)
        if stop == "restart":
            job.restart()
        else:
            job.suspend()
            job.resume()
        wait_until(
            lambda: not expected - collections.Counter(client.get_list("q8")), "every result", DEADLINE_S
        )
        jobs.stop(job)
        got = collections.Counter(client.get_list("q8"))
    # then every result is the plain loop's, each as often as there: after a suspension exactly, after
    # a restart at most twice as often (a result emitted after the last snapshot comes again after the
    # restore: the list sink is not transactional); no restored processor joins an auction another
    # one holds, nor a window's people twice
    assert set(got) == set(expected)
    if stop == "suspend":
        assert got == expected
    else:
        assert all(expected[r] <= got[r] <= 2 * expected[r] for r in expected)


def test_the_benchmark_runs_query_8_with_the_people_broadcast() -> None:
    dag = jobs.build_pipeline(
        "q8", fast_generator.FastConfig(), paced=False, slide_ms=10, list_name="out"
    ).to_dag()
    names = [vertex.name for vertex in dag.vertices()]
    assert "nexmark-q8-monitor-new-users" in names and not any("window" in name for name in names)
