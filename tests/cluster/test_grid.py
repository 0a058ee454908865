"""The grid: replica placement, replicated writes, reads, rebalancing, bulk operations and map files.

The logic tests run several :class:`Grid` instances in one process, wired by a
fake network (:class:`FakeNetwork`): a ``call`` runs the target grid's
``handle`` on a thread pool, round-tripping bodies and replies between two
members through the wire serialization (a call to oneself is not serialized,
as the coordinator routes it), and answering errors as the coordinator does.
A member marked dead answers every call with an error; a hung one never
answers. The real transport is covered by the cluster tests.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import logging
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jetlet._cluster import grid as grid_mod
from jetlet._cluster import grid_files
from jetlet._cluster.grid import Grid, GridError
from jetlet._cluster.grid_store import MapStats, ReplicaTable
from jetlet._cluster.partition_table import PartitionTable
from jetlet._cluster.snapshot_data import SnapshotDataError
from jetlet._network import serialization
from jetlet.core.partitioning import stable_hash

PARTITIONS = 16


@dataclasses.dataclass(frozen=True)
class Reading:
    """A user value that only cloudpickle carries."""

    sensor: str
    values: tuple[float, ...]


class FakeNetwork:
    """Delivers grid calls in process; see the module doc."""

    def __init__(self) -> None:
        self.grids: dict[str, Grid] = {}
        self.dead: set[str] = set()
        self.hung: set[str] = set()
        self.sent: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        self._rpc = 0
        self.pool = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="fake-grid-net")

    def add(
        self, name: str, backup_count: int, timeout_s: float = 10.0, max_batch_bytes: int = 1 << 20
    ) -> Grid:
        grid = Grid(name, self.caller(name), PARTITIONS, backup_count, timeout_s, max_batch_bytes)
        self.grids[name] = grid
        return grid

    def caller(self, sender: str) -> grid_mod.GridCall:
        def call(member: str, op: str, body: dict[str, Any]) -> concurrent.futures.Future[dict[str, Any]]:
            with self._lock:
                self.sent.append((sender, member, op))
                self._rpc += 1
                rpc = self._rpc
            future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
            if member in self.hung:
                return future
            if member in self.dead:
                future.set_result({"error": f"member {member} is not connected"})
                return future
            local = member == sender
            wire = {"job_op": op, "rpc": rpc, **body}  # the coordinator's extra keys
            return self.pool.submit(self._answer, member, op, wire if local else _wire(wire), local)

        return call

    def _answer(self, member: str, op: str, body: dict[str, Any], local: bool) -> dict[str, Any]:
        try:
            reply = self.grids[member].handle(op, body)
        except Exception as exc:
            reply = {"error": "".join(traceback.format_exception(exc)), "error_message": str(exc)}
        return reply if local else _wire(reply)

    def ops(self, op: str) -> list[tuple[str, str, str]]:
        return [sent for sent in self.sent if sent[2] == op]


def _wire(body: dict[str, Any]) -> dict[str, Any]:
    decoded: dict[str, Any] = serialization.loads(serialization.dumps(body))
    return decoded


@pytest.fixture
def net() -> Iterator[FakeNetwork]:
    network = FakeNetwork()
    yield network
    network.pool.shutdown(wait=True)


def _cluster(
    net: FakeNetwork, names: list[str], backup_count: int, **grid_options: Any
) -> tuple[dict[str, Grid], ReplicaTable]:
    table = ReplicaTable(PartitionTable.assign(names, PARTITIONS), backup_count)
    grids = {name: net.add(name, backup_count, **grid_options) for name in names}
    for grid in grids.values():
        grid.set_table(table)
    return grids, table


def _data(count: int = 200, prefix: str = "k") -> dict[Any, Any]:
    data: dict[Any, Any] = {f"{prefix}{i}": {"i": i, "squares": [i * i]} for i in range(count)}
    data[(prefix, 1)] = Reading("s1", (1.5, 2.5))
    data[7] = None
    assert {_partition(key) for key in data} == set(range(PARTITIONS))
    return data


def _partition(key: Any) -> int:
    return stable_hash(key) % PARTITIONS


def _rebalance_all(grids: dict[str, Grid], old: ReplicaTable, new: ReplicaTable) -> dict[str, int]:
    """Every member of ``new`` rebalances at the same time, as in a cluster."""
    with concurrent.futures.ThreadPoolExecutor(len(new.members)) as pool:
        futures = {name: pool.submit(grids[name].rebalance, old, new) for name in new.members}
        return {name: future.result() for name, future in futures.items()}


def _assert_placement(
    grids: dict[str, Grid], table: ReplicaTable, map_name: str, expected: dict[Any, Any]
) -> None:
    """Every partition's entries are on exactly its replicas, and nowhere else."""
    for partition in range(PARTITIONS):
        want = {key: value for key, value in expected.items() if _partition(key) == partition}
        for name in table.members:
            stored = grids[name].store.entries(partition, map_name)
            got = {key: serialization.loads(value) for key, value in stored.items()}
            assert got == (want if name in table.replicas(partition) else {}), (partition, name)


