"""Stable partitioning: the same key gets the same partition in every process, whatever PYTHONHASHSEED."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import os
import subprocess
import sys
import zlib
from collections import Counter
from typing import Any

import pytest

from jetlet.core import DEFAULT_PARTITIONER, HashPartitioner, stable_hash
from jetlet.core.partitioning import DEFAULT_PARTITION_COUNT

# The same source makes the keys here and in the child process, so both hash equal values.
_KEYS_SOURCE = """
import dataclasses, random

@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: str

def make_keys():
    rng = random.Random(20240501)
    keys = []
    for _ in range(300):
        keys.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyzäö€") for _ in range(rng.randint(0, 12))))
        keys.append(bytes(rng.randrange(256) for _ in range(rng.randint(0, 10))))
        keys.append(rng.randint(-10**12, 10**12))
        keys.append(rng.uniform(-1e6, 1e6))
        keys.append((rng.randint(0, 99), "k" + str(rng.randint(0, 99)), (rng.random(), None)))
        keys.append(Point(rng.randint(0, 1000), str(rng.random())))
    keys.extend([0, -1, 2**63, 2**64 + 7, True, False, None, "", b"", (), 0.5, float("inf")])
    return keys
"""

_CHILD = (
    _KEYS_SOURCE
    + """
import json, sys
from jetlet.core import stable_hash
print(json.dumps([[stable_hash(k), stable_hash(k) % 271, hash("salted")] for k in make_keys()]))
"""
)


def _keys() -> list[Any]:
    namespace: dict[str, Any] = {}
    exec(_KEYS_SOURCE, namespace)
    keys: list[Any] = namespace["make_keys"]()
    return keys


def _child_hashes(seed: str) -> list[list[int]]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    result: list[list[int]] = json.loads(done.stdout)
    return result


def test_given_many_keys_when_hashed_in_processes_with_other_hash_seeds_then_partitions_are_identical() -> (
    None
):
    # given keys of every supported kind, hashed here
    keys = _keys()
    here = [[stable_hash(k), stable_hash(k) % 271] for k in keys]
    # when two child processes with different hash seeds hash the same keys
    first, second = _child_hashes("1"), _child_hashes("987654")
    # then the builtin hash differed (so the check is meaningful) but the stable hash did not
    assert first[0][2] != second[0][2]
    assert [row[:2] for row in first] == here
    assert [row[:2] for row in second] == here


def test_given_default_partitioner_when_partitioning_then_it_is_stable_hash_modulo_count() -> None:
    keys = _keys()
    assert DEFAULT_PARTITION_COUNT == 271
    for key in keys:
        partition = DEFAULT_PARTITIONER.get_partition(key, DEFAULT_PARTITION_COUNT)
        assert partition == stable_hash(key) % 271
        assert 0 <= partition < 271
        assert HashPartitioner().get_partition(key, 7) == stable_hash(key) % 7


def test_given_many_string_keys_when_partitioned_then_they_spread_over_most_partitions() -> None:
    partitions = Counter(stable_hash(f"key-{i}") % 271 for i in range(10_000))
    assert len(partitions) > 260
    assert max(partitions.values()) < 10_000 / 271 * 3


def test_given_every_key_when_hashed_then_non_negative_and_64_bit() -> None:
    for key in [*_keys(), -(2**70), -0.0]:
        assert 0 <= stable_hash(key) < 2**64


def test_given_equal_numeric_keys_when_hashed_then_they_share_a_hash() -> None:
    assert stable_hash(1) == stable_hash(1.0) == stable_hash(True)
    assert stable_hash(0) == stable_hash(0.0) == stable_hash(False)


def test_given_tuples_when_hashed_then_order_matters_and_nesting_is_supported() -> None:
    assert stable_hash(("a", 1)) != stable_hash((1, "a"))
    assert stable_hash((("a",), 1)) == stable_hash((("a",), 1))
    assert stable_hash(("a", ("b", None))) != stable_hash(("a", ("b",)))


def test_given_text_when_hashed_then_it_is_crc32_of_its_utf8_bytes() -> None:
    assert stable_hash("€uro") == zlib.crc32("€uro".encode())
    assert stable_hash(b"\x00\xff") == zlib.crc32(b"\x00\xff")


class _Colour(enum.Enum):
    RED = "red"
    BLUE = 2


@dataclasses.dataclass(frozen=True)
class _Frozen:
    a: int
    b: str


@dataclasses.dataclass(frozen=True)
class _OtherFrozen:
    a: int
    b: str


@dataclasses.dataclass
class _Mutable:
    a: int


class _Custom:
    def __jetlet_hash__(self) -> int:
        return -5


def test_given_enum_datetime_and_custom_keys_when_hashed_then_stable_by_value() -> None:
    assert stable_hash(_Colour.RED) == stable_hash("red")
    assert stable_hash(_Colour.BLUE) == stable_hash(2)
    moment = datetime.datetime(2024, 5, 1, 12, 30)
    assert stable_hash(moment) == stable_hash(datetime.datetime(2024, 5, 1, 12, 30))
    assert stable_hash(datetime.date(2024, 5, 1)) != stable_hash(datetime.date(2024, 5, 2))
    assert stable_hash(_Custom()) == (-5) & (2**64 - 1)
    assert stable_hash(bytearray(b"xy")) == stable_hash(b"xy")


def test_given_frozen_dataclasses_when_hashed_then_by_class_name_and_fields() -> None:
    assert stable_hash(_Frozen(1, "x")) == stable_hash(_Frozen(1, "x"))
    assert stable_hash(_Frozen(1, "x")) != stable_hash(_Frozen(2, "x"))
    assert stable_hash(_Frozen(1, "x")) != stable_hash(_OtherFrozen(1, "x"))


@pytest.mark.parametrize(
    ("key", "type_name"),
    [([1, 2], "list"), ({1}, "set"), (_Mutable(1), "_Mutable"), (object(), "object"), ((1, [2]), "list")],
)
def test_given_key_without_stable_hash_when_hashed_then_type_error_names_its_type(
    key: object, type_name: str
) -> None:
    with pytest.raises(TypeError, match=f"key of type '{type_name}'"):
        stable_hash(key)
