"""The members as the job service sees them: who is there, who is lost or leaving, who coordinates.

Theory of operation
-------------------
Membership (``membership.py``) publishes the member list, oldest first. The
job service also learns faster, from the network, that a member's
connection dropped (:meth:`MembersView.mark_lost`), and from a member itself
that it is leaving gracefully (:meth:`MembersView.mark_leaving`). A lost
member counts as gone at once: calls waiting on it fail and it is left out
of new executions until the membership drops it (a member that the
membership drops and that comes back is a new member), or until its
connection is back while the list still holds it (a connection that was
reset, or a member that joined before its connection was up):
:meth:`MembersView.found_again`. A leaving member is
still connected — its data can still be read and moved off it — but it is
not the coordinator any more and runs no new execution.

The coordinator is the oldest member of the list that is not leaving: a
lost connection never changes it (a reset link between two live members
must not make both coordinate); the membership's heartbeats decide that the
coordinator is gone, by dropping it from the list. Every
reader gets a consistent answer under one lock; :meth:`wait_for_coordinator_change`
lets a caller whose coordinator just vanished wait (bounded) for the next one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence


class MembersView:
    """Live members and the coordinator, from the member list and what the network saw."""

    def __init__(self, member_name: str, member_names: Callable[[], Sequence[str]]) -> None:
        self.member_name = member_name
        self._member_names = member_names
        self._lost: set[str] = set()
        self._leaving: set[str] = set()
        self._known: tuple[str, ...] = ()
        self._changed = threading.Condition()

    def all(self) -> list[str]:
        """Every member of the list, lost or not (oldest first)."""
        return list(self._member_names())

    def live(self) -> list[str]:
        """The members that can run an execution (oldest first)."""
        with self._changed:
            gone = self._lost | self._leaving
        return [m for m in self._member_names() if m not in gone]

    def reachable(self) -> list[str]:
        """The members not lost: the live ones and those leaving gracefully (their data can still move)."""
        with self._changed:
            lost = set(self._lost)
        return [m for m in self._member_names() if m not in lost]

    def leaving(self) -> list[str]:
        with self._changed:
            return sorted(self._leaving - self._lost)

    def coordinator(self) -> str:
        """The oldest member of the list that is not leaving (this member while it is alone).

        A lost connection does not change it: only the membership (heartbeats) decides that the
        coordinator is gone, so a reset link can never make two members coordinate.
        """
        with self._changed:
            return self.coordinator_locked()

    def is_coordinator(self) -> bool:
        return self.coordinator() == self.member_name

    def is_lost(self, member: str) -> bool:
        with self._changed:
            return member in self._lost

    def mark_lost(self, member: str) -> bool:
        """The connection to ``member`` dropped; True if that is news."""
        with self._changed:
            if member in self._lost:
                return False
            self._lost.add(member)
            self._changed.notify_all()
            return True

    def lost_in_list(self) -> list[str]:
        """Members counted lost that the member list still holds (they may come back)."""
        with self._changed:
            lost = set(self._lost)
        return [m for m in self._member_names() if m in lost]

    def found_again(self, member: str) -> bool:
        """A lost member's connection is back (it was not dead); True if it counted as lost."""
        with self._changed:
            if member not in self._lost:
                return False
            self._lost.discard(member)
            self._changed.notify_all()
            return True

    def clear(self) -> None:
        """Forget who was lost or leaving (this member starts over, alone)."""
        with self._changed:
            self._lost.clear()
            self._leaving.clear()
            self._known = ()
            self._changed.notify_all()

    def mark_leaving(self, member: str) -> bool:
        """``member`` announced a graceful leave; True if that is news."""
        with self._changed:
            if member in self._leaving:
                return False
            self._leaving.add(member)
            self._changed.notify_all()
            return True

    def is_leaving(self, member: str) -> bool:
        with self._changed:
            return member in self._leaving

    def members_changed(self, names: Sequence[str]) -> tuple[list[str], list[str]]:
        """A new member list: ``(dropped, joined)`` since the last one; forget the lost that left it."""
        with self._changed:
            before, self._known = self._known, tuple(names)
            dropped = [m for m in before if m not in names]
            joined = [m for m in names if m not in before]
            self._lost &= set(names)
            self._leaving &= set(names)
            self._changed.notify_all()
        return dropped, joined

    def known(self) -> tuple[str, ...]:
        with self._changed:
            return self._known

    def wait_for_coordinator_change(self, old: str, timeout_s: float) -> str:
        """Wait up to ``timeout_s`` until the coordinator is no longer ``old``; the coordinator then."""
        with self._changed:
            self._changed.wait_for(lambda: self.coordinator_locked() != old, timeout_s)
            return self.coordinator_locked()

    def coordinator_locked(self) -> str:
        staying = [m for m in self._member_names() if m not in self._leaving]
        return staying[0] if staying else self.member_name
