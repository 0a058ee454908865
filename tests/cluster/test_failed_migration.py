"""A partition table whose migration failed midway is not taken as holding the data it placed.

With ``backup_count`` 2 every partition of four members has three replicas, so
two members killed in quick succession leave each partition a surviving copy.
When the second dies while the table for the first loss is being installed, the
copies that it was to send to the members that are new replicas under that
table never arrive, yet those members are named replicas by it. The table after
the second loss must not count them as holders: the restart would read their
empty copies as the snapshot ("snapshot N is incomplete: stage X stored K
entries but J were found", chaos two-kills-backup2 / end-kills).

The members are the real :class:`TableKeeper` and :class:`Grid` objects of
:mod:`test_stale_member_partitions`'s in-process network.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_stale_member_partitions import DATA, PARTITIONS, Network

NAMES = ["m1", "m2", "m3", "m4"]


@pytest.fixture
def net() -> Iterator[Network]:
    network = Network(backup_count=2)
    for name in NAMES:
        network.add(name)
    for name in NAMES:
        network.member_list(name, NAMES)
    network.keepers["m1"].ensure_now()
    yield network
    network.close()


def _kill(net: Network, member: str) -> None:
    net.dead.add(member)


def _drop(net: Network, gone: set[str]) -> list[str]:
    """The survivors' membership drops ``gone``; the new list."""
    names = [n for n in NAMES if n not in gone]
    for name in names:
        net.member_list(name, names)
    return names


@pytest.mark.parametrize("failed_installs", [1, 2])
def test_a_member_killed_while_the_table_for_an_earlier_loss_installs_loses_no_entry(
    net: Network, failed_installs: int
) -> None:
    # given a snapshot in the grid of m1..m4 with backup count 2 (every partition on three members)
    net.grids["m1"].put("snapshot", DATA)
    table = net.grids["m1"].table
    assert table is not None
    fed_by_m4 = [
        p
        for p in range(PARTITIONS)
        if "m2" not in table.replicas(p) and next(m for m in table.replicas(p) if m != "m3") == "m4"
    ]
    assert fed_by_m4  # partitions whose copy for m2 only m4 would send after m3 is gone
    # when m3 is killed, and m4 a moment later, as the table without m3 is being installed
    _kill(net, "m3")
    _drop(net, {"m3"})
    _kill(net, "m4")
    for _ in range(failed_installs):  # m4 never sends m2 its copies (the keeper may try again first)
        net.keepers["m1"].ensure_now()
        assert not net.keepers["m1"].installed_everywhere()
    # and the membership drops m4 too, and the coordinator installs the table of the two left
    survivors = _drop(net, {"m3", "m4"})
    net.keepers["m1"].ensure_now()
    # then every entry is read back (each partition from its primary), and both replicas hold it
    assert net.keepers["m1"].installed_everywhere()
    for name in survivors:
        assert net.grids[name].get_all("snapshot") == DATA, name
    for partition in range(PARTITIONS):
        copies = [net.grids[m].store.entries(partition, "snapshot") for m in survivors]
        assert copies[0] == copies[1], partition
