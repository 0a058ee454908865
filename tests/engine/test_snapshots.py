"""Snapshot barriers in the engine: alignment, the member's snapshot context, the tasklet's detour.

The tasklet tests drive a real :class:`ProcessorTasklet` over real queues by
hand, so the order in which items and barriers meet is chosen exactly.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from jetlet import config
from jetlet._execution import inbound, outbound, queues, snapshots
from jetlet._execution.processor_tasklet import ProcessorTasklet
from jetlet.core import edge as edge_mod
from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import processor as proc
from jetlet.core import snapshot_writer
from jetlet.testing import wait_until

Barrier = snapshots.SnapshotBarrier


def test_exactly_once_holds_back_a_queue_whose_barrier_came_until_every_queue_has_it() -> None:
    aligner = snapshots.BarrierAligner(3, exactly_once=True)
    aligner.arrived(0, Barrier(1))
    assert aligner.is_blocked(0) and not aligner.is_blocked(1)
    assert not aligner.aligned
    aligner.queue_done(2)  # a finished queue never brings the barrier, and need not
    aligner.arrived(1, Barrier(1))
    assert aligner.aligned
    aligner.reset()
    assert not aligner.is_blocked(0) and not aligner.aligned


def test_at_least_once_and_higher_priority_queues_are_never_held_back() -> None:
    at_least_once = snapshots.BarrierAligner(2, exactly_once=False)
    at_least_once.arrived(0, Barrier(1))
    assert not at_least_once.is_blocked(0)
    build_side = snapshots.BarrierAligner(2, exactly_once=True, never_block=frozenset({0}))
    build_side.arrived(0, Barrier(1))
    assert not build_side.is_blocked(0)


def test_a_barrier_of_another_snapshot_during_alignment_is_an_error() -> None:
    aligner = snapshots.BarrierAligner(2, exactly_once=True)
    aligner.arrived(0, Barrier(1))
    try:
        aligner.arrived(1, Barrier(2))
    except RuntimeError as exc:
        assert "snapshot 2" in str(exc) and "snapshot 1" in str(exc)
    else:
        raise AssertionError("a barrier of snapshot 2 was accepted while aligning snapshot 1")


def test_the_member_part_is_complete_when_every_tasklet_saved_or_ended() -> None:
    completed: list[tuple[int, dict[str, Any], str | None]] = []
    member = snapshots.MemberSnapshots(
        True, 3, lambda sid, entries, error: completed.append((sid, entries, error))
    )
    member.start(1)
    member.saved(1, 0, "source", [("offset", 5)])
    member.tasklet_ended(1, 0)  # ended before the barrier reached it: nothing left to save
    assert completed == []
    member.saved(1, 2, "count", [("a", 2), ("b", 3)])
    assert completed == [(1, {"source": [("offset", 5)], "count": [("a", 2), ("b", 3)]}, None)]
    try:
        member.start(1)
    except ValueError as exc:
        assert "not newer" in str(exc)
    else:
        raise AssertionError("snapshot 1 was started twice")


def test_commit_waits_until_every_live_tasklet_has_finished_the_second_phase() -> None:
    member = snapshots.MemberSnapshots(True, 2, lambda *_: None)
    member.start(1)
    assert member.commit(1, True, timeout=0.01) is False
    finisher = threading.Thread(target=lambda: (member.committed(1, 0), member.tasklet_ended(1, 1)))
    finisher.start()
    assert member.commit(1, True, timeout=10)
    finisher.join()
    assert member.commit_id == 1 and member.commit_success


class _Recorder(proc.Processor):
    """Sums what it receives; saves the sum; records every callback in order."""

    def __init__(self) -> None:
        self.total = 0
        self.seen: list[Any] = []
        self.calls: list[str] = []

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        for item in inbox.take_all():
            self.seen.append(item)
            self.total += item

    def save_to_snapshot(self) -> bool:
        self.calls.append(f"save {self.total}")
        return self.outbox.offer_to_snapshot("total", self.total)

    def snapshot_commit_prepare(self) -> bool:
        self.calls.append("prepare")
        return True

    def snapshot_commit_finish(self, success: bool) -> bool:
        self.calls.append(f"finish {success}")
        return True

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        for key, value in inbox.take_all():
            assert key == "total"
            self.total += value
            self.calls.append(f"restore {value}")


def _consumer(
    guarantee: config.ProcessingGuarantee, restored: list[tuple[Any, Any]] | None = None
) -> tuple[
    ProcessorTasklet,
    _Recorder,
    list[queues.SpscQueue],
    queues.SpscQueue,
    snapshots.MemberSnapshots,
    list[Any],
]:
    parts: list[Any] = []
    member = snapshots.MemberSnapshots(
        guarantee is config.ProcessingGuarantee.EXACTLY_ONCE,
        1,
        lambda sid, entries, error: parts.append(entries),
    )
    inputs = [queues.SpscQueue(64, "a"), queues.SpscQueue(64, "b")]
    output = queues.SpscQueue(64, "out")
    aligner = snapshots.BarrierAligner(2, member.exactly_once)
    stream = inbound.InboundStream(0, 0, inputs, inbound.WatermarkCoalescer(2), 0, aligner)
    collector = outbound.OutboundCollector([output], edge_mod.RoutingPolicy.UNICAST)
    recorder = _Recorder()
    tasklet = ProcessorTasklet(
        "sum#0",
        recorder,
        _context(guarantee),
        outbox_mod.Outbox(1),
        [stream],
        [collector],
        vertex_name="sum",
        member_snapshots=member,
        index=0,
        aligner=aligner,
        restored=restored,
    )
    tasklet.init()
    return tasklet, recorder, inputs, output, member, parts


def _context(guarantee: config.ProcessingGuarantee) -> proc.ProcessorContext:
    return proc.ProcessorContext(
        job_id=1,
        job_name="test",
        vertex_name="sum",
        member_count=1,
        local_parallelism=1,
        total_parallelism=1,
        partition_count=271,
        processing_guarantee=guarantee,
        job_arguments={},
        logger=logging.getLogger("test"),
        data_store=None,
        member_index=0,
        global_processor_index=0,
        local_processor_index=0,
    )


def _thawed(parts: list[Any]) -> list[Any]:
    """The members' parts with their values read back (frozen by the tasklet, or lent and frozen here)."""
    read_back, settle_lent = snapshot_writer.read_back, snapshot_writer.settle_lent
    return [{v: [(k, read_back(x)) for k, x in settle_lent(e)] for v, e in part.items()} for part in parts]


