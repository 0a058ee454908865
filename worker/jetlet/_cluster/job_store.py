"""Where the coordinator keeps what must outlive it: job records, the event log, snapshot data.

Theory of operation
-------------------
The coordinator thread never waits on the network, but its state must be
replicated before a member's death can lose it. :class:`GridJobStore` puts
that state into the replicated grid (primary and ``backup_count`` backups):

* job records in the map ``jobs`` and events in ``events/<block>`` maps are
  written by one *ordered* writer thread (:meth:`save` and
  :meth:`save_event` return at once; a later state of a job is never
  overwritten by an earlier one); a coordinator that takes over reads them
  back with :meth:`load_all` and :meth:`load_events`. A write never runs
  while a partition table is being installed (the table keeper's
  ``install_lock``: a write racing its partition's transfer could be lost),
  and one that fails because a replica just died is retried, backing off,
  once the table has changed;
* the slower bulk work — deleting a superseded snapshot's maps, copying a
  snapshot under an exported name, offloading a job's record (at
  submission) and each complete snapshot to the durable directory — runs on
  a small pool and reports through futures.

The job and snapshot coordinators depend on the :class:`JobStore` protocol
only, so tests give them an in-memory store.
"""

from __future__ import annotations

import concurrent.futures
import logging
import shutil
import threading
from collections.abc import Callable
from typing import Any, Protocol

from jetlet import records
from jetlet._cluster import durable, events
from jetlet._cluster import grid as grid_mod

log = logging.getLogger(__name__)

JOBS_MAP = "jobs"
WRITE_ATTEMPTS = 12
"""A record or event write that fails (a replica died) is retried, backing off to 1 s: about 8 s."""
EXPORTED_META_PREFIX = "exported-meta/"