# --------------------------------------------------------------------------- placement


@pytest.mark.parametrize("backup_count", [0, 1, 2])
@pytest.mark.parametrize("member_count", [1, 2, 3, 4])
def test_given_members_and_backups_when_replicas_then_owner_then_next_members_wrapping(
    backup_count: int, member_count: int
) -> None:
    members = ["a", "b", "c", "d"][:member_count]
    table = ReplicaTable(PartitionTable.assign(members, PARTITIONS), backup_count)
    copies = min(backup_count, member_count - 1) + 1
    for partition in range(PARTITIONS):
        replicas = table.replicas(partition)
        owner = table.partitions.owner(partition)
        start = members.index(owner)
        assert replicas == tuple(members[(start + k) % member_count] for k in range(copies))
        assert len(set(replicas)) == copies
    for member in members:
        assert table.holders_of(member) == {p for p in range(PARTITIONS) if member in table.replicas(p)}
    assert sum(len(table.holders_of(m)) for m in members) == PARTITIONS * copies


def test_given_four_members_and_two_backups_when_the_third_owns_then_the_backups_wrap() -> None:
    table = ReplicaTable(PartitionTable.assign(["a", "b", "c", "d"], 4), backup_count=2)
    assert [table.replicas(p) for p in range(4)] == [
        ("a", "b", "c"),
        ("b", "c", "d"),
        ("c", "d", "a"),
        ("d", "a", "b"),
    ]
    assert table.holders_of("a") == {0, 2, 3}
    assert table.holders_of("zz") == set()


@pytest.mark.parametrize("backup_count", [-1, 7, True, 1.0])
def test_given_a_bad_backup_count_when_building_a_table_then_value_error(backup_count: Any) -> None:
    with pytest.raises(ValueError, match="backup_count"):
        ReplicaTable(PartitionTable.assign(["a"], PARTITIONS), backup_count)


def test_given_a_table_of_another_shape_when_set_then_value_error(net: FakeNetwork) -> None:
    grid = net.add("a", backup_count=1)
    with pytest.raises(ValueError, match="partitions"):
        grid.set_table(ReplicaTable(PartitionTable.assign(["a"], PARTITIONS + 1), 1))
    with pytest.raises(ValueError, match="backups"):
        grid.set_table(ReplicaTable(PartitionTable.assign(["a"], PARTITIONS), 2))
    with pytest.raises(GridError, match="no partition table"):
        grid.put("m", {"k": 1})


# --------------------------------------------------------------------------- writes and reads


@pytest.mark.parametrize("backup_count", [0, 1, 2])
def test_given_a_put_when_get_all_then_equal_to_a_dict_and_on_every_replica(
    net: FakeNetwork, backup_count: int
) -> None:
    grids, table = _cluster(net, ["a", "b", "c"], backup_count)
    data = _data()
    grids["a"].put("m", data)
    for grid in grids.values():
        assert grid.get_all("m") == data
    _assert_placement(grids, table, "m", data)
    assert grids["b"].get_all("other") == {}


