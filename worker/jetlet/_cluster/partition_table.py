"""The partition table: which member owns each of the key space's partitions.

Every member derives the table from the member list alone, so all members
that agree on the member list agree on the table without talking about it.

Theory of operation
-------------------
With ``n`` members and ``P`` partitions every member owns ``P // n``
partitions and the first ``P % n`` members of a deterministic ranking own
one more (so counts differ by at most one). Without a previous table the
partitions are dealt round-robin in member order. With a previous table the
ranking puts members that already hold the most partitions first (ties in
member-list order), which maximises the partitions that can stay where they
are; then every partition stays with its previous owner while that owner is
still a member and under its quota, and the remaining partitions (owners
gone, or owners over quota) are dealt in ascending order to the members
still under quota, in member-list order. A partition therefore moves only if
it must: its owner left, or its owner holds more than its fair share.

>>> table = PartitionTable.assign(["a", "b"], partition_count=5)
>>> table.partitions_of("a"), table.partitions_of("b")
((0, 2, 4), (1, 3))
>>> grown = PartitionTable.assign(["a", "b", "c"], partition_count=5, previous=table)
>>> grown.partitions_of("c")
(4,)
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jetlet.config import DEFAULT_PARTITION_COUNT


@dataclass(frozen=True)
class PartitionTable:
    """An immutable assignment of partitions ``0 .. len(owners) - 1`` to member names."""

    members: tuple[str, ...]
    owners: tuple[str, ...]

    @classmethod
    def assign(
        cls,
        members: Sequence[str],
        partition_count: int = DEFAULT_PARTITION_COUNT,
        previous: PartitionTable | None = None,
    ) -> PartitionTable:
        """The balanced table for ``members``, moving as few partitions from ``previous`` as possible."""
        names = tuple(members)
        _validate(names, partition_count)
        if previous is None or len(previous.owners) != partition_count:
            owners = tuple(names[p % len(names)] for p in range(partition_count))
            return cls(names, owners)
        return cls(names, _rebalance(names, partition_count, previous.owners))

    @property
    def partition_count(self) -> int:
        return len(self.owners)

    def owner(self, partition: int) -> str:
        """The member that owns ``partition``."""
        return self.owners[partition]

    def partitions_of(self, member: str) -> tuple[int, ...]:
        """The partitions ``member`` owns, ascending (empty for a non-member)."""
        return tuple(p for p, owner in enumerate(self.owners) if owner == member)

    def moved_from(self, previous: PartitionTable) -> int:
        """How many partitions have a different owner than in ``previous``."""
        return sum(1 for old, new in zip(previous.owners, self.owners, strict=True) if old != new)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly description: the partition count and each member's partitions."""
        return {
            "partition_count": self.partition_count,
            "members": {member: list(self.partitions_of(member)) for member in self.members},
        }


def _validate(members: tuple[str, ...], partition_count: int) -> None:
    if not members:
        raise ValueError("a partition table needs at least one member")
    if len(set(members)) != len(members):
        raise ValueError(f"member names must be unique, got {list(members)}")
    if isinstance(partition_count, bool) or not isinstance(partition_count, int) or partition_count < 1:
        raise ValueError(f"partition_count must be a positive integer, got {partition_count!r}")


def _quotas(members: tuple[str, ...], partition_count: int, held: Mapping[str, int]) -> dict[str, int]:
    base, extra = divmod(partition_count, len(members))
    order = {name: i for i, name in enumerate(members)}
    ranking = sorted(members, key=lambda name: (-held.get(name, 0), order[name]))
    return {name: base + (1 if rank < extra else 0) for rank, name in enumerate(ranking)}


def _rebalance(members: tuple[str, ...], partition_count: int, previous: tuple[str, ...]) -> tuple[str, ...]:
    member_set = set(members)
    held = collections.Counter(owner for owner in previous if owner in member_set)
    room = _quotas(members, partition_count, held)
    owners: list[str | None] = [None] * partition_count
    for partition, owner in enumerate(previous):
        if owner in member_set and room[owner] > 0:
            owners[partition] = owner
            room[owner] -= 1
    receivers = iter([name for name in members for _ in range(room[name])])
    return tuple(owner if owner is not None else next(receivers) for owner in owners)