class JobStore(Protocol):
    """What the coordinator keeps outside itself (see the module doc)."""

    def save(self, state: dict[str, Any]) -> concurrent.futures.Future[bool]:
        """Replicate a job's record (ordered, not waiting); the future: True once done, False if failed."""
        ...

    def save_event(self, event: records.JobEvent) -> concurrent.futures.Future[bool]:
        """Replicate an event of the feed (ordered, without waiting); the future tells when."""
        ...

    def load_all(self) -> concurrent.futures.Future[list[dict[str, Any]]]: ...

    def load_events(self) -> concurrent.futures.Future[list[records.JobEvent]]: ...

    def flush(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` until every record and event saved so far is replicated."""
        ...

    def delete_snapshot(self, prefix: str) -> None:
        """Drop a snapshot's data (a failed one, or one a newer snapshot superseded)."""
        ...

    def offload(self, job_id: int, state: dict[str, Any]) -> concurrent.futures.Future[None]:
        """Write the job's record and last snapshot (if any) to the durable directory, if there is one."""
        ...

    def forget_offloaded(self, job_id: int) -> None:
        """The job ended: a later cluster must not resume it (done before this returns)."""
        ...

    def export(self, source_prefix: str, meta: dict[str, Any]) -> concurrent.futures.Future[None]:
        """Copy a snapshot's data under ``meta['prefix']`` and record ``meta`` by its ``name``."""
        ...

    def exported(self, name: str) -> concurrent.futures.Future[dict[str, Any] | None]: ...

    def list_exported(self) -> concurrent.futures.Future[list[dict[str, Any]]]: ...

    def delete_exported(self, name: str) -> concurrent.futures.Future[bool]: ...


class GridJobStore:
    """A :class:`JobStore` in the replicated grid (and the durable directory, when set)."""

    def __init__(
        self,
        grid: grid_mod.Grid,
        ensure_table: Callable[[], object],
        offload: durable.DurableSnapshots | None = None,
        install_lock: threading.RLock | None = None,
    ) -> None:
        self._grid = grid
        self._ensure_table = ensure_table
        self._install_lock = install_lock or threading.RLock()
        self._offload = offload
        self._ordered = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jetlet-job-store")
        self._bulk = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jetlet-snapshot-store")
        """One thread: a snapshot is offloaded before a newer one's completion can delete its data."""
        self._closed = threading.Event()

    def _ordered_write(self, what: str, write: Callable[[], None]) -> concurrent.futures.Future[bool]:
        def run() -> bool:
            delay = 0.05
            for attempt in range(WRITE_ATTEMPTS):
                try:
                    with self._install_lock:  # never while partitions move
                        write()
                    return True
                except grid_mod.GridError as exc:  # a replica just died: the table changes, then retry
                    if attempt + 1 == WRITE_ATTEMPTS or self._closed.is_set():
                        log.warning("%s could not be replicated: %s", what, exc)
                        return False
                    self._closed.wait(delay)  # a back-off between attempts
                    delay = min(delay * 2, 1.0)
            return False

        if self._closed.is_set():
            closed: concurrent.futures.Future[bool] = concurrent.futures.Future()
            closed.set_result(False)
            return closed
        return self._ordered.submit(run)

    def save(self, state: dict[str, Any]) -> concurrent.futures.Future[bool]:
        return self._ordered_write(
            f"job {state['name']}'s record", lambda: self._grid.put(JOBS_MAP, [(state["id"], state)])
        )

    def save_event(self, event: records.JobEvent) -> concurrent.futures.Future[bool]:
        return self._ordered_write(
            f"event {event.id}",
            lambda: self._grid.put(events.block_of(event.id), [(event.id, event.to_dict())]),
        )

    def flush(self, timeout_s: float) -> None:
        if not self._closed.is_set():
            self._ordered.submit(lambda: None).result(timeout_s)

    def load_all(self) -> concurrent.futures.Future[list[dict[str, Any]]]:
        def load() -> list[dict[str, Any]]:
            self._ensure_table()
            return list(self._grid.get_all(JOBS_MAP).values())

        return self._ordered.submit(load)

    def load_events(self) -> concurrent.futures.Future[list[records.JobEvent]]:
        def load() -> list[records.JobEvent]:
            found: list[records.JobEvent] = []
            for name in self._grid.map_names("events/"):
                found += [records.JobEvent.from_dict(e) for e in self._grid.get_all(name).values()]
            return sorted(found, key=lambda e: e.id)

        return self._ordered.submit(load)

    def delete_snapshot(self, prefix: str) -> None:
        def delete() -> None:
            try:
                self._grid.delete_maps(prefix + "/")
            except grid_mod.GridError as exc:
                log.warning("could not delete snapshot data %s: %s", prefix, exc)

        self._bulk.submit(delete)

    def offload(self, job_id: int, state: dict[str, Any]) -> concurrent.futures.Future[None]:
        if self._offload is not None:
            return self._bulk.submit(self._offload.write, job_id, state)
        nothing: concurrent.futures.Future[None] = concurrent.futures.Future()
        nothing.set_result(None)
        return nothing

    def forget_offloaded(self, job_id: int) -> None:
        if self._offload is not None:
            folder = self._offload.forget(job_id)  # at once: the job is no longer resumable
            if folder is not None:
                self._bulk.submit(shutil.rmtree, folder, True)

    def export(self, source_prefix: str, meta: dict[str, Any]) -> concurrent.futures.Future[None]:
        def copy() -> None:
            name, target = meta["name"], meta["prefix"]
            self._grid.delete_maps(f"{target}/")
            for part in ("data", "broadcast"):
                self._grid.copy_map(f"{source_prefix}/{part}", f"{target}/{part}")
            self._grid.put(f"{EXPORTED_META_PREFIX}{name}/meta", [("meta", meta)])

        return self._bulk.submit(copy)

    def exported(self, name: str) -> concurrent.futures.Future[dict[str, Any] | None]:
        return self._bulk.submit(self._exported, name)

    def _exported(self, name: str) -> dict[str, Any] | None:
        if not isinstance(name, str) or not name or "/" in name:
            return None
        self._ensure_table()
        found: dict[str, Any] | None = self._grid.get_all(f"{EXPORTED_META_PREFIX}{name}/meta").get("meta")
        return found

    def list_exported(self) -> concurrent.futures.Future[list[dict[str, Any]]]:
        def read() -> list[dict[str, Any]]:
            self._ensure_table()
            found = [self._grid.get_all(m).get("meta") for m in self._grid.map_names(EXPORTED_META_PREFIX)]
            return sorted((e for e in found if e), key=lambda e: e["exported_time"])

        return self._bulk.submit(read)

    def delete_exported(self, name: str) -> concurrent.futures.Future[bool]:
        def delete() -> bool:
            if self._exported(name) is None:
                return False
            self._grid.delete_maps(f"{EXPORTED_META_PREFIX}{name}/")
            self._grid.delete_maps(f"exported/{name}/")
            return True

        return self._bulk.submit(delete)

    def close(self) -> None:
        self._closed.set()
        self._ordered.shutdown(wait=True, cancel_futures=False)
        self._bulk.shutdown(wait=True, cancel_futures=True)
