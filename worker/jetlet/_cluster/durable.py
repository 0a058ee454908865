"""Durable offload: complete snapshots written to a directory, so jobs survive the loss of the whole cluster.

The grid keeps snapshots in the members' memory; that survives
``backup_count`` members dying at once, not all of them. With a snapshot
directory (a Kubernetes PersistentVolume, or any mounted storage), the
coordinator writes every job's record there when it is submitted, and every
complete snapshot after, and a cluster that starts with the same directory
resumes the jobs: from their last snapshot, or, a job with none yet, from
the beginning (its exactly-once sinks committed nothing before its first
snapshot; a job that was to start from an exported snapshot cannot, since
that was kept in the old cluster's memory only: it is listed as failed,
saying so — :func:`unresumable`). Without the record at submission, a
crash before the first snapshot's offload finished lost the job without a
word (``bench/chaos.py`` cluster-crash-durable seed 15).

Layout: per job, ``job-<id>``, a symbolic link to the folder of its last
offloaded snapshot, ``.job-<id>-<random>/``, which holds three map files in
the grid's checked format (each with its own magic, length and CRC-32): the
snapshot's ``data`` and ``broadcast`` maps, under their grid names, and the
job's record (``job``: its definition, config and last snapshot, which
names the other two). The folder written at submission holds the record
only (its last snapshot is None).

A new snapshot is written whole into a new folder (each file fsynced), then
one ``rename`` of a new link over ``job-<id>`` switches to it, and only then
is the previous folder removed: whatever moment a crash hits, ``job-<id>``
names one complete snapshot, the previous or the new one. (Replacing a
folder by two renames would leave a moment with neither, and the job would be
lost without a word.) Folders and links that no ``job-<id>`` names are what a
crash left mid-write: :meth:`DurableSnapshots.read_all` removes them — but
not one this process is writing (a coordinator reads the directory a few
heartbeats after it starts, maybe while it writes a job submitted
meanwhile: removing that folder left ``job-<id>`` naming nothing). A job
that ends has its link and folder removed. A ``job-<id>`` that is a folder
itself (written before the links) is read as it is and replaced by a link at
the next write.

A write that fails raises :class:`OffloadError`: the coordinator then keeps
the sinks' transactions of that snapshot pending instead of committing them,
so the directory never holds a snapshot older than what the sinks committed
(resuming from it would repeat their output).

Reading back checks every file; damage is reported per job (the caller
records the job as failed with the reason and the folder's name) and never
turned into state.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from jetlet._cluster import grid as grid_mod
from jetlet._cluster import grid_files, snapshot_data

log = logging.getLogger(__name__)

_PARTS = ("data", "broadcast")
_RECORD_MAP = "job"


class OffloadError(Exception):
    """A snapshot could not be written to the snapshot directory (the message says which and why)."""


class DurableSnapshots:
    """The snapshot directory of one cluster (used by its coordinator)."""

    def __init__(self, directory: str | Path, grid: grid_mod.Grid) -> None:
        self.directory = Path(directory)
        self._grid = grid
        self._lock = threading.Lock()
        """Orders a write's switch against :meth:`forget` (they run on different threads)."""
        self._ended: set[int] = set()
        """Jobs forgotten: a write of theirs still under way is dropped."""
        self._writing: set[str] = set()
        """The folders being written now (no leftovers: :meth:`read_all` keeps them)."""

    def _folder(self, job_id: int) -> Path:
        return self.directory / f"job-{job_id}"

    def write(self, job_id: int, state: Mapping[str, Any]) -> None:
        """Write the job's record and last snapshot (if any); the previous one stays until this is whole.

        Raises :class:`OffloadError` when it cannot (the previous snapshot is then still in place).
        """
        last = state.get("last_snapshot")
        folder = self.directory / f".job-{job_id}-{uuid.uuid4().hex}"
        with self._lock:
            self._writing.add(folder.name)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            for map_name in [f"{last['prefix']}/{part}" for part in _PARTS] if last else []:
                self._grid.write_map_to_directory(map_name, folder)
            grid_files.write_entries_to_directory(_RECORD_MAP, {"state": dict(state)}, folder)
            with self._lock:
                if job_id in self._ended:  # it ended while this was written: not resumable
                    shutil.rmtree(folder, ignore_errors=True)
                    return
                previous = self._point_to(job_id, folder)
        except (OSError, grid_mod.GridError) as exc:
            shutil.rmtree(folder, ignore_errors=True)
            what = f"snapshot {last['id']}" if last else "the record"
            raise OffloadError(
                f"job {job_id}: {what} could not be offloaded to {self.directory}: {exc}"
            ) from exc
        finally:
            with self._lock:
                self._writing.discard(folder.name)
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)

    def _point_to(self, job_id: int, folder: Path) -> Path | None:
        """Make ``job-<id>`` name ``folder`` in one rename; the folder it named before, if any."""
        link = self._folder(job_id)
        previous: Path | None = None
        if link.is_symlink():
            previous = self.directory / os.readlink(link)
        elif link.exists():  # a folder written before the links: set it aside, it goes once replaced
            previous = self.directory / f".job-{job_id}-{uuid.uuid4().hex}"
            link.rename(previous)
        new_link = self.directory / f".job-{job_id}-{uuid.uuid4().hex}.link"
        os.symlink(folder.name, new_link)
        os.replace(new_link, link)
        _fsync_directory(self.directory)
        return previous

    def forget(self, job_id: int) -> Path | None:
        """The job has ended: no later cluster may resume it, and no later write of it is kept.

        Only the name goes here (quick: the coordinator calls this before it reports the job
        ended); the folder it named is returned, for the caller to remove when convenient (a
        crash before that leaves a leftover, which :meth:`read_all` removes).
        """
        with self._lock:
            self._ended.add(job_id)
            link = self._folder(job_id)
            if link.is_symlink():
                target = self.directory / os.readlink(link)
                link.unlink()
                return target
            if link.exists():  # a folder written before the links
                aside = self.directory / f".job-{job_id}-{uuid.uuid4().hex}"
                link.rename(aside)
                return aside
            return None

    def read_all(self) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
        """``(job id, record, problem)`` of every offloaded job; the snapshot is put back into the grid.

        ``record`` is None when the job's record itself cannot be read;
        ``problem`` says what is damaged (then nothing of that job was put). A job
        offloaded before its first snapshot has a record whose ``last_snapshot`` is None.
        """
        if not self.directory.is_dir():
            return
        self._remove_leftovers()
        for folder in sorted(self.directory.glob("job-*")):
            try:
                job_id = int(folder.name.removeprefix("job-"))
            except ValueError:
                continue
            state: dict[str, Any] | None = None
            try:
                if not folder.is_dir():
                    raise snapshot_data.SnapshotDataError(f"{folder} names no folder")
                state = grid_files.read_map_from_directory(folder, _RECORD_MAP)["state"]
                assert state is not None
                if state["last_snapshot"] is None:  # written at submission: it starts from the beginning
                    yield job_id, state, None
                    continue
                prefix = state["last_snapshot"]["prefix"]
                parts = {
                    part: grid_files.read_map_from_directory(folder, f"{prefix}/{part}") for part in _PARTS
                }
            except (snapshot_data.SnapshotDataError, KeyError, TypeError) as exc:
                yield job_id, state, f"{exc} (in {folder})"
                continue
            by_partition: dict[int, list[tuple[Any, Any]]] = {}
            for key, chunk in parts["data"].items():
                by_partition.setdefault(int(key[2]), []).append((key, chunk))
            self._grid.put_to_partitions(f"{prefix}/data", by_partition)
            self._grid.put(f"{prefix}/broadcast", parts["broadcast"])
            yield job_id, state, None

    def _remove_leftovers(self) -> None:
        """Remove the folders and links that no ``job-<id>`` names: writes a crash cut short.

        Under the lock, so that no write of this process switches its link meanwhile.
        """
        with self._lock:
            self._remove_unnamed()

    def _remove_unnamed(self) -> None:
        named = {os.readlink(link) for link in self.directory.glob("job-*") if link.is_symlink()}
        for path in self.directory.glob(".job-*"):
            if path.name in named or path.name in self._writing:
                continue
            log.info("removing %s: a snapshot write that did not finish", path)
            if path.is_symlink() or not path.is_dir():
                path.unlink(missing_ok=True)
            else:
                shutil.rmtree(path, ignore_errors=True)


def unresumable(state: Mapping[str, Any]) -> str | None:
    """Why a job read back from the directory cannot run on in a new cluster, or None.

    A job with no snapshot of its own starts from the beginning, unless it was to start
    from an exported snapshot (``initial_snapshot_name``): that lived in the memory of
    the cluster that ended.

    >>> unresumable({"last_snapshot": None, "restore_from": None}) is None
    True
    >>> print(unresumable({"last_snapshot": None, "restore_from": {"name": "before-v2"}}))
    it was to start from the exported snapshot 'before-v2', which the cluster that ended kept ...
    """
    exported = state.get("restore_from")
    if state.get("last_snapshot") is not None or not exported:
        return None
    return (
        f"it was to start from the exported snapshot {exported.get('name')!r}, which the cluster that "
        "ended kept in its memory only (exported snapshots are not written to the snapshot directory)"
    )


def _fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
