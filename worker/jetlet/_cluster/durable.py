"""Durable offload: complete snapshots written to a directory, so jobs survive the loss of the whole cluster.

The grid keeps snapshots in the members' memory; that survives
``backup_count`` members dying at once, not all of them. With a snapshot
directory (a Kubernetes PersistentVolume, or any mounted storage), the
coordinator also writes every complete snapshot there, and a cluster that
starts with the same directory resumes the jobs from them.

Layout: one folder per job, ``job-<id>/``, holding three map files in the
grid's checked format (each with its own magic, length and CRC-32): the
snapshot's ``data`` and ``broadcast`` maps, under their grid names, and the
job's record (``job``: its definition, config and last snapshot, which
names the other two). A new snapshot is written into a fresh temporary folder that then
replaces the job's folder by renames, so a crash mid-write leaves the
previous complete snapshot in place. A job that ends has its folder removed.

Reading back checks every file; damage is reported per job (the caller
records the job as failed with the reason) and never turned into state.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from jetlet._cluster import grid as grid_mod
from jetlet._cluster import grid_files, snapshot_data

log = logging.getLogger(__name__)

_PARTS = ("data", "broadcast")
_RECORD_MAP = "job"


class DurableSnapshots:
    """The snapshot directory of one cluster (used by its coordinator)."""

    def __init__(self, directory: str | Path, grid: grid_mod.Grid) -> None:
        self.directory = Path(directory)
        self._grid = grid

    def _folder(self, job_id: int) -> Path:
        return self.directory / f"job-{job_id}"

    def write(self, job_id: int, state: Mapping[str, Any]) -> None:
        """Write the job's last complete snapshot and record; the previous one stays until this is whole."""
        last = state.get("last_snapshot")
        if not last:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        temporary = self.directory / f".job-{job_id}-{uuid.uuid4().hex}.tmp"
        try:
            for part in _PARTS:
                self._grid.write_map_to_directory(f"{last['prefix']}/{part}", temporary)
            grid_files.write_entries_to_directory(_RECORD_MAP, {"state": dict(state)}, temporary)
            target = self._folder(job_id)
            old = self.directory / f".job-{job_id}-{uuid.uuid4().hex}.old"
            if target.exists():
                target.rename(old)
            temporary.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        except (OSError, grid_mod.GridError) as exc:
            log.error(
                "job %s: snapshot %s could not be offloaded to %s: %s",
                job_id,
                last["id"],
                self.directory,
                exc,
            )
            shutil.rmtree(temporary, ignore_errors=True)

    def forget(self, job_id: int) -> None:
        """The job has ended: it must not be resumed by a later cluster."""
        shutil.rmtree(self._folder(job_id), ignore_errors=True)

    def read_all(self) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
        """``(job id, record, problem)`` of every offloaded job; the snapshot is put back into the grid.

        ``record`` is None when the job's record itself cannot be read;
        ``problem`` says what is damaged (then nothing of that job was put).
        """
        if not self.directory.is_dir():
            return
        for folder in sorted(self.directory.glob("job-*")):
            try:
                job_id = int(folder.name.removeprefix("job-"))
            except ValueError:
                continue
            state: dict[str, Any] | None = None
            try:
                state = grid_files.read_map_from_directory(folder, _RECORD_MAP)["state"]
                assert state is not None
                prefix = state["last_snapshot"]["prefix"]
                parts = {
                    part: grid_files.read_map_from_directory(folder, f"{prefix}/{part}") for part in _PARTS
                }
            except (snapshot_data.SnapshotDataError, KeyError) as exc:
                yield job_id, state, str(exc)
                continue
            by_partition: dict[int, list[tuple[Any, Any]]] = {}
            for key, chunk in parts["data"].items():
                by_partition.setdefault(int(key[2]), []).append((key, chunk))
            self._grid.put_to_partitions(f"{prefix}/data", by_partition)
            self._grid.put(f"{prefix}/broadcast", parts["broadcast"])
            yield job_id, state, None
