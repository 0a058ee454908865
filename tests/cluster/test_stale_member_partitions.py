"""A member dropped and admitted again under the same name keeps none of its old partitions.

A member that learns it was removed forgets its grid partitions and rejoins as
a new member under its name. When the coordinator sees the drop and the new
admission before it derived a table without it (chaos pause-coordinator seed 23:
dropped and admitted within 24 ms, on the member that took over), the name is
still owner and backup of its old partitions; the table keeper must have the
other replicas copy them to it, or the restart reads a snapshot that is not
there ("snapshot 3 is incomplete: stage ... stored 7 entries but 0 were found").

The members here are real :class:`TableKeeper` and :class:`Grid` objects wired
by an in-process control channel (calls run on a thread pool; bodies between
two members go through the wire serialization).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from typing import Any

import pytest

from jetlet._cluster import grid as grid_mod
from jetlet._cluster import members_view, table_keeper
from jetlet._cluster.control import Handler, MemberUnreachableError, Operation
from jetlet._network import serialization

PARTITIONS = 31


class Network:
    """Members' table keepers and grids; each member has its own member list."""

    def __init__(self, backup_count: int = 1) -> None:
        self.backup_count = backup_count
        self.dead: set[str] = set()
        """Killed members: a call to one fails as unreachable."""
        self.pool = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="fake-control")
        self.handlers: dict[str, dict[Operation, Handler]] = {}
        self.lists: dict[str, list[str]] = {}
        self.grids: dict[str, grid_mod.Grid] = {}
        self.keepers: dict[str, table_keeper.TableKeeper] = {}

    def add(self, name: str) -> None:
        self.handlers[name] = {}
        self.lists[name] = [name]
        channel = _Channel(self, name)
        self.grids[name] = grid_mod.Grid(
            name,
            lambda member, op, body: channel.call(member, Operation.GRID, grid_op=op, body=body),
            PARTITIONS,
            self.backup_count,
            timeout_s=10.0,
        )
        members = members_view.MembersView(name, lambda: self.lists[name])
        self.keepers[name] = table_keeper.TableKeeper(channel, members, self.grids[name], PARTITIONS)  # type: ignore[arg-type]

    def member_list(self, name: str, names: list[str]) -> None:
        """``name`` takes the member list ``names`` (as ``ClusterJobService.on_members_changed``)."""
        self.lists[name] = list(names)
        self.keepers[name].members_changed(names)

    def close(self) -> None:
        for keeper in self.keepers.values():
            keeper.close()
        self.pool.shutdown(wait=True)


class _Channel:
    """The part of :class:`~jetlet._cluster.control.ControlChannel` the table keeper and grid use."""

    def __init__(self, net: Network, name: str) -> None:
        self._net = net
        self._name = name

    def register(self, op: Operation, handler: Handler, dispatch: object = None) -> None:
        self._net.handlers[self._name][op] = handler

    def call(self, peer: str, op: Operation, **fields: Any) -> concurrent.futures.Future[dict[str, Any]]:
        body = fields if peer == self._name else serialization.loads(serialization.dumps(fields))

        def run() -> dict[str, Any]:
            if peer in self._net.dead:
                raise MemberUnreachableError(f"member {peer} is not connected")
            answer = self._net.handlers[peer][op](self._name, body)
            result: dict[str, Any] = (
                answer.result(10.0) if isinstance(answer, concurrent.futures.Future) else answer
            )
            return result

        return self._net.pool.submit(run)


@pytest.fixture
def net() -> Iterator[Network]:
    network = Network()
    for name in ("m1", "m2", "m3"):
        network.add(name)
    for name in ("m1", "m2", "m3"):
        network.member_list(name, ["m1", "m2", "m3"])
    network.keepers["m1"].ensure_now()
    yield network
    network.close()


DATA = {f"k{i}": i for i in range(300)}


def _rejoins_empty(net: Network, member: str, names: list[str]) -> None:
    """The others drop ``member``; it forgets its partitions (it learnt it was removed); they admit
    it again under its name before any table without it is installed."""
    others = [n for n in names if n != member]
    for name in others:
        net.member_list(name, others)
    net.keepers[member].forget()
    net.member_list(member, [member])
    for name in names:
        net.member_list(name, names)


def _assert_every_replica_holds(net: Network, names: list[str]) -> None:
    for name in names:
        assert net.grids[name].get_all("snapshot") == DATA, name
    table = net.grids[names[0]].table
    assert table is not None
    for partition in range(PARTITIONS):
        copies = [net.grids[m].store.entries(partition, "snapshot") for m in table.replicas(partition)]
        assert all(copy == copies[0] for copy in copies), partition


def test_a_member_dropped_and_admitted_again_before_a_new_table_gets_its_partitions_from_the_others(
    net: Network,
) -> None:
    # given a snapshot in the grid of m1, m2, m3 (backup count 1), coordinated by m1
    net.grids["m2"].put("snapshot", DATA)
    # when m1 is dropped (m3 takes over as coordinator) and admitted again, empty, at once
    _rejoins_empty(net, "m1", ["m3", "m2", "m1"])
    # and the new coordinator installs its table (a take-over's restart does, before it reads)
    net.keepers["m3"].ensure_now()
    # then the whole snapshot is read back, and every replica holds its partitions
    _assert_every_replica_holds(net, ["m3", "m2", "m1"])


def test_a_member_dropped_and_admitted_again_under_the_same_coordinator_gets_its_partitions_again(
    net: Network,
) -> None:
    # given a snapshot in the grid of m1, m2, m3, coordinated by m1
    net.grids["m1"].put("snapshot", DATA)
    # when m3 is dropped and admitted again, empty, before m1 installed a table without it
    _rejoins_empty(net, "m3", ["m1", "m2", "m3"])
    assert not net.keepers["m1"].installed_everywhere()
    # and m1 makes sure its table is installed (the member list names the same members as before)
    net.keepers["m1"].ensure_now()
    # then the whole snapshot is read back, and every replica holds its partitions
    _assert_every_replica_holds(net, ["m1", "m2", "m3"])
    assert net.keepers["m1"].installed_everywhere()