def test_given_one_put_when_sent_then_one_message_per_replica_holder(net: FakeNetwork) -> None:
    grids, table = _cluster(net, ["a", "b", "c", "d"], backup_count=1)
    data = _data()
    grids["b"].put("m", list(data.items()))
    holders = {member for key in data for member in table.replicas(_partition(key))}
    assert sorted(target for _, target, _ in net.ops("grid_put")) == sorted(holders)


def test_given_a_value_mutated_after_the_put_when_read_then_the_grid_kept_the_put_value(
    net: FakeNetwork,
) -> None:
    grids, _ = _cluster(net, ["a", "b"], backup_count=1)
    value = [1, 2]
    grids["a"].put("m", {"k": value})
    value.append(3)
    assert grids["a"].get_all("m") == {"k": [1, 2]}
    assert grids["b"].get_all("m") == {"k": [1, 2]}


def test_given_repeated_keys_when_put_then_the_last_value_wins(net: FakeNetwork) -> None:
    grids, _ = _cluster(net, ["a", "b"], backup_count=1)
    grids["a"].put("m", [("k", 1), ("j", 2), ("k", 3)])
    grids["b"].put("m", {"j": 4})
    assert grids["a"].get_all("m") == {"k": 3, "j": 4}


def test_given_explicit_partitions_when_put_then_entries_live_there(net: FakeNetwork) -> None:
    grids, table = _cluster(net, ["a", "b", "c"], backup_count=1)
    target = (_partition("x") + 1) % PARTITIONS
    grids["a"].put_to_partitions("m", {target: [("x", 1), ("y", 2)], 0: [("z", 3)]})
    assert grids["c"].get_all("m") == {"x": 1, "y": 2, "z": 3}
    for name, grid in grids.items():
        expected = {"x": 1, "y": 2} if name in table.replicas(target) else {}
        assert {k: serialization.loads(v) for k, v in grid.store.entries(target, "m").items()} == expected
    with pytest.raises(ValueError, match="partition 16"):
        grids["a"].put_to_partitions("m", {PARTITIONS: [("k", 1)]})


def test_given_a_small_batch_size_when_put_and_read_then_many_messages_and_the_same_data(
    net: FakeNetwork,
) -> None:
    grids, table = _cluster(net, ["a", "b", "c"], backup_count=1, max_batch_bytes=2000)
    data = {f"k{i}": "v" * 300 for i in range(200)}
    grids["a"].put("m", data)
    assert len(net.ops("grid_put")) > 3 * len(table.members)
    assert grids["b"].get_all("m") == data
    assert len(net.ops("grid_read")) > len(table.members)
    _assert_placement(grids, table, "m", data)


def test_given_a_member_when_local_primary_entries_then_its_own_copy_without_the_network(
    net: FakeNetwork,
) -> None:
    grids, table = _cluster(net, ["a", "b", "c"], backup_count=1)
    data = _data()
    grids["a"].put("m", data)
    for name, grid in grids.items():
        owned = table.partitions.partitions_of(name)
        sent_before = len(net.sent)
        local = grid.local_primary_entries("m", owned)
        assert len(net.sent) == sent_before
        assert local == {p: {k: v for k, v in data.items() if _partition(k) == p} for p in owned}
    foreign = min(set(range(PARTITIONS)) - table.holders_of("a"))
    with pytest.raises(GridError, match=f"does not replicate partitions \\[{foreign}\\]"):
        grids["a"].local_primary_entries("m", [foreign])


def test_given_maps_when_stats_then_counts_and_sizes_count_each_entry_once(net: FakeNetwork) -> None:
    grids, _ = _cluster(net, ["a", "b", "c"], backup_count=2)
    grids["a"].put("snap.1", {"x": b"1234", "y": b"5678"})
    grids["a"].put("other", {"z": 1})
    stats = grids["b"].map_stats("snap.")
    size = 2 * len(serialization.dumps(b"1234"))
    assert stats == {"snap.1": MapStats(entries=2, value_bytes=size)}
    assert grids["c"].map_names() == ["other", "snap.1"]


