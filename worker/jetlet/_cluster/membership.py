"""Cluster membership: the member list, its version, the coordinator and the failure detector.

Theory of operation
-------------------
:class:`Membership` is sans-IO: it never touches a socket. The member feeds
it what arrives (:meth:`Membership.receive`) and the passing of time
(:meth:`Membership.tick`), and sends the :class:`Outgoing` messages it
returns. Every message is a small dict (msgpack- and JSON-friendly) with a
``kind``: ``join`` (a member asks to be added), ``members`` (a member list
being published) and ``heartbeat``. The adapter that carries them is the
member's business: the data-port Transport (HEARTBEAT and CONTROL frames)
or, until that is wired, authenticated REST calls.

* The member list is ordered by join order; its first member is the oldest
  and is the coordinator. Every change bumps the version. A member adopts a
  published list only if it includes itself and *prevails* over its own
  (:func:`prevails`, a total order, so the order in which publications
  arrive does not decide): any list prevails over a member's list of one
  (it asked to join); between two lists of the same coordinator (name and
  uuid) the higher version prevails; between lists of two coordinators, the
  one of the older coordinator (two clusters formed at once merge into the
  older one, as Jet's split-brain merge joins the younger master's members
  to the older master).
* Anti-entropy: a list is published when it changes, and publications can
  be reordered or lost (each is its own request). So every heartbeat
  carries the sender's view (its coordinator and version, :class:`ListView`)
  and a digest of its list. A coordinator that hears a member of its list
  with another digest sends it its list again when its own prevails
  (raising its version above the member's first, when the member holds an
  older list of the same coordinator with a version as high); a member
  does the same for its own coordinator only (two members that each name
  the other coordinator settle so), never for the others, so that a stale
  list cannot spread. Without that, members started at the same moment
  could stay for good on different lists, even naming different
  coordinators, since heartbeats alone keep each listed member alive.
* Joining: a member that is alone sends ``join`` to its seeds every
  heartbeat interval. The coordinator appends the joiner and publishes the
  new list to everyone; a non-coordinator forwards the request to its
  coordinator. Two members that are both alone decide by age: the older
  (smaller ``(start_time, name)``) admits the younger, so they never build
  two clusters out of one pair.
* Failure detection: every member sends a heartbeat to every other member
  each ``heartbeat_interval_millis``. A member not heard from for
  ``failure_timeout_millis`` is removed by the coordinator, which publishes
  the new list. When the coordinator itself falls silent, the next-oldest
  member removes it, becomes coordinator and publishes (if it is silent too,
  the next one whose elders are all silent). No other member drops anyone
  on its own: one that alone stops hearing the coordinator keeps it until a
  published list drops it, so that the members never hold different views
  of who is in the cluster (a member that dropped the coordinator by itself
  refused its requests and told it that it was removed, while the others
  still followed it).
* Pauses and removal: a member whose own ticks stopped for longer than the
  failure timeout (SIGSTOP, a stalled machine) does not conclude that
  everyone else died: it restarts their clocks and is *suspect*
  (:meth:`Membership.take_pause`) until it hears: its heartbeats ask, and a
  member that still lists it answers ``still_member``
  (:meth:`Membership.take_confirmed`; a heartbeat that was on its way during
  the pause proves nothing).
  If the cluster removed it, its heartbeats reach a coordinator that no
  longer lists it, which answers ``removed``; the member then forgets its
  list, takes a new identity (a new uuid and start time: the youngest) and
  joins again (:meth:`Membership.take_removed`). A member cut off without
  pausing learns it the same way. Only a member that once listed the
  sender (that incarnation) and is not alone answers ``removed``: a member
  that is alone and hears from the coordinator that just admitted it,
  before the new list reached it, must not make that coordinator start
  over. Likewise a ``join`` from a new incarnation of a listed name (a
  replaced pod) does not count as a sign of life of the one listed.
  A ``join`` from an incarnation that was in the list and left it is not
  admitted either: that member was dropped without learning it (cut off, or
  its failure detector dropped the others first), so it found itself alone
  and may have taken over as coordinator and run the cluster's jobs on its
  own. It is answered ``removed`` (naming its uuid, as every ``removed``
  does: a notice about another incarnation is ignored), so it stops what it
  runs, forgets, and joins again as a new member; admitted as it was, it
  would have gone on running its own executions beside the cluster's.
* Split brain: :func:`has_quorum` tells whether a member list still holds a
  majority of the last known size; jobs with ``split_brain_protection`` run
  only while it does, so two halves never both run a job.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from typing import Any

from jetlet._cluster.member_list import ListView as ListView
from jetlet._cluster.member_list import MemberInfo as MemberInfo
from jetlet._cluster.member_list import MemberList as MemberList
from jetlet._cluster.member_list import prevails as prevails


@dataclasses.dataclass(frozen=True)
class Outgoing:
    """A message to send: to a member by ``name``, or to a seed by ``address`` when the name is unknown."""

    message: dict[str, Any]
    name: str = ""
    address: str = ""


DEPARTED_REMEMBERED = 1024
"""Incarnations (uuids) that left this member's list, remembered at most (the oldest forgotten)."""


