"""The end of an exactly-once execution, granted by the coordinator in two steps.

Theory of operation
-------------------
A job restarts from its last complete snapshot, and that is exact only while
the snapshot holds every tasklet's state and nothing beyond it is final. Two
things break that at the end of an execution: a tasklet that ended saves
nothing into later snapshots (a restore from one would replay its source, or
refuse the incomplete positions), and a sink commits its last transactions
in ``complete()``, beyond every snapshot (a restart would write them again).
Before this, a member lost while the others' sinks committed their last
output — or after its own did, before it reported done — restarted the job
from its last snapshot, and it COMPLETED with that output twice (issue 15,
item 5; ``bench/chaos.py`` two-kills-backup1 seed 16: 2,937 items).

So each step waits for the coordinator (:mod:`jetlet._execution.snapshots`,
*Ending*): the first member to need it sends ``ending`` with ``what``, and
:meth:`JobEnding.on_ending` runs on the coordinator thread:

* ``end`` (a source completed; sources end once granted): granted at once,
  and snapshots go on. A job's sources need not end together: a batch side
  input (the build side of a hash join, a dimension table) completes while
  the streams it joins run on for ever, and those need their snapshots (an
  exactly-once sink commits nothing without them). An earlier version
  stopped taking snapshots at the first ``end``, and such a job never
  committed anything again. A restore from a snapshot taken after some
  sources ended restores what they saved (a source that saved positions and
  ended is refused by name, the job FAILS saying why: not wrong).
* ``final_commit`` (a sink that received items is about to commit its last
  output in ``complete()``): the job's ``final_commit`` is set (no snapshot
  is started for the execution from then on) and its record
  saved in the replicated store — so that a coordinator that takes over
  knows it too — and granted once that is kept (``granted: False`` while it
  is not: the member asks again, and after :data:`SAVE_ATTEMPTS` failed
  saves in a row the job fails, saying why, rather than wait for ever). From then on the job never restarts: a
  member lost, or a lost connection, fails it saying why
  (:func:`cannot_restart`), as does a coordinator that takes over; a member
  that leaves gracefully lets it end first, and suspend and restart are
  refused.

A stale or stopping execution is never granted anything. A job whose
sources never complete never gets there; one that loses no member in its
last moments ends as before.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable
from typing import Any

from jetlet._cluster import control, coordinator_thread, job_store
from jetlet._cluster.control import Dispatch, Operation
from jetlet._cluster.job_records import JobEntry, Status, about, named

log = logging.getLogger(__name__)

SAVE_TIMEOUT_S = 30.0
"""Longest the final commit waits for its record to be kept before it answers 'not yet'."""
SAVE_ATTEMPTS = 20
"""Failed saves of that record in a row (each a member asking again) after which the job fails."""


def cannot_restart(entry: JobEntry, why: str) -> str:
    """Why a job whose sinks commit their final output fails rather than restart (``why``: what happened)."""
    source = f"snapshot {entry.last_snapshot['id']}" if entry.last_snapshot else "the start"
    return (
        f"{why}, after its sinks had begun committing their final output (the job was ending): "
        f"a restart from {source} could repeat output that is committed, so the job fails instead "
        "(exactly-once)"
    )


class JobEnding:
    """Grants executions their end, in two steps (see the module doc)."""

    def __init__(
        self,
        serial: coordinator_thread.Serial,
        channel: control.ControlChannel,
        store: job_store.JobStore,
        execution: Callable[[int], JobEntry | None],
        fail: Callable[[JobEntry, str, str], object],
    ) -> None:
        self._serial = serial
        self._store = store
        self._execution = execution
        self._fail = fail
        self._unkept: dict[int, int] = {}
        """Per execution: the record of its final commit not kept so many times in a row."""
        channel.register(Operation.ENDING, self._on_ending, Dispatch.INLINE)

    def _on_ending(self, peer: str, body: dict[str, Any]) -> concurrent.futures.Future[dict[str, Any]]:
        answer: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        self._serial.submit(self.on_ending, body["execution_id"], body.get("what", "end"), answer)
        return answer

    def on_ending(
        self, execution_id: int, what: str, answer: concurrent.futures.Future[dict[str, Any]]
    ) -> None:
        """Grant ``what`` (``end``, ``final_commit``) to ``execution_id`` if it is current (module doc)."""
        entry = self._execution(execution_id)
        if (
            entry is None
            or entry.execution_id != execution_id
            or entry.status is not Status.RUNNING
            or entry.stopping is not None
        ):
            answer.set_result({"granted": False})
            return
        if what != "final_commit":
            answer.set_result({"granted": True})
            return
        if not entry.final_commit:
            entry.final_commit = True
            log.info("%s: its sinks commit their final output", named(entry), extra=about(entry))
        kept = self._store.save(entry.state())
        coordinator_thread.when_all(
            self._serial,
            {"record": kept},
            SAVE_TIMEOUT_S,
            lambda outcomes: self._answer(entry, execution_id, outcomes["record"], answer),
        )

    def _answer(
        self,
        entry: JobEntry,
        execution_id: int,
        outcome: Any,
        answer: concurrent.futures.Future[dict[str, Any]],
    ) -> None:
        if outcome is True:
            self._unkept.pop(execution_id, None)
        else:
            log.warning(
                "%s: the record of its final commit was not kept (%s); its sinks wait",
                named(entry),
                outcome,
                extra=about(entry),
            )
            self._unkept[execution_id] = self._unkept.get(execution_id, 0) + 1
            if self._unkept[execution_id] >= SAVE_ATTEMPTS:
                del self._unkept[execution_id]
                why = (
                    f"the record of its final commit could not be kept ({SAVE_ATTEMPTS} attempts): {outcome}"
                )
                self._fail(entry, why, "")
        granted = outcome is True and entry.execution_id == execution_id and entry.stopping is None
        answer.set_result({"granted": granted})