def _run(tasklet: ProcessorTasklet, calls: int = 20) -> None:
    for _ in range(calls):
        tasklet.call()


def _drain(queue: queues.SpscQueue) -> list[Any]:
    found: list[Any] = []
    while (element := queue.poll()) is not None:
        found.extend(element) if type(element) is list else found.append(element)
    return found


def test_exactly_once_state_holds_exactly_the_items_before_the_barrier() -> None:
    tasklet, recorder, (a, b), output, member, parts = _consumer(config.ProcessingGuarantee.EXACTLY_ONCE)
    member.start(1)
    a.offer_batch([1, 2])
    a.offer_control(Barrier(1))
    a.offer_batch([100])  # after the barrier on a: must wait until b's barrier came
    b.offer_batch([10])
    _run(tasklet)
    assert recorder.total == 13 and parts == []
    b.offer_control(Barrier(1))
    b.offer_batch([1000])
    _run(tasklet)
    assert _thawed(parts) == [{"sum": [("total", 13)]}]
    assert recorder.calls[:2] == ["save 13", "prepare"]
    assert recorder.total == 1113  # the items after the barrier are processed once the snapshot is taken
    assert Barrier(1) in _drain(output)


def test_at_least_once_state_may_hold_items_after_the_barrier_but_never_misses_one_before() -> None:
    tasklet, _, (a, b), _, member, parts = _consumer(config.ProcessingGuarantee.AT_LEAST_ONCE)
    member.start(1)
    a.offer_batch([1, 2])
    a.offer_control(Barrier(1))
    a.offer_batch([100])
    b.offer_batch([10])
    _run(tasklet)
    b.offer_control(Barrier(1))
    _run(tasklet)
    saved = _thawed(parts)[0]["sum"][0][1]
    assert saved >= 13 and saved in (13, 113)


def test_the_second_phase_runs_before_anything_else_and_a_restore_comes_first() -> None:
    tasklet, recorder, (a, b), _, member, parts = _consumer(
        config.ProcessingGuarantee.EXACTLY_ONCE, restored=[("total", 40)]
    )
    _run(tasklet, 3)
    assert recorder.calls == ["restore 40"]
    member.start(1)
    a.offer_control(Barrier(1))
    b.offer_control(Barrier(1))
    _run(tasklet)
    assert _thawed(parts) == [{"sum": [("total", 40)]}]
    committer = threading.Thread(target=lambda: member.commit(1, True, timeout=10))
    committer.start()

    def finished() -> bool:
        tasklet.call()
        return "finish True" in recorder.calls

    wait_until(finished, "snapshot_commit_finish(True) to be called")
    committer.join()
    assert recorder.calls == ["restore 40", "save 40", "prepare", "finish True"]


class _Counter(proc.Processor):
    """A source: emits 1, 2, 3 and completes; saves how many it emitted."""

    def __init__(self) -> None:
        self.emitted = 0

    def complete(self) -> bool:
        while self.emitted < 3 and self.outbox.offer(self.emitted + 1):
            self.emitted += 1
        return self.emitted == 3

    def save_to_snapshot(self) -> bool:
        return self.outbox.offer_to_snapshot("emitted", self.emitted)


def _source(member: snapshots.MemberSnapshots) -> tuple[ProcessorTasklet, queues.SpscQueue]:
    output = queues.SpscQueue(64, "out")
    collector = outbound.OutboundCollector([output], edge_mod.RoutingPolicy.UNICAST)
    tasklet = ProcessorTasklet(
        "count#0",
        _Counter(),
        _context(config.ProcessingGuarantee.EXACTLY_ONCE),
        outbox_mod.Outbox(1),
        [],
        [collector],
        vertex_name="count",
        member_snapshots=member,
        index=0,
    )
    tasklet.init()
    return tasklet, output


