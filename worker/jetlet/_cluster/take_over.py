"""Taking over as coordinator: the job records and the event log loaded, the jobs run on.

:class:`~jetlet._cluster.job_coordinator.JobCoordinator` owns a :class:`TakeOver`
and delegates its ``take_over`` to it; it runs on the coordinator thread.

Theory of operation
-------------------
When the coordinator is gone (lost, or leaving gracefully) the next oldest
member takes over. It answers operations with "retry" (``ready`` false)
while it loads, from the replicated store, the job records and the event
log, both asynchronously on the store's thread: nothing blocks the
coordinator thread. Once both are there it restores the event log (so the
feed goes on from the same ids), records one ``member_left`` for the old
coordinator and a ``coordinator_changed`` event, and adopts the records:
each job that was running starts a new execution on the members there are,
from its last snapshot. The returned future completes once the partition
table is installed for those members (a coordinator that leaves gracefully
waits for it before it goes). Records that cannot be read are logged; the
jobs then stay unknown here rather than being guessed.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable, Mapping
from typing import Any

from jetlet import records
from jetlet._cluster import coordinator_thread, job_store, table_keeper
from jetlet._cluster import events as events_mod

log = logging.getLogger("jetlet._cluster.job_coordinator")  # its lines read as the coordinator's, as before

LOAD_TIMEOUT_S = 60.0
"""Longest wait for the records and the event log to load from the replicated store."""


class TakeOver:
    """Loads what the old coordinator kept and runs its jobs on (see the module doc).

    ``member_left(member, why)`` records a departure, ``adopt(states, why)`` knows and runs on
    the jobs of ``states``, ``set_ready(flag)`` says whether operations may be answered: the job
    coordinator's own.
    """

    def __init__(
        self,
        member_name: str,
        serial: coordinator_thread.Serial,
        store: job_store.JobStore,
        event_log: events_mod.EventLog,
        tables: table_keeper.TableKeeper,
        member_left: Callable[[str, str], None],
        adopt: Callable[[list[dict[str, Any]], str], int],
        set_ready: Callable[[bool], None],
    ) -> None:
        self._member_name = member_name
        self._serial = serial
        self._store = store
        self._events = event_log
        self._tables = tables
        self._member_left = member_left
        self._adopt = adopt
        self._set_ready = set_ready

    def take_over(self, old_coordinator: str) -> concurrent.futures.Future[dict[str, Any]]:
        """This member is the coordinator now: load the records and the event log, run the jobs on."""
        log.warning("coordinator %s left: %s takes over its jobs", old_coordinator, self._member_name)
        self._set_ready(False)
        taken: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        loading: dict[str, concurrent.futures.Future[Any]] = {
            "states": self._store.load_all(),
            "events": self._store.load_events(),
        }
        coordinator_thread.when_all(
            self._serial,
            loading,
            LOAD_TIMEOUT_S,
            lambda outcomes: self._loaded(old_coordinator, outcomes, taken),
        )
        return taken

    def _loaded(
        self,
        old_coordinator: str,
        outcomes: Mapping[str, Any],
        taken: concurrent.futures.Future[dict[str, Any]],
    ) -> None:
        self._set_ready(True)
        self._tables.ensure().add_done_callback(lambda _: taken.set_result({}))
        if isinstance(outcomes["events"], list):
            self._events.restore(outcomes["events"])
        self._member_left(old_coordinator, "the coordinator left the cluster")
        self._events.append(
            records.EventKind.COORDINATOR_CHANGED,
            member=self._member_name,
            reason=f"{old_coordinator} left",
        )
        states = outcomes["states"]
        if isinstance(states, BaseException):
            log.error("cannot read the job records after the coordinator left: %s", states)
            return
        self._adopt(states, "taking over")
