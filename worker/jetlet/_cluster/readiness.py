"""Readiness: whether a member can take part in jobs (``GET /ready``), beside being alive (``/health``).

Theory of operation
-------------------
A member is *ready* when three things hold; ``/ready`` answers 200 then,
and 503 with a body naming each that is missing:

``membership``
    The member is settled in a cluster: it is in a member list with other
    members (it joined, or others joined it), or it is alone and has
    decided to be. It decides so once discovery has run without a problem
    and either found no other member to ask, or it has asked the seeds it
    found to admit it (a ``join`` every heartbeat) for ``settle_after_ms``
    (the member's ``failure_timeout_millis``) without being admitted.
    Membership's rule that of two lone members the older admits the
    younger means a member that has heard nothing for that long is the
    first of its cluster: a StatefulSet started in order needs its first
    pod Ready before it starts the second, and gets it. While discovery
    fails (say, the Kubernetes API answers 403) the member does not decide:
    it reports the problem instead. Once settled, a member stays settled,
    even when its peers leave and it is alone again (a cluster of one).
``coordinator``
    It knows its coordinator (the oldest member of its list; unknown while
    not settled) and, when that is another member, has its data
    connection to it (the job protocol travels on it).
``partition_table``
    Its partition table is derived from its current member list.

:class:`Readiness` is sans-IO: the member tells it after each discovery
round (:meth:`Readiness.discovered`) and asks it for a report
(:meth:`Readiness.report`), passing its membership, its table's members
and whether a data connection is up; time is a parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jetlet._cluster import membership as membership_mod


class Readiness:
    """Decides whether one member is ready, from what its membership, discovery and table show."""

    def __init__(self, settle_after_ms: int) -> None:
        self.settle_after_ms = settle_after_ms
        self.settled = False
        """Whether the member has joined a cluster or decided to be alone (it stays so)."""
        self._looked = False
        self._problem = ""
        self._asking_since: int | None = None

    def discovered(self, membership: membership_mod.Membership, problem: str, now_ms: int) -> None:
        """Note a discovery round: its seeds are ``membership.seeds``; ``problem`` is why it failed, or ''."""
        self._looked = True
        self._problem = problem
        self._update(membership, now_ms)

    def _update(self, membership: membership_mod.Membership, now_ms: int) -> None:
        if self.settled:
            return
        if not membership.is_alone:
            self.settled = True
        elif not self._looked or self._problem:
            self._asking_since = None
        elif not membership.seeds:
            self.settled = True
        else:
            if self._asking_since is None:
                self._asking_since = now_ms
            self.settled = now_ms - self._asking_since >= self.settle_after_ms

    def _membership_problem(self, membership: membership_mod.Membership, now_ms: int) -> str:
        if not self._looked:
            return "discovery has not run yet"
        if self._problem:
            return f"discovery fails: {self._problem}"
        waited = 0 if self._asking_since is None else now_ms - self._asking_since
        seeds = ", ".join(membership.seeds)
        return f"asking {seeds} to admit it for {waited} ms of {self.settle_after_ms} ms"

    def report(
        self,
        membership: membership_mod.Membership,
        table_members: Sequence[str] | None,
        connected: Callable[[str], bool],
        now_ms: int,
    ) -> dict[str, Any]:
        """``{"ready", "member", "coordinator", "members", "version", "missing": {what: why}}``."""
        self._update(membership, now_ms)
        listed = membership.member_list
        coordinator = listed.coordinator.name
        missing: dict[str, str] = {}
        if not self.settled:
            missing["membership"] = self._membership_problem(membership, now_ms)
            missing["coordinator"] = "not known before the member has joined or decided to be alone"
        elif coordinator != membership.local.name and not connected(coordinator):
            missing["coordinator"] = f"no data connection to the coordinator {coordinator} yet"
        if table_members is None or tuple(table_members) != listed.names:
            missing["partition_table"] = f"not yet derived from member list version {listed.version}"
        return {
            "ready": not missing,
            "member": membership.local.name,
            "coordinator": coordinator if self.settled else None,
            "members": len(listed.members),
            "version": listed.version,
            "missing": missing,
        }