# --------------------------------------------------------------------------- failures


def test_given_a_dead_replica_when_put_then_grid_error_names_it(net: FakeNetwork) -> None:
    grids, _ = _cluster(net, ["a", "b", "c"], backup_count=1)
    net.dead.add("b")
    with pytest.raises(GridError, match="member b failed grid_put: member b is not connected") as caught:
        grids["a"].put("m", _data())
    assert caught.value.members == ("b",)
    with pytest.raises(GridError, match="member b"):
        grids["a"].get_all("m")


def test_given_a_hung_replica_when_put_then_grid_error_after_the_timeout(net: FakeNetwork) -> None:
    grids, _ = _cluster(net, ["a", "b"], backup_count=1, timeout_s=0.2)
    net.hung.add("b")
    with pytest.raises(GridError, match=r"member b did not answer grid_put within 0\.2 s"):
        grids["a"].put("m", {"k": 1})


def test_given_an_unknown_operation_when_handled_then_value_error(net: FakeNetwork) -> None:
    grid = net.add("a", backup_count=0)
    with pytest.raises(ValueError, match="unknown grid operation 'grid_nope'"):
        grid.handle("grid_nope", {})


# --------------------------------------------------------------------------- rebalancing


@pytest.mark.parametrize("backup_count", [1, 2])
def test_given_a_member_dies_when_rebalanced_then_data_intact_and_fully_replicated(
    net: FakeNetwork, backup_count: int
) -> None:
    grids, old = _cluster(net, ["a", "b", "c", "d"], backup_count)
    data = _data()
    grids["a"].put("m", data)
    grids["a"].put("n", {"only": 1})
    net.dead.add("c")
    new = ReplicaTable(
        PartitionTable.assign(["a", "b", "d"], PARTITIONS, previous=old.partitions), backup_count
    )
    sent = _rebalance_all(grids, old, new)
    gained = {p for p in range(PARTITIONS) if not set(new.replicas(p)) <= set(old.replicas(p))}
    assert sum(sent.values()) == len(gained) > 0
    for name in new.members:
        assert grids[name].lost_partitions == ()
        assert grids[name].get_all("m") == data
        assert grids[name].get_all("n") == {"only": 1}
    _assert_placement(grids, new, "m", data)
    grids["d"].put("m", {"k0": "new"})
    assert grids["a"].get_all("m") == {**data, "k0": "new"}


def test_given_a_member_joins_without_backups_when_rebalanced_then_only_moved_partitions_travel(
    net: FakeNetwork,
) -> None:
    grids, old = _cluster(net, ["a", "b", "c"], backup_count=0)
    data = _data()
    grids["a"].put("m", data)
    grids["d"] = net.add("d", backup_count=0)
    partitions = PartitionTable.assign(["a", "b", "c", "d"], PARTITIONS, previous=old.partitions)
    new = ReplicaTable(partitions, 0)
    sent = _rebalance_all(grids, old, new)
    assert sum(sent.values()) == partitions.moved_from(old.partitions) == len(partitions.partitions_of("d"))
    assert sent["d"] == 0
    assert grids["d"].get_all("m") == data
    _assert_placement(grids, new, "m", data)


def test_given_a_member_joins_with_a_backup_when_rebalanced_then_only_new_replicas_receive(
    net: FakeNetwork,
) -> None:
    grids, old = _cluster(net, ["a", "b", "c"], backup_count=1)
    data = _data()
    grids["a"].put("m", data)
    grids["d"] = net.add("d", backup_count=1)
    new = grids["d"].table_for(
        PartitionTable.assign(["a", "b", "c", "d"], PARTITIONS, previous=old.partitions)
    )
    sent = _rebalance_all(grids, old, new)
    gained = {p for p in range(PARTITIONS) if not set(new.replicas(p)) <= set(old.replicas(p))}
    assert sum(sent.values()) == len(gained) < PARTITIONS
    migrated = collections.Counter(target for _, target, _ in net.ops("grid_migrate"))
    assert set(migrated) == {m for p in gained for m in new.replicas(p) if m not in old.replicas(p)}
    assert grids["b"].get_all("m") == data
    _assert_placement(grids, new, "m", data)


