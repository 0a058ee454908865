"""The partition table: deterministic, balanced, and moving as little as possible."""

from __future__ import annotations

import collections
import random

import pytest

from jetlet._cluster import partition_table
from jetlet._cluster.partition_table import PartitionTable


def _counts(table: PartitionTable) -> dict[str, int]:
    return {member: len(table.partitions_of(member)) for member in table.members}


def _minimum_moves(previous: PartitionTable, members: list[str]) -> int:
    """Reference: the fewest moves any balanced table needs, by a direct count."""
    base, extra = divmod(previous.partition_count, len(members))
    held = collections.Counter(o for o in previous.owners if o in members)
    best_kept = sorted((held[m] for m in members), reverse=True)
    kept = sum(min(h, base + (1 if i < extra else 0)) for i, h in enumerate(best_kept))
    return previous.partition_count - kept


def test_given_no_previous_table_when_assigned_then_round_robin_over_members() -> None:
    table = PartitionTable.assign(["a", "b", "c"], partition_count=7)
    assert table.owners == ("a", "b", "c", "a", "b", "c", "a")
    assert table.owner(4) == "b"
    assert table.partitions_of("a") == (0, 3, 6)
    assert table.partitions_of("zzz") == ()


def test_given_the_default_when_assigned_then_271_partitions() -> None:
    table = PartitionTable.assign(["m1"])
    assert table.partition_count == partition_table.DEFAULT_PARTITION_COUNT == 271
    assert set(table.owners) == {"m1"}


@pytest.mark.parametrize(
    ("members", "count", "message"),
    [([], 271, "at least one member"), (["a", "a"], 271, "unique"), (["a"], 0, "partition_count")],
)
def test_given_bad_input_when_assigned_then_value_error(members: list[str], count: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PartitionTable.assign(members, partition_count=count)


def test_given_random_member_histories_then_tables_are_deterministic_balanced_and_move_minimally() -> None:
    rng = random.Random(20240601)
    for _ in range(200):
        count = rng.randint(1, 300)
        pool = [f"m{i}" for i in range(12)]
        members = rng.sample(pool, rng.randint(1, 6))
        table = PartitionTable.assign(members, partition_count=count)
        for _step in range(4):
            # given: the next member list (some leave, some join, order kept by age)
            survivors = [m for m in members if rng.random() < 0.75] or members[:1]
            joiners = [m for m in pool if m not in survivors and rng.random() < 0.2]
            members = survivors + joiners
            # when
            new = PartitionTable.assign(members, partition_count=count, previous=table)
            # then: the same input gives the same table
            assert new == PartitionTable.assign(list(members), partition_count=count, previous=table)
            counts = _counts(new)
            assert sum(counts.values()) == count
            assert max(counts.values()) - min(counts.values()) <= 1
            assert set(new.owners) <= set(members)
            assert new.moved_from(table) == _minimum_moves(table, members)
            table = new


def test_given_a_member_leaves_then_only_its_partitions_and_the_rebalancing_share_move() -> None:
    before = PartitionTable.assign(["a", "b", "c"], partition_count=271)
    after = PartitionTable.assign(["a", "c"], partition_count=271, previous=before)
    # then: every partition of a and c stays, b's 90 are spread over a and c
    moved = [p for p in range(271) if before.owner(p) != after.owner(p)]
    assert moved == list(before.partitions_of("b"))
    assert sorted(_counts(after).values()) == [135, 136]


def test_given_a_member_joins_then_it_receives_a_fair_share_taken_from_the_others() -> None:
    before = PartitionTable.assign(["a", "b"], partition_count=271)
    after = PartitionTable.assign(["a", "b", "c"], partition_count=271, previous=before)
    assert len(after.partitions_of("c")) == 90
    assert after.moved_from(before) == 90
    assert after.to_dict()["members"]["c"] == list(after.partitions_of("c"))
