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
  and is the coordinator. Every change bumps the version; a member adopts a
  published list only if it includes itself and has a higher version than
  its own (or comes from a coordinator older than its own, when two lists
  merge), so all members converge on the coordinator's list.
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
  member removes it, becomes coordinator and publishes.
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
  pausing learns it the same way.
* Split brain: :func:`has_quorum` tells whether a member list still holds a
  majority of the last known size; jobs with ``split_brain_protection`` run
  only while it does, so two halves never both run a job.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class MemberInfo:
    """One member: its unique name, its addresses and when it started."""

    name: str
    data_address: str
    rest_address: str
    start_time: int
    """Milliseconds since the epoch when the member process started."""
    uuid: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex)
    metrics_address: str = ""
    """Where the member serves Prometheus ``/metrics`` (empty: it does not)."""

    @property
    def age_key(self) -> tuple[int, str]:
        return (self.start_time, self.name)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemberInfo:
        return cls(
            name=str(data["name"]),
            data_address=str(data["data_address"]),
            rest_address=str(data["rest_address"]),
            start_time=int(data["start_time"]),
            uuid=str(data["uuid"]),
            metrics_address=str(data.get("metrics_address", "")),  # absent from older members
        )


@dataclasses.dataclass(frozen=True)
class MemberList:
    """A versioned member list, oldest (the coordinator) first."""

    version: int
    members: tuple[MemberInfo, ...]

    @property
    def coordinator(self) -> MemberInfo:
        return self.members[0]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.members)

    def get(self, name: str) -> MemberInfo | None:
        return next((m for m in self.members if m.name == name), None)

    def with_member(self, member: MemberInfo) -> MemberList:
        kept = tuple(m for m in self.members if m.name != member.name)
        return MemberList(self.version + 1, (*kept, member))

    def without(self, names: set[str]) -> MemberList:
        return MemberList(self.version + 1, tuple(m for m in self.members if m.name not in names))

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "members": [m.to_dict() for m in self.members]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemberList:
        return cls(int(data["version"]), tuple(MemberInfo.from_dict(m) for m in data["members"]))


@dataclasses.dataclass(frozen=True)
class Outgoing:
    """A message to send: to a member by ``name``, or to a seed by ``address`` when the name is unknown."""

    message: dict[str, Any]
    name: str = ""
    address: str = ""


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
        self.member_list = MemberList(1, (local,))
        self.last_known_size = 1
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
                "version": self.member_list.version,
                "check": self.suspect,
            }
            out += [Outgoing(beat, name=m.name) for m in self._others()]
            if self.is_alone:
                join = {"kind": "join", "member": self.local.to_dict()}
                out += [Outgoing(join, address=seed) for seed in self.seeds]
        return out

    def _remove_silent(self, silent: set[str]) -> list[Outgoing]:
        coordinator = self.member_list.coordinator.name
        if not self.is_coordinator and coordinator not in silent:
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
            return self._on_removed(str(message.get("by", "")), now_ms)
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
            return [Outgoing({"kind": "still_member", "by": self.local.name}, name=name)] if checking else []
        # a member that is not in the list (it was removed while it was paused or cut off) still
        # thinks it belongs: the coordinator (or anyone it asks) tells it, and it rejoins as a new member
        address = message.get("rest_address")
        if (self.is_coordinator or checking) and isinstance(address, str) and address:
            notice = {"kind": "removed", "by": self.local.name, "version": self.member_list.version}
            return [Outgoing(notice, address=address)]
        return []

    def _on_removed(self, by: str, now_ms: int) -> list[Outgoing]:
        if by == self.local.name or self.member_list.get(by) is None:
            return []  # only a member of our list can tell us we were removed from it
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
        self._last_heard[joiner.name] = now_ms
        known = self.member_list.get(joiner.name)
        if known is not None and known.uuid == joiner.uuid:
            return [Outgoing({"kind": "members", "list": self.member_list.to_dict()}, name=joiner.name)]
        if not self.is_coordinator:
            coordinator = self.member_list.coordinator.name
            return [Outgoing({"kind": "join", "member": joiner.to_dict()}, name=coordinator)]
        if self.is_alone and joiner.age_key < self.local.age_key:
            return []
        self._adopt(self.member_list.with_member(joiner), now_ms)
        return self._publish()

    def _on_members(self, published: MemberList, now_ms: int) -> list[Outgoing]:
        if published.get(self.local.name) is None:
            return []
        newer = published.version > self.member_list.version
        older_coordinator = published.coordinator.age_key < self.member_list.coordinator.age_key
        if newer or older_coordinator:
            self._adopt(published, now_ms)
        return []

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
