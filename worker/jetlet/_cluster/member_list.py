"""Members and member lists: who is in a cluster, in which order, and which of two lists prevails.

Used by :mod:`jetlet._cluster.membership` (the protocol that keeps the list)
and by whatever describes a cluster.

Theory of operation
-------------------
A :class:`MemberInfo` names one member incarnation: its name, addresses,
start time and a uuid that is new each time the member starts (or starts
over), so a replaced pod of the same name is another member. A
:class:`MemberList` is versioned and ordered by age, oldest first: its first
member is the coordinator. Every change makes a new list with a higher
version. :class:`ListView` is what two lists are compared by, and what every
heartbeat carries of its sender's list; :func:`prevails` is a total order
on views, so the order in which lists arrive does not decide which one a
member ends on: any list prevails over a list of one (the member asked to
join), the same coordinator's higher version prevails, and of two
coordinators the older one's list prevails (two clusters formed at once
merge into the older one, as Jet's split-brain merge joins the younger
master's members to the older master). :attr:`MemberList.digest` names the
members and their incarnations in order, for a coordinator to notice a
member that holds another list.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
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
class ListView:
    """What :func:`prevails` compares of a member list; every heartbeat carries its sender's."""

    size: int
    coordinator: str
    coordinator_uuid: str
    coordinator_start: int
    version: int

    @property
    def coordinator_age(self) -> tuple[int, str]:
        return (self.coordinator_start, self.coordinator)

    def to_heartbeat(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "coordinator": self.coordinator,
            "coordinator_uuid": self.coordinator_uuid,
            "coordinator_start": self.coordinator_start,
            "version": self.version,
        }

    @classmethod
    def from_heartbeat(cls, message: Mapping[str, Any]) -> ListView | None:
        """The sender's view from a heartbeat; None if it carries none."""
        try:
            return cls(
                int(message["size"]),
                str(message["coordinator"]),
                str(message["coordinator_uuid"]),
                int(message["coordinator_start"]),
                int(message["version"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


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

    @property
    def view(self) -> ListView:
        c = self.coordinator
        return ListView(len(self.members), c.name, c.uuid, c.start_time, self.version)

    @functools.cached_property
    def digest(self) -> str:
        """A short digest of the members (names and incarnations, in order; not the version)."""
        text = ",".join(f"{m.name}/{m.uuid}" for m in self.members)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

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


def prevails(published: ListView, mine: ListView) -> bool:
    """Whether a member holding the list ``mine`` adopts the list ``published`` (both list it).

    Any list prevails over a list of one (the member asked to join); the same coordinator's
    (name and uuid) higher version prevails; of two coordinators, the older one's list prevails.
    """
    if mine.size == 1:
        return published.size > 1
    if (published.coordinator, published.coordinator_uuid) == (mine.coordinator, mine.coordinator_uuid):
        return published.version > mine.version
    return published.coordinator_age < mine.coordinator_age
