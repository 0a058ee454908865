"""The snapshot directory never loses a job to a crash mid-write, and never keeps a write that failed.

Issue 15 (item 7): replacing a job's folder by two renames left a moment with
neither (a crash there lost the job without a word), and a write that failed
was only logged (the sinks then committed past the directory's snapshot).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from jetlet._cluster import durable, grid_files
from jetlet._cluster.grid import GridError


class FakeGrid:
    """The grid's side of offloading: maps to write out, and what a read-back puts."""

    def __init__(self) -> None:
        self.maps: dict[str, dict[Any, Any]] = {}
        self.fail: BaseException | None = None
        self.put_back: dict[str, Any] = {}

    def write_map_to_directory(self, map_name: str, directory: Path | str) -> Path:
        if self.fail is not None:
            raise self.fail
        return grid_files.write_entries_to_directory(map_name, self.maps.get(map_name, {}), directory)

    def put_to_partitions(self, map_name: str, entries: Mapping[int, Iterable[tuple[Any, Any]]]) -> None:
        self.put_back[map_name] = {p: list(pairs) for p, pairs in entries.items()}

    def put(self, map_name: str, entries: Mapping[Any, Any]) -> None:
        self.put_back[map_name] = dict(entries)


def _state(snapshot_id: int) -> dict[str, Any]:
    return {
        "id": 7,
        "name": "counts",
        "last_snapshot": {"id": snapshot_id, "prefix": f"snapshot/7/{snapshot_id}"},
    }


def _offload(grid: FakeGrid, store: durable.DurableSnapshots, snapshot_id: int) -> None:
    prefix = f"snapshot/7/{snapshot_id}"
    grid.maps[f"{prefix}/data"] = {("count", "m1", 3): f"data of {snapshot_id}".encode()}
    grid.maps[f"{prefix}/broadcast"] = {}
    store.write(7, _state(snapshot_id))


def _resumable(store: durable.DurableSnapshots) -> list[tuple[int, int | None, str | None]]:
    return [
        (job_id, state["last_snapshot"]["id"] if state and state["last_snapshot"] else None, problem)
        for job_id, state, problem in store.read_all()
    ]


@pytest.fixture
def grid() -> FakeGrid:
    return FakeGrid()


@pytest.fixture
def store(grid: FakeGrid, tmp_path: Path) -> durable.DurableSnapshots:
    return durable.DurableSnapshots(tmp_path / "snapshots", grid)  # type: ignore[arg-type]


def test_each_write_replaces_the_last_and_leaves_one_folder(
    grid: FakeGrid, store: durable.DurableSnapshots
) -> None:
    _offload(grid, store, 1)
    _offload(grid, store, 2)

    assert _resumable(store) == [(7, 2, None)]
    assert grid.put_back["snapshot/7/2/data"] == {3: [(("count", "m1", 3), b"data of 2")]}
    assert len([p for p in store.directory.iterdir() if p.is_dir() and not p.is_symlink()]) == 1


def test_a_crash_before_the_switch_leaves_the_previous_snapshot_whole(
    grid: FakeGrid, store: durable.DurableSnapshots, monkeypatch: pytest.MonkeyPatch
) -> None:
    _offload(grid, store, 1)

    def crash(*_: object) -> None:
        raise OSError("the machine stopped here")

    monkeypatch.setattr(durable.os, "replace", crash)  # the new folder is written, the link not switched
    with pytest.raises(durable.OffloadError, match=r"job 7: snapshot 2 could not be offloaded.*stopped here"):
        _offload(grid, store, 2)
    monkeypatch.undo()

    assert _resumable(store) == [(7, 1, None)]
    assert sorted(p.name.startswith(".job-7-") for p in store.directory.iterdir()) == [False, True]


def test_folders_and_links_of_writes_a_crash_cut_short_are_removed_on_reading(
    grid: FakeGrid, store: durable.DurableSnapshots
) -> None:
    _offload(grid, store, 1)
    (store.directory / ".job-7-cut-short").mkdir()
    os.symlink(".job-7-cut-short", store.directory / ".job-7-cut-short.link")

    assert _resumable(store) == [(7, 1, None)]
    assert sorted(p.name for p in store.directory.iterdir() if p.name.startswith(".job-7-cut")) == []


def test_a_failed_write_raises_and_keeps_the_previous_snapshot(
    grid: FakeGrid, store: durable.DurableSnapshots
) -> None:
    _offload(grid, store, 1)
    grid.fail = GridError("partition 3 has no replica left")

    with pytest.raises(durable.OffloadError, match="partition 3 has no replica left"):
        _offload(grid, store, 2)

    assert _resumable(store) == [(7, 1, None)]