def test_given_stale_data_on_a_receiver_when_rebalanced_in_small_batches_then_the_sender_copy_wins(
    net: FakeNetwork,
) -> None:
    grids, old = _cluster(net, ["a", "b"], backup_count=0, max_batch_bytes=1500)
    data = {f"k{i}": "v" * 200 for i in range(150)}
    grids["a"].put("m", data)
    grids["c"] = net.add("c", backup_count=0, max_batch_bytes=1500)
    new = ReplicaTable(PartitionTable.assign(["a", "b", "c"], PARTITIONS, previous=old.partitions), 0)
    received = new.partitions.partitions_of("c")[0]
    grids["c"].store.put(received, "m", ["stale"], [serialization.dumps("left over")])
    grids["c"].store.put(received, "gone", ["stale"], [serialization.dumps("left over")])
    _rebalance_all(grids, old, new)
    migrated = collections.Counter(target for _, target, _ in net.ops("grid_migrate"))
    assert migrated["c"] > 1
    assert grids["a"].get_all("m") == data
    assert grids["a"].get_all("gone") == {}
    _assert_placement(grids, new, "m", data)


def test_given_two_adjacent_members_die_with_one_backup_when_rebalanced_then_lost_partitions_reported(
    net: FakeNetwork, caplog: pytest.LogCaptureFixture
) -> None:
    grids, old = _cluster(net, ["a", "b", "c", "d"], backup_count=1)
    data = _data()
    grids["a"].put("m", data)
    net.dead.update({"c", "d"})
    new = ReplicaTable(PartitionTable.assign(["a", "b"], PARTITIONS, previous=old.partitions), 1)
    with caplog.at_level(logging.ERROR, logger=grid_mod.__name__):
        _rebalance_all(grids, old, new)
    lost = tuple(p for p in range(PARTITIONS) if set(old.replicas(p)) <= {"c", "d"})
    assert lost
    assert grids["a"].lost_partitions == grids["b"].lost_partitions == lost
    assert "lost" in caplog.text
    survivors = {key: value for key, value in data.items() if _partition(key) not in lost}
    assert grids["a"].get_all("m") == survivors
    _assert_placement(grids, new, "m", survivors)
    assert grids["a"].local_primary_entries("m", new.partitions.partitions_of("a")) == {
        p: {k: v for k, v in survivors.items() if _partition(k) == p}
        for p in new.partitions.partitions_of("a")
    }


def test_given_a_receiver_dies_during_rebalance_when_rebalanced_then_grid_error_and_nothing_dropped(
    net: FakeNetwork,
) -> None:
    grids, old = _cluster(net, ["a", "b", "c"], backup_count=0)
    data = _data()
    grids["a"].put("m", data)
    grids["d"] = net.add("d", backup_count=0)
    new = ReplicaTable(PartitionTable.assign(["a", "b", "c", "d"], PARTITIONS, previous=old.partitions), 0)
    net.dead.add("d")
    with pytest.raises(GridError, match="member d failed grid_migrate"):
        grids["a"].rebalance(old, new)
    kept = {
        k: serialization.loads(v)
        for p in old.holders_of("a")
        for k, v in grids["a"].store.entries(p, "m").items()
    }
    assert kept == {k: v for k, v in data.items() if _partition(k) in old.holders_of("a")}


# --------------------------------------------------------------------------- bulk operations