def test_an_exactly_once_source_that_completed_ends_only_once_the_coordinator_grants_it() -> None:
    # given a source of an exactly-once execution whose member asks the coordinator before ending
    asked: list[str] = []
    parts: list[Any] = []
    member = snapshots.MemberSnapshots(
        True, 1, lambda sid, entries, error: parts.append(entries), ask_to_end=lambda: asked.append("end?")
    )
    tasklet, output = _source(member)
    # when it has emitted everything (complete() returned True)
    _run(tasklet)
    # then it asked once, and sent its items but no done marker: a tasklet that ended saves nothing
    # into later snapshots, and nothing downstream may end (and commit) while a restart could follow
    assert asked == ["end?"]
    found = _drain(output)
    assert found == [1, 2, 3] and queues.DONE_ITEM not in found and not tasklet.is_done
    # and while it waits it still takes snapshots, with its final state (a restart from one is exact)
    member.start(1)
    _run(tasklet)
    assert _thawed(parts) == [{"count": [("emitted", 3)]}]
    assert _drain(output) == [Barrier(1)] and not tasklet.is_done
    # when the coordinator grants the end, it ends
    member.end.grant()
    _run(tasklet)
    assert _drain(output) == [queues.DONE_ITEM] and tasklet.is_done
    assert asked == ["end?"]


def test_a_refused_end_is_asked_again_and_without_a_coordinator_the_end_is_granted_at_once() -> None:
    asked: list[str] = []
    member = snapshots.MemberSnapshots(True, 1, lambda *_: None, ask_to_end=lambda: asked.append("end?"))
    tasklet, _ = _source(member)
    _run(tasklet)
    member.end.refused()  # not yet
    _run(tasklet)
    assert asked == ["end?", "end?"] and not tasklet.is_done
    alone, alone_output = _source(snapshots.MemberSnapshots(True, 1, lambda *_: None))
    _run(alone)
    assert alone.is_done and queues.DONE_ITEM in _drain(alone_output)


class _Committer(proc.Processor):
    """A sink that commits what it received in complete() (as the file sink commits its last files)."""

    def __init__(self) -> None:
        self.received: list[Any] = []
        self.committed: list[Any] = []

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        self.received.extend(inbox.take_all())

    def complete(self) -> bool:
        self.committed, self.received = self.committed + self.received, []
        return True


def test_an_exactly_once_sink_commits_its_last_output_only_once_the_final_commit_is_granted() -> None:
    # given a sink of an exactly-once execution that received items after the last snapshot
    asked: list[str] = []
    member = snapshots.MemberSnapshots(
        True, 1, lambda *_: None, ask_to_commit=lambda: asked.append("commit?")
    )
    source = queues.SpscQueue(64, "in")
    stream = inbound.InboundStream(0, 0, [source], inbound.WatermarkCoalescer(1), 0)
    sink = _Committer()
    tasklet = ProcessorTasklet(
        "sink#0",
        sink,
        _context(config.ProcessingGuarantee.EXACTLY_ONCE),
        outbox_mod.Outbox(0),
        [stream],
        [],
        vertex_name="sink",
        member_snapshots=member,
        index=0,
    )
    tasklet.init()
    source.offer_batch([1, 2])
    source.offer_control(queues.DONE_ITEM)
    # when its input is done
    _run(tasklet)
    # then it asked for the final commit and has not committed (a member lost now restarts the job
    # from its last snapshot, which these items come after: committed, they would come twice)
    assert asked == ["commit?"] and sink.committed == [] and not tasklet.is_done
    # when the coordinator grants it, it commits and ends
    member.final_commit.grant()
    _run(tasklet)
    assert sink.committed == [1, 2] and tasklet.is_done and asked == ["commit?"]


def test_a_source_that_ended_is_in_every_later_snapshot_with_its_final_state() -> None:
    # given two tasklets on a member: a source that ends with its final position, and one that runs on
    done: list[tuple[int, dict[str, Any]]] = []
    member = snapshots.MemberSnapshots(True, 2, lambda sid, entries, error: done.append((sid, entries)))
    member.start(1)
    member.saved(1, 0, "short", [("pos-0", 10)])
    member.saved(1, 1, "long", [("pos-1", 5)])
    member.tasklet_ended(0, 1, "short", [("pos-0", 300)])
    # when later snapshots are taken by the one left
    for snapshot_id, position in ((2, 8), (3, 12)):
        member.start(snapshot_id)
        member.saved(snapshot_id, 1, "long", [("pos-1", position)])
    # then each holds the ended source's final state (a restore finds it ended, not unsaved)
    assert done == [
        (1, {"short": [("pos-0", 10)], "long": [("pos-1", 5)]}),
        (2, {"long": [("pos-1", 8)], "short": [("pos-0", 300)]}),
        (3, {"long": [("pos-1", 12)], "short": [("pos-0", 300)]}),
    ]
