"""Serialization: exact round trips of every supported type, pickles only when allowed, clear errors."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import enum
import random
import threading
from typing import Any

import msgpack
import pytest

from jetlet._network import serialization
from jetlet._network.serialization import ExtCode, SerializationError, dumps, loads

UNPICKLED: list[str] = []


def _mark_unpickled() -> str:
    UNPICKLED.append("unpickled")
    return "payload"


class Booby:
    """Unpickling one of these records it in UNPICKLED: proof that a pickle was (not) loaded."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_mark_unpickled, ())


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


Pair = collections.namedtuple("Pair", "key value")


class Color(enum.IntEnum):
    RED = 1


def _same(a: Any, b: Any) -> bool:
    """Equal and of exactly the same types, all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    return bool(a == b)


SAMPLES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**63 - 1,
    -(2**63),
    2**64 - 1,
    2**64,
    -(2**64) - 5,
    10**40,
    1.5,
    -0.0,
    float("inf"),
    "",
    "héllo wörld",
    b"",
    b"\x00\xff",
    [],
    (),
    [1, [2, [3]]],
    (1, (2, (3,))),
    [(1, 2), [3, (4,)]],
    {"a": 1, "b": [1, 2]},
    {(1, 2): "tuple key", 3: "int key", frozenset({4}): "frozenset key"},
    {1, 2, 3},
    frozenset({"a", "b"}),
    set(),
    dt.datetime(2024, 2, 29, 23, 59, 59, 999999),
    dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
    dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=-3, minutes=-30))),
    dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1), "CET")),
    dt.date(1999, 12, 31),
    dt.time(23, 1, 2, 3),
    dt.time(1, 2, tzinfo=dt.UTC),
    dt.timedelta(days=-1, seconds=5, microseconds=7),
    Pair("k", 1),
    Color.RED,
    collections.Counter("abca"),
    collections.OrderedDict(a=1),
    Point(1, 2),
]


@pytest.mark.parametrize("value", SAMPLES, ids=lambda v: type(v).__name__)
def test_given_a_supported_value_when_round_tripped_then_equal_and_of_the_same_types(value: Any) -> None:
    assert _same(loads(dumps(value)), value)
    assert _same(loads(dumps([value, (value,)])), [value, (value,)])


@pytest.mark.parametrize(
    "batch",
    [
        [("a", 1), ("b", 2)],
        [(), ()],
        [(1,), (1, 2), ()],
        [((1, 2), [3]), ((4,), [])],
        [(Pair("k", 1), {"x": (1,)})],
        [(1, ("a", 2)), (2, ("b", 3))],
        [(1, ("a", (2.5, None))), (2, ("b", (3.5, b"x")))],
        [(1, ("a", 2)), (2, "not a tuple")],
    ],
)
def test_given_a_batch_of_tuples_when_round_tripped_then_rows_are_exact(batch: list[Any]) -> None:
    data = dumps(batch)
    assert msgpack.unpackb(data, ext_hook=lambda code, _: code) == ExtCode.TUPLE_ROWS
    assert _same(loads(data), batch)


def _is_hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _random_value(rng: random.Random, depth: int) -> Any:
    scalars = [
        lambda: None,
        lambda: rng.random() < 0.5,
        lambda: rng.randint(-(2**70), 2**70),
        lambda: rng.randint(-100, 100),
        lambda: rng.uniform(-1e9, 1e9),
        lambda: "".join(rng.choice("abcé😀") for _ in range(rng.randint(0, 6))),
        lambda: rng.randbytes(rng.randint(0, 6)),
        lambda: (
            dt.datetime(2000, 1, 1)
            + dt.timedelta(seconds=rng.randint(0, 10**9), microseconds=rng.randint(0, 999))
        ),
        lambda: dt.timedelta(microseconds=rng.randint(-(10**12), 10**12)),
    ]
    if depth == 0 or rng.random() < 0.4:
        return rng.choice(scalars)()
    width = rng.randint(0, 4)
    children = [_random_value(rng, depth - 1) for _ in range(width)]
    hashable = [c for c in children if _is_hashable(c)]
    kind = rng.choice(["list", "tuple", "dict", "set", "frozenset"])
    if kind == "list":
        return children
    if kind == "tuple":
        return tuple(children)
    if kind == "dict":
        return {key: child for key, child in zip(hashable, children, strict=False)}
    return set(hashable) if kind == "set" else frozenset(hashable)


def test_given_seeded_random_nested_values_when_round_tripped_then_all_exact() -> None:
    rng = random.Random(20240501)
    values = [_random_value(rng, depth=4) for _ in range(400)]
    for value in values:
        assert _same(loads(dumps(value)), value), value
    assert _same(loads(dumps(values)), values)


def test_given_pickled_objects_when_pickle_allowed_then_they_round_trip() -> None:
    value = [Point(1, 2), (lambda x: x + 1,), {"p": Point(3, 4)}]
    restored = loads(dumps(value))
    assert restored[0] == Point(1, 2) and restored[2] == {"p": Point(3, 4)}
    assert restored[1][0](41) == 42


@pytest.mark.parametrize(
    "wrap", [lambda b: b, lambda b: (1, b), lambda b: [{"k": {b}}], lambda b: [("x", b)]]
)
def test_given_a_pickle_anywhere_when_pickle_refused_then_error_and_nothing_unpickled(wrap: Any) -> None:
    UNPICKLED.clear()
    data = dumps(wrap(Booby()))
    with pytest.raises(SerializationError, match="refused to unpickle"):
        loads(data, allow_pickle=False)
    assert UNPICKLED == []
    loads(data, allow_pickle=True)
    assert UNPICKLED == ["unpickled"]


def test_given_plain_data_when_pickle_refused_then_it_still_loads() -> None:
    value = [("a", 1), {"b": {2.5}}, dt.date(2020, 1, 1)]
    assert _same(loads(dumps(value), allow_pickle=False), value)


def _ext(code: int, payload: Any) -> bytes:
    return bytes(msgpack.packb(msgpack.ExtType(code, msgpack.packb(payload))))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc1",
        dumps(["a", "b", (1, 2)])[:-1],
        dumps([1, 2]) + b"\x01",
        bytes(msgpack.packb(msgpack.ExtType(99, b"x"))),
        _ext(ExtCode.TUPLE_ROWS, [3, 2, [1, 2, 3, 4]]),
        _ext(ExtCode.TUPLE_ROWS, [2, 2, [1, 2, 3]]),
        _ext(ExtCode.TUPLE_ROWS, [2, [1, 1], [1, 2, 3]]),
        _ext(ExtCode.TUPLE_ROWS, [2, 2, [[1, 2], [3]]]),
        bytes(msgpack.packb(msgpack.ExtType(ExtCode.DATE, b"not a date"))),
        _ext(ExtCode.TIMEDELTA, "x"),
    ],
)
def test_given_corrupt_data_when_loaded_then_a_clear_serialization_error(data: bytes) -> None:
    with pytest.raises(SerializationError, match="corrupt data"):
        loads(data)


def test_given_an_object_cloudpickle_cannot_take_when_dumped_then_the_error_names_its_type() -> None:
    with pytest.raises(SerializationError, match="lock"):
        dumps([1, threading.Lock()])


def test_given_the_packer_pool_when_used_from_many_threads_then_results_stay_correct() -> None:
    values = [[(i, str(i), (i, [i]))] * 50 for i in range(8)]
    results: dict[int, Any] = {}

    def work(index: int) -> None:
        for _ in range(50):
            results[index] = loads(dumps(values[index]))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert all(_same(results[i], values[i]) for i in range(8))
    assert serialization._PACKER_POOL