def test_a_folder_written_before_the_links_is_read_and_then_replaced(
    grid: FakeGrid, store: durable.DurableSnapshots
) -> None:
    _offload(grid, store, 1)
    link = store.directory / "job-7"
    target = store.directory / os.readlink(link)
    link.unlink()
    target.rename(link)  # the old layout: job-7 is the folder itself

    assert _resumable(store) == [(7, 1, None)]
    _offload(grid, store, 2)
    assert link.is_symlink() and _resumable(store) == [(7, 2, None)]


def test_a_damaged_record_is_reported_with_its_folder(
    grid: FakeGrid, store: durable.DurableSnapshots
) -> None:
    _offload(grid, store, 1)
    record = grid_files.map_file_path(store.directory / "job-7", "job")
    record.write_bytes(record.read_bytes()[:-3])

    [(job_id, state, problem)] = list(store.read_all())

    assert job_id == 7 and state is None
    assert problem is not None and "job-7" in problem


def test_an_ended_job_is_not_resumed(grid: FakeGrid, store: durable.DurableSnapshots) -> None:
    _offload(grid, store, 1)

    folder = store.forget(7)

    assert folder is not None and folder.is_dir()  # the caller removes it when convenient
    assert _resumable(store) == [] and list(store.directory.iterdir()) == []  # or the next reading


def test_a_write_that_finishes_after_the_job_ended_is_dropped(
    grid: FakeGrid, store: durable.DurableSnapshots
) -> None:
    _offload(grid, store, 1)
    store.forget(7)

    _offload(grid, store, 2)  # a snapshot's offload that was under way when the job ended

    assert _resumable(store) == []


def _submitted() -> dict[str, Any]:
    return {"id": 7, "name": "counts", "last_snapshot": None, "restore_from": None}


def test_a_job_written_at_submission_is_read_back_with_no_snapshot(
    grid: FakeGrid, store: durable.DurableSnapshots
) -> None:
    store.write(7, _submitted())  # the record only: the job has no snapshot yet

    [(job_id, state, problem)] = list(store.read_all())

    assert (job_id, problem) == (7, None)
    assert state == _submitted() and durable.unresumable(state) is None  # it starts from the beginning
    assert grid.put_back == {}


def test_a_crash_during_the_first_snapshots_write_leaves_the_job_to_start_from_the_beginning(
    grid: FakeGrid, store: durable.DurableSnapshots
) -> None:
    # found by bench/chaos.py (cluster-crash-durable seed 15): the whole cluster was killed while
    # the job's first snapshot was being written; the new cluster removed the cut-short folder
    # and, with nothing else of the job in the directory, had no record of it at all
    store.write(7, _submitted())
    cut_short = store.directory / ".job-7-first-snapshot"  # what the crash left of the first write
    grid_files.write_entries_to_directory("snapshot/7/1/data", {("count", "m1", 3): b"data of 1"}, cut_short)

    assert _resumable(store) == [(7, None, None)]
    assert not cut_short.exists() and grid.put_back == {}


def test_a_job_that_was_to_start_from_an_exported_snapshot_cannot_run_on_and_says_why(
    grid: FakeGrid, store: durable.DurableSnapshots
) -> None:
    store.write(7, {**_submitted(), "restore_from": {"name": "before-v2", "id": 4, "prefix": "exported/x"}})

    [(_, state, problem)] = list(store.read_all())

    assert problem is None and state is not None
    assert "'before-v2'" in (durable.unresumable(state) or "")
    _offload(grid, store, 5)  # once it has a snapshot of its own, that is what it resumes from
    [(_, state, _)] = list(store.read_all())
    assert state is not None and durable.unresumable(state) is None


def test_reading_the_directory_while_this_process_writes_a_job_keeps_that_write(
    grid: FakeGrid, store: durable.DurableSnapshots
) -> None:
    # a coordinator reads the directory a few heartbeats after it starts, maybe while it writes a
    # job submitted meanwhile; reading removed that write's folder as a leftover, and job-7 then
    # named no folder (the job was listed FAILED as unreadable)
    _offload(grid, store, 1)
    write = grid.write_map_to_directory

    def read_meanwhile(map_name: str, directory: Path | str) -> Path:
        written = write(map_name, directory)
        assert _resumable(store) == [(7, 1, None)]  # the startup read, in the middle of the write
        return written

    grid.write_map_to_directory = read_meanwhile  # type: ignore[method-assign]
    _offload(grid, store, 2)

    assert _resumable(store) == [(7, 2, None)]