def _remember(uuids: dict[str, None], member_uuid: str) -> None:
    """Add ``member_uuid`` to an ordered set of at most :data:`DEPARTED_REMEMBERED` (the oldest dropped)."""
    uuids.pop(member_uuid, None)
    uuids[member_uuid] = None
    while len(uuids) > DEPARTED_REMEMBERED:
        del uuids[next(iter(uuids))]


def has_quorum(present: int, last_known_size: int) -> bool:
    """Whether ``present`` members are a majority of ``last_known_size`` (split-brain protection)."""
    return present > last_known_size // 2


class Membership:
    """The member list as seen by one member, driven by messages and time (sans-IO)."""

    def __init__(
        self,
        local: MemberInfo,
        seeds: tuple[str, ...],
        heartbeat_interval_millis: int,
        failure_timeout_millis: int,
        now_ms: int,
    ) -> None:
        self.local = local
        self._former: tuple[str, ...] = ()
        """REST addresses of the members of the cluster that removed this member (seeds to rejoin it)."""
        self.seeds: tuple[str, ...] = ()
        self.set_seeds(seeds)
        self.heartbeat_interval = heartbeat_interval_millis
        self.failure_timeout = failure_timeout_millis
        self._list = MemberList(1, (local,))
        self.last_known_size = 1
        self._departed: dict[str, None] = {}
        """Uuids of the incarnations that were in this member's list and are not any more (oldest first)."""
        self._last_heard: dict[str, int] = {}
        self._next_heartbeat = now_ms
        self._last_tick: int | None = None
        self._paused_ms = 0
        self._removed = False
        self._confirmed = False
        self.suspect = False
        """After a pause of its own: not yet known whether the cluster still counts this member in."""

    def set_seeds(self, seeds: tuple[str, ...]) -> None:
        """The addresses to send ``join`` to while alone (this member's own addresses left out), and
        those of the members of the cluster that removed it (so that it can join that one again)."""
        own = (self.local.data_address, self.local.rest_address)
        self.seeds = tuple(s for s in dict.fromkeys((*seeds, *self._former)) if s not in own)

    @property
    def is_coordinator(self) -> bool:
        return self.member_list.coordinator.name == self.local.name

    @property
    def is_alone(self) -> bool:
        return len(self.member_list.members) == 1

    def _others(self) -> list[MemberInfo]:
        return [m for m in self.member_list.members if m.name != self.local.name]

    def _publish(self) -> list[Outgoing]:
        message = {"kind": "members", "list": self.member_list.to_dict()}
        return [Outgoing(message, name=m.name) for m in self._others()]

    @property
    def member_list(self) -> MemberList:
        """The member list as this member sees it (oldest, the coordinator, first)."""
        return self._list

    @member_list.setter
    def member_list(self, new: MemberList) -> None:
        """Replace the member list, remembering the incarnations that left it."""
        kept = {m.uuid for m in new.members}
        for member in self._list.members:
            if member.uuid not in kept:
                _remember(self._departed, member.uuid)
        for member in new.members:
            self._departed.pop(member.uuid, None)
        self._list = new

    def _adopt(self, published: MemberList, now_ms: int) -> None:
        for member in published.members:
            self._last_heard.setdefault(member.name, now_ms)
        self.member_list = published
        self.last_known_size = max(self.last_known_size, len(published.members))

    def tick(self, now_ms: int) -> list[Outgoing]:
        """Heartbeats, join attempts and failure detection due at ``now_ms``."""
        if self._last_tick is not None and now_ms - self._last_tick > self.failure_timeout:
            # this member itself was not running (SIGSTOP, a stalled machine) for longer than the
            # others wait for it: their silence means nothing, and they may have removed it. It
            # starts their clocks again and is *suspect* until it hears: a heartbeat from a member
            # of its list (it still belongs) or the coordinator's ``removed`` (it starts over).
            self._paused_ms = now_ms - self._last_tick
            self.suspect = True
            for member in self._others():
                self._last_heard[member.name] = now_ms
        self._last_tick = now_ms
        out: list[Outgoing] = []
        silent = {
            m.name
            for m in self._others()
            if now_ms - self._last_heard.setdefault(m.name, now_ms) > self.failure_timeout
        }
        if silent:
            out += self._remove_silent(silent)
        if now_ms >= self._next_heartbeat:
            self._next_heartbeat = now_ms + self.heartbeat_interval
            beat = {
                "kind": "heartbeat",
                "name": self.local.name,
                "uuid": self.local.uuid,
                "rest_address": self.local.rest_address,
                **self.member_list.view.to_heartbeat(),
                "digest": self.member_list.digest,
                "check": self.suspect,
            }
            out += [Outgoing(beat, name=m.name) for m in self._others()]
            if self.is_alone:
                join = {"kind": "join", "member": self.local.to_dict()}
                out += [Outgoing(join, address=seed) for seed in self.seeds]
        return out

    def _remove_silent(self, silent: set[str]) -> list[Outgoing]:
        names = self.member_list.names
        older = names[: names.index(self.local.name)]
        if not all(name in silent for name in older):
            # the coordinator removes; when it is silent, the next in line (every older member
            # silent) takes over. Any other member waits for that one's list: dropping the
            # coordinator alone (it may only be slow to reach this member) would split the view
            return []
        self.member_list = self.member_list.without(silent)
        for name in silent:
            self._last_heard.pop(name, None)
        return self._publish() if self.is_coordinator else []

    def receive(self, message: Mapping[str, Any], now_ms: int) -> list[Outgoing]:
        """Handle one message from another member; return the messages to send in answer."""
        kind = message.get("kind")
        if kind == "heartbeat":
            return self._on_heartbeat(message, now_ms)
        if kind == "removed":
            return self._on_removed(message, now_ms)
        if kind == "still_member":
            if self.suspect and self.member_list.get(str(message.get("by", ""))) is not None:
                self.suspect = False  # an answer to a question asked after the pause: still a member
                self._confirmed = True
            return []
        if kind == "join":
            return self._on_join(MemberInfo.from_dict(message["member"]), now_ms)
        if kind == "members":
            return self._on_members(MemberList.from_dict(message["list"]), now_ms)
        raise ValueError(f"unknown membership message kind {kind!r}")

    def _on_heartbeat(self, message: Mapping[str, Any], now_ms: int) -> list[Outgoing]:
        name = str(message["name"])
        known = self.member_list.get(name)
        sender_uuid = message.get("uuid")
        checking = bool(message.get("check"))  # a member back from a pause asks whether it belongs
        if known is not None and (sender_uuid is None or sender_uuid == known.uuid):
            self._last_heard[name] = now_ms
            out = [Outgoing({"kind": "still_member", "by": self.local.name}, name=name)] if checking else []
            return out + self._repair(name, message)
        # a member that is not in the list (it was removed while it was paused or cut off) still
        # thinks it belongs: the coordinator (or anyone it asks) tells it, and it rejoins as a new
        # member. Only a member that listed that incarnation once can say so: one that never did
        # may just not have received the list that adds it yet.
        address = message.get("rest_address")
        departed = sender_uuid in self._departed and not self.is_alone
        if departed and (self.is_coordinator or checking) and isinstance(address, str) and address:
            return [self._removed_notice(str(sender_uuid), address)]
        return []

    def _removed_notice(self, member_uuid: str, address: str) -> Outgoing:
        """Tell the incarnation ``member_uuid`` (at REST ``address``) that this member's list dropped it."""
        notice = {
            "kind": "removed",
            "by": self.local.name,
            "uuid": member_uuid,
            "version": self.member_list.version,
        }
        return Outgoing(notice, address=address)

    def _repair(self, name: str, heartbeat: Mapping[str, Any]) -> list[Outgoing]:
        """This member's list, to a member of it whose heartbeat shows a list that this one prevails over.

        The coordinator is the authority on its own lists: when the other holds one of them with a
        version as high as its own (but other members), it raises its version above that first.
        """
        theirs = ListView.from_heartbeat(heartbeat)
        if theirs is None or heartbeat.get("digest") == self.member_list.digest:
            return []
        if not self.is_coordinator and name != self.member_list.coordinator.name:
            return []  # a member tells only its coordinator (a stale list must not spread)
        mine = self.member_list.view
        if (
            self.is_coordinator
            and theirs.coordinator_uuid == self.local.uuid
            and theirs.version >= mine.version
        ):
            self.member_list = MemberList(theirs.version + 1, self.member_list.members)
            mine = self.member_list.view
        # a member still following a coordinator that this one's list dropped gets the list too: it
        # adopts it once it no longer hears that coordinator either (``_drops_silent_coordinator``)
        follows_dropped = self.is_coordinator and theirs.coordinator_uuid in self._departed
        if not prevails(mine, theirs) and not follows_dropped:
            return []
        return [Outgoing({"kind": "members", "list": self.member_list.to_dict()}, name=name)]

    def _on_removed(self, message: Mapping[str, Any], now_ms: int) -> list[Outgoing]:
        by = str(message.get("by", ""))
        if by == self.local.name:
            return []
        target = message.get("uuid")
        if target is not None:
            if target != self.local.uuid:
                return []  # about an earlier incarnation of this member (it started over already)
        elif self.member_list.get(by) is None:
            return []  # an older member's notice: only a member of our list can tell us so
        self._start_over(now_ms)
        return []

    def _start_over(self, now_ms: int) -> None:
        """Forget the list and take a new identity (the youngest): a member removed from its cluster
        joins again as a new member, with the members it knew as seeds."""
        self._former = tuple(m.rest_address for m in self._others())
        self.local = dataclasses.replace(self.local, uuid=uuid.uuid4().hex, start_time=now_ms)
        self.member_list = MemberList(1, (self.local,))
        self._last_heard = {}
        self.set_seeds(self.seeds)
        self._removed = True
        self.suspect = False

    def take_removed(self) -> bool:
        """True once after this member learnt that its cluster removed it (it is now alone, rejoining)."""
        removed, self._removed = self._removed, False
        return removed

    def take_confirmed(self) -> bool:
        """True once after a pause when a member of the list showed that this member still belongs."""
        confirmed, self._confirmed = self._confirmed, False
        return confirmed

    def take_pause(self) -> int:
        """Milliseconds this member itself was paused (longer than the failure timeout), once; else 0."""
        paused, self._paused_ms = self._paused_ms, 0
        return paused

    def _on_join(self, joiner: MemberInfo, now_ms: int) -> list[Outgoing]:
        known = self.member_list.get(joiner.name)
        if known is not None and known.uuid == joiner.uuid:
            self._last_heard[joiner.name] = now_ms
            return [Outgoing({"kind": "members", "list": self.member_list.to_dict()}, name=joiner.name)]
        # a new incarnation of a listed name (a replaced pod, a member that started over) proves
        # nothing about the one listed: only admitting it (below) starts its clock
        if joiner.uuid in self._departed and not self.is_alone:
            # dropped without learning it: whatever it ran alone since is stale (see the module doc)
            return [self._removed_notice(joiner.uuid, joiner.rest_address)]
        if not self.is_coordinator:
            coordinator = self.member_list.coordinator.name
            return [Outgoing({"kind": "join", "member": joiner.to_dict()}, name=coordinator)]
        if self.is_alone and joiner.age_key < self.local.age_key:
            return []
        self._last_heard[joiner.name] = now_ms
        self._adopt(self.member_list.with_member(joiner), now_ms)
        return self._publish()

    def _on_members(self, published: MemberList, now_ms: int) -> list[Outgoing]:
        listed = published.get(self.local.name)
        if listed is None or listed.uuid != self.local.uuid:
            return []  # not about this member (nor about this incarnation of its name)
        mine = self.member_list.view
        if prevails(published.view, mine) or self._drops_silent_coordinator(published, now_ms):
            self._adopt(published, now_ms)
        return []

    def _drops_silent_coordinator(self, published: MemberList, now_ms: int) -> bool:
        """Whether ``published`` leaves out this member's coordinator, which it no longer hears either.

        Such a list comes from the member next in line, which took over (this member waited for it
        rather than dropping the coordinator alone, see ``_remove_silent``): it is adopted although
        the older coordinator's list would prevail by age.
        """
        coordinator = self.member_list.coordinator
        if coordinator.name == self.local.name:
            return False
        listed = published.get(coordinator.name)
        silent = now_ms - self._last_heard.get(coordinator.name, now_ms) > self.failure_timeout
        return silent and (listed is None or listed.uuid != coordinator.uuid)

    def describe(self) -> dict[str, Any]:
        """The member list as ``/cluster`` shows it."""
        coordinator = self.member_list.coordinator.name
        return {
            "version": self.member_list.version,
            "coordinator": coordinator,
            "members": [
                {
                    "name": m.name,
                    "data_address": m.data_address,
                    "rest_address": m.rest_address,
                    "metrics_address": m.metrics_address,
                    "is_coordinator": m.name == coordinator,
                }
                for m in self.member_list.members
            ],
        }
