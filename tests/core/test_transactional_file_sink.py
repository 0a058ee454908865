"""``write_file_p`` with exactly-once: files committed with snapshots, restored after failures.

The tests drive the processor by hand in the order the engine calls it at a
snapshot: ``save_to_snapshot()``, ``snapshot_commit_prepare()``, and later
``snapshot_commit_finish(success)``. A *crash* throws the processor away
without those later calls (and without ``close()`` for a killed process); a
restart restores fresh processors from the entries of the last complete
snapshot and replays the items after its barrier, as the sources would.
Committed files are those without the temporary ``.tmp`` name; their lines
must be every item exactly once.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from jetlet import config
from jetlet.core import Inbox, snapshot_keys
from jetlet.core.processors import file_sink
from jetlet.testing import TestOutbox, make_context

EXACTLY_ONCE = config.ProcessingGuarantee.EXACTLY_ONCE
Entry = tuple[Any, Any]


def sink(
    directory: Path, index: int = 0, count: int = 1, guarantee: Any = EXACTLY_ONCE, execution: int = 0
) -> file_sink.WriteFileP:
    processor = file_sink.write_file_p(str(directory), lambda item: f"<{item}>")()
    assert isinstance(processor, file_sink.WriteFileP)
    context = make_context("sink", index, local_parallelism=count, processing_guarantee=guarantee)
    context = dataclasses.replace(context, execution_id=execution)
    processor.init(TestOutbox(1, 2), context)
    return processor


def write(processor: file_sink.WriteFileP, items: list[Any]) -> None:
    inbox = Inbox(items)
    processor.process(0, inbox)
    assert not inbox


def snapshot(processor: file_sink.WriteFileP) -> list[Entry]:
    """Phase one of a snapshot: save (through an outbox of 2), then prepare; returns the saved entries."""
    outbox = processor.outbox
    saved: list[Entry] = []
    while True:
        done = processor.save_to_snapshot()
        saved += outbox.snapshot_bucket
        outbox.snapshot_bucket.clear()
        if done:
            break
    assert processor.snapshot_commit_prepare()
    return saved


def restore(directory: Path, entries: list[Entry], index: int = 0, count: int = 1) -> file_sink.WriteFileP:
    assert all(snapshot_keys.partition_or_broadcast(key, 271) is None for key, _ in entries)
    processor = sink(directory, index, count)
    processor.restore_from_snapshot(Inbox(entries))
    assert processor.finish_snapshot_restore()
    return processor


def committed(directory: Path) -> Counter[str]:
    """The lines of every committed file."""
    lines: Counter[str] = Counter()
    for path in directory.iterdir():
        if not path.name.endswith(".tmp"):
            lines.update(path.read_text(encoding="utf-8").splitlines())
    return lines


def temp_files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.name.endswith(".tmp"))


def lines(*items: Any) -> Counter[str]:
    return Counter(f"<{item}>" for item in items)


def test_items_become_visible_when_the_snapshot_after_them_completes(tmp_path: Path) -> None:
    # given items written before a snapshot's barrier and one after it
    p = sink(tmp_path)
    write(p, ["a", "b"])
    snapshot(p)
    write(p, ["c"])
    # then nothing is visible before the snapshot completes
    assert committed(tmp_path) == Counter()
    # when it completes, then exactly the items before its barrier are
    assert p.snapshot_commit_finish(True)
    assert committed(tmp_path) == lines("a", "b")
    # and the next snapshot and the end of the job commit the rest, in files of new names
    snapshot(p)
    write(p, ["d"])
    p.snapshot_commit_finish(True)
    assert committed(tmp_path) == lines("a", "b", "c")
    assert p.complete()
    p.close()
    assert committed(tmp_path) == lines("a", "b", "c", "d")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["0-0-0", "0-0-1", "0-0-2"]


def test_a_failed_snapshot_leaves_its_items_for_the_next_one(tmp_path: Path) -> None:
    # given a snapshot that fails after its items were prepared
    p = sink(tmp_path)
    write(p, ["a"])
    snapshot(p)
    p.snapshot_commit_finish(False)
    assert committed(tmp_path) == Counter()
    # when the job goes on and the next snapshot completes
    write(p, ["b"])
    entries = snapshot(p)
    p.snapshot_commit_finish(True)
    # then the items of both are committed once, and the second snapshot listed both transactions
    assert committed(tmp_path) == lines("a", "b")
    ((key, names),) = entries
    assert key == snapshot_keys.ProcessorKey(file_sink.SNAPSHOT_TAG, 0) and names == ("0-0-0", "0-0-1")
    p.close()


def test_a_job_ending_during_a_snapshot_waits_for_its_second_phase(tmp_path: Path) -> None:
    p = sink(tmp_path)
    write(p, ["a"])
    snapshot(p)
    write(p, ["b"])
    # when the input ends between the two phases, then the sink waits for the second phase
    assert not p.complete()
    assert not p.complete()
    assert committed(tmp_path) == Counter()
    # and once it came, completing commits everything
    p.snapshot_commit_finish(True)
    assert committed(tmp_path) == lines("a")
    assert p.complete()
    assert committed(tmp_path) == lines("a", "b")
    p.close()


def test_a_job_ending_after_a_failed_snapshot_commits_its_items_too(tmp_path: Path) -> None:
    p = sink(tmp_path)
    write(p, ["a"])
    snapshot(p)
    write(p, ["b"])
    assert not p.complete()
    p.snapshot_commit_finish(False)
    assert p.complete()
    p.close()
    assert committed(tmp_path) == lines("a", "b")
    assert temp_files(tmp_path) == []


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "killed"])
def test_a_crash_between_the_phases_commits_on_restore_from_that_snapshot(
    tmp_path: Path, closed: bool
) -> None:
    # given a snapshot prepared (and complete on every other processor), then items after its barrier
    p = sink(tmp_path)
    write(p, ["a", "b"])
    entries = snapshot(p)
    write(p, ["c"])
    # when the job fails before the second phase (the processor closed, or its process killed)
    if closed:
        p.close()
    # and restarts from that snapshot, replaying what came after the barrier
    restarted = restore(tmp_path, entries)
    assert committed(tmp_path) == lines("a", "b")
    write(restarted, ["c", "d"])
    assert restarted.complete()
    restarted.close()
    # then every item is committed once and no temporary file is left
    assert committed(tmp_path) == lines("a", "b", "c", "d")
    assert temp_files(tmp_path) == []


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "killed"])
def test_a_crash_before_a_snapshot_completed_discards_its_files_on_restore(
    tmp_path: Path, closed: bool
) -> None:
    # given snapshot 1 complete, then snapshot 2 prepared but never complete, then more items
    p = sink(tmp_path)
    write(p, ["a"])
    first = snapshot(p)
    p.snapshot_commit_finish(True)
    write(p, ["b"])
    snapshot(p)
    write(p, ["c"])
    if closed:
        p.close()
    assert len(temp_files(tmp_path)) == (1 if closed else 2)
    # when the job restarts from snapshot 1 and replays everything after its barrier
    restarted = restore(tmp_path, first)
    write(restarted, ["b", "c"])
    assert restarted.complete()
    restarted.close()
    # then the uncommitted files of the failed execution were deleted: every item once
    assert committed(tmp_path) == lines("a", "b", "c")
    assert temp_files(tmp_path) == []


@pytest.mark.parametrize(("saved_by", "restored_into"), [(3, 2), (2, 4), (3, 1)])
def test_a_restore_into_another_parallelism_commits_and_cleans_every_processors_files(
    tmp_path: Path, saved_by: int, restored_into: int
) -> None:
    # given processors that prepared a snapshot and wrote more before being killed
    entries: list[Entry] = []
    for index in range(saved_by):
        p = sink(tmp_path, index, saved_by)
        write(p, [f"{index}-before"])
        entries += snapshot(p)
        write(p, [f"{index}-after"])
    # when fewer or more processors restore (each given every entry) and get the replayed items
    restarted = [restore(tmp_path, entries, index, restored_into) for index in range(restored_into)]
    assert committed(tmp_path) == lines(*(f"{index}-before" for index in range(saved_by)))
    for index in range(saved_by):
        write(restarted[index % restored_into], [f"{index}-after"])
    for p in restarted:
        assert p.complete()
        p.close()
    # then every item is committed once and no processor's temporary file is left
    expected = [f"{index}-{when}" for index in range(saved_by) for when in ("before", "after")]
    assert committed(tmp_path) == lines(*expected)
    assert temp_files(tmp_path) == []


def test_a_restore_that_finds_a_transaction_already_committed_keeps_it(tmp_path: Path) -> None:
    # given a snapshot whose second phase ran before the job failed
    p = sink(tmp_path)
    write(p, ["a"])
    entries = snapshot(p)
    p.snapshot_commit_finish(True)
    p.close()
    # when the job restarts from it, then its file is neither lost nor written twice
    restarted = restore(tmp_path, entries)
    assert restarted.complete()
    restarted.close()
    assert committed(tmp_path) == lines("a")


def test_without_exactly_once_a_restore_appends_to_the_processors_file(tmp_path: Path) -> None:
    # given an at-least-once sink that wrote and saved a snapshot
    guarantee = config.ProcessingGuarantee.AT_LEAST_ONCE
    p = sink(tmp_path, guarantee=guarantee)
    write(p, ["a"])
    entries = snapshot(p)
    p.close()
    assert (tmp_path / "0").read_text(encoding="utf-8") == "<a>\n"
    # when it is restored and writes more, then the file keeps what it had (no temporary files)
    restarted = sink(tmp_path, guarantee=guarantee)
    restarted.restore_from_snapshot(Inbox(entries))
    write(restarted, ["b"])
    assert restarted.complete()
    restarted.close()
    assert (tmp_path / "0").read_text(encoding="utf-8") == "<a>\n<b>\n"
    # and a fresh job replaces it
    fresh = sink(tmp_path, guarantee=guarantee)
    write(fresh, ["c"])
    fresh.close()
    assert (tmp_path / "0").read_text(encoding="utf-8") == "<c>\n"


def test_a_stale_execution_closing_late_leaves_the_new_executions_file_alone(tmp_path: Path) -> None:
    # given a processor of an earlier run with the same execution id (its active file .0-0-1.tmp open)
    stale = sink(tmp_path)
    write(stale, ["a"])
    entries = snapshot(stale)
    assert stale.snapshot_commit_finish(True)
    write(stale, ["late"])
    # when the new execution restores, deletes the leftovers and begins a file of the same name
    fresh = restore(tmp_path, entries)
    write(fresh, ["replayed"])
    assert temp_files(tmp_path) == [".0-0-1.tmp"]
    # and the earlier run stops late
    stale.close()
    # then the new execution's file is still there and commits its items
    snapshot(fresh)
    assert fresh.snapshot_commit_finish(True)
    assert committed(tmp_path) == lines("a", "replayed")


def test_a_stale_executions_late_commit_does_not_publish_a_newer_executions_file(tmp_path: Path) -> None:
    # given an execution whose sink prepared a snapshot that never completed for it (its coordinator
    # was paused past the failure timeout and replaced), and the newer execution that replaced it:
    # it replays the items from an earlier state and deletes the stale temporary files as leftovers
    stale = sink(tmp_path, execution=0x51)
    write(stale, ["a"])
    snapshot(stale)
    fresh = sink(tmp_path, execution=0x52)
    write(fresh, ["a", "b"])
    # when the stale execution is told late that its snapshot completed, then its commit fails
    # (its file is gone) instead of renaming the newer execution's open transaction into place
    with pytest.raises(FileNotFoundError):
        stale.snapshot_commit_finish(True)
    assert committed(tmp_path) == Counter()
    stale.close()
    # and the newer execution commits every item once, under its own names
    snapshot(fresh)
    assert fresh.snapshot_commit_finish(True)
    assert committed(tmp_path) == lines("a", "b")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["0-52-0"]