def test_given_maps_when_copied_and_deleted_by_prefix_then_only_the_named_maps_change(
    net: FakeNetwork,
) -> None:
    grids, table = _cluster(net, ["a", "b", "c"], backup_count=1)
    first, second = _data(prefix="x"), _data(prefix="y")
    grids["a"].put("snap.1.a", first)
    grids["a"].put("snap.1.b", second)
    grids["a"].put("other", {"keep": True})
    grids["a"].put("snap.2.a", {"old": 1})
    puts_before = len(net.ops("grid_put"))
    grids["b"].copy_map("snap.1.a", "snap.2.a")
    assert len(net.ops("grid_put")) == puts_before
    assert sorted(target for _, target, _ in net.ops("grid_copy")) == ["a", "b", "c"]
    assert grids["c"].get_all("snap.2.a") == first
    _assert_placement(grids, table, "snap.2.a", first)
    grids["c"].delete_maps("snap.1.")
    assert grids["a"].map_names("snap.") == ["snap.2.a"]
    assert grids["a"].get_all("snap.1.b") == {}
    _assert_placement(grids, table, "snap.1.a", {})
    assert grids["b"].get_all("other") == {"keep": True}
    assert grids["b"].get_all("snap.2.a") == first
    with pytest.raises(ValueError, match="onto itself"):
        grids["a"].copy_map("other", "other")


# --------------------------------------------------------------------------- map files


def test_given_a_map_when_written_to_a_directory_then_read_back_equal(
    net: FakeNetwork, tmp_path: Path
) -> None:
    grids, _ = _cluster(net, ["a", "b"], backup_count=1)
    data = _data()
    grids["b"].put("snap/1:a", data)
    directory = tmp_path / "offload"
    path = grids["a"].write_map_to_directory("snap/1:a", directory)
    assert path == grid_files.map_file_path(directory, "snap/1:a")
    assert path.parent == directory
    assert [p.name for p in directory.iterdir()] == [path.name]
    assert grid_files.read_map_from_directory(directory, "snap/1:a") == data
    grids["b"].put("snap/1:a", {"k0": "newer"})
    grids["a"].write_map_to_directory("snap/1:a", directory)
    assert grid_files.read_map_from_directory(directory, "snap/1:a") == {**data, "k0": "newer"}
    assert len(list(directory.iterdir())) == 1
    grids["a"].write_map_to_directory("empty", directory)
    assert grid_files.read_map_from_directory(directory, "empty") == {}


@pytest.fixture
def map_file(net: FakeNetwork, tmp_path: Path) -> Path:
    grids, _ = _cluster(net, ["a"], backup_count=0)
    grids["a"].put("m", {"k": 1, ("t", 2): Reading("s", (0.5,)), 3: None})
    return grids["a"].write_map_to_directory("m", tmp_path)


def test_given_a_truncated_map_file_when_read_then_snapshot_data_error_names_it(
    map_file: Path, tmp_path: Path
) -> None:
    data = map_file.read_bytes()
    for length in range(len(data)):
        map_file.write_bytes(data[:length])
        with pytest.raises(SnapshotDataError, match="truncated") as caught:
            grid_files.read_map_from_directory(tmp_path, "m")
        assert caught.value.path == map_file
        assert str(map_file) in str(caught.value)
    map_file.write_bytes(data + b"\0")
    with pytest.raises(SnapshotDataError, match="1 bytes follow"):
        grid_files.read_map_from_directory(tmp_path, "m")


def test_given_any_flipped_bit_in_a_map_file_when_read_then_snapshot_data_error(
    map_file: Path, tmp_path: Path
) -> None:
    data = map_file.read_bytes()
    reasons = set()
    for offset in range(len(data)):
        corrupted = bytearray(data)
        corrupted[offset] ^= 0x10
        map_file.write_bytes(bytes(corrupted))
        with pytest.raises(SnapshotDataError) as caught:
            grid_files.read_map_from_directory(tmp_path, "m")
        assert caught.value.path == map_file
        reasons.add(caught.value.reason.split(" ")[0])
    assert {"not", "format", "CRC32"} <= reasons


def test_given_a_missing_or_foreign_map_file_when_read_then_snapshot_data_error(
    map_file: Path, tmp_path: Path
) -> None:
    with pytest.raises(SnapshotDataError, match="does not exist"):
        grid_files.read_map_from_directory(tmp_path, "absent")
    map_file.rename(grid_files.map_file_path(tmp_path, "other"))
    with pytest.raises(SnapshotDataError, match="holds map 'm', not 'other'"):
        grid_files.read_map_from_directory(tmp_path, "other")
