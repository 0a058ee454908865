"""Auto-scaling onto members that join: jobs restart to use them, once, after a delay.

:class:`~jetlet._cluster.job_coordinator.JobCoordinator` owns a :class:`ScaleUp`
and tells it when members join; it runs on the coordinator thread.

Theory of operation
-------------------
When members join and some running job could grow onto them (it runs, is not
stopping, no member has finished its share, it has ``auto_scaling``, and a
live member is not among its members), one timer is set for
``scale_up_delay_millis`` (Jet's ``scaleUpDelayMillis``): members that join
meanwhile are taken along by the same restart, so a rolling start does not
restart the jobs once per member. When the timer fires, every job that can
still grow is restarted (from its last snapshot, as after a member loss but
losing nothing it had committed); the restart plans the new execution on
every live member.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from jetlet._cluster import coordinator_thread, members_view
from jetlet._cluster.job_records import JobEntry, JobTable, Status, about, named

log = logging.getLogger(__name__)


class ScaleUp:
    """Restarts the jobs that can grow onto members that joined, after a delay (see the module doc).

    ``restart(entry, reason)`` stops an execution for a restart: the job coordinator's.
    """

    def __init__(
        self,
        serial: coordinator_thread.Serial,
        jobs: JobTable,
        members: members_view.MembersView,
        delay_s: float,
        restart: Callable[[JobEntry, str], None],
    ) -> None:
        self._serial = serial
        self._jobs = jobs
        self._members = members
        self._delay_s = delay_s
        self._restart = restart
        self._timer: coordinator_thread.Cancellable | None = None

    def joined(self) -> None:
        """Members joined: set the timer if a job can grow onto them and none is set."""
        if self._timer is None and any(self._can_grow(e) for e in self._jobs.active()):
            self._timer = self._serial.call_later(self._delay_s, self._rescale)

    def cancel(self) -> None:
        """Drop a pending rescale (this member stops coordinating)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _can_grow(self, entry: JobEntry) -> bool:
        live = set(self._members.live())
        return (
            entry.status is Status.RUNNING
            and entry.stopping is None
            and not entry.done  # a member already finished its share: the job is ending, let it
            and not entry.final_commit  # (jetlet._cluster.job_ending) likewise
            and bool(entry.config.get("auto_scaling", True))
            and bool(live - set(entry.members))
        )

    def _rescale(self) -> None:
        self._timer = None
        for entry in [e for e in self._jobs.active() if self._can_grow(e)]:
            log.info("%s: restarting to use the members that joined", named(entry), extra=about(entry))
            self._restart(entry, "the job is rescaled onto members that joined")
