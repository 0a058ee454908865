"""Chunks of records as rows of plain values on a network edge: no pickle reduce per record.

The C pickler writes an object of a user class through ``__reduce_ex__`` and a REDUCE opcode, which
cost a NEXMark ``Bid`` 0.8-1.6 µs to encode on the 2-core VM, while a tuple of the same fields
pickles in about 0.3 µs (unpickling costs the same either way: the class is called once per
record). On NEXMark Q4 and Q6 about half of all events cross a partitioned edge to the other
member, so that reduce was the largest cost a second member added per event. A class whose
instances are values, rebuilt exactly by ``cls(*fields)``, says so with ``__jetlet_fields__``: the
names of those fields in the constructor's order (:func:`fields_of`). Plain values (tuples,
numbers, strings, bytes, None) pickle in C already, and travel as they are. A data chunk whose
items are such records, or ``(timestamp, record)`` pairs (a timestamped stage's events; any pair,
in fact), with at least one record of a class that names its fields or one plain tuple, then
travels as :data:`Rows`:

* the timestamps (the pairs' first values) as one list (None for bare records);
* each item's class as an index into the groups (None when the chunk has one class);
* per class, its records as tuples of their fields, in order; plain values as they are.

A chunk of pairs so pickles one tuple less per item, with no failed attempt first for a chunk of
plain tuples (NEXMark's winning bids: a bid as a tuple of the four fields it needs, an auction as
``(id, the tuple of its field values)``).

Encoding is C code only (``map`` with ``operator.itemgetter``/``attrgetter`` and ``type``,
``itertools.compress`` to pick a class's records); the pickler then writes tuples of plain values.
:func:`decode` calls each class once per record (``itertools.starmap``) and merges the classes
back in order with ``map(next, ...)``. :func:`encode` returns None for any other chunk, which is
then pickled as it is. Two items that were one object arrive as two equal objects: records are
values.

>>> import dataclasses
>>> @dataclasses.dataclass
... class Point:
...     __jetlet_fields__ = ("x", "y")
...     x: int
...     y: int
>>> rows = encode([(10, Point(1, 2)), (11, Point(3, 4))])
>>> timestamps, classes, [(kind, fields)] = rows
>>> timestamps, classes, kind.__name__, fields
([10, 11], None, 'Point', [(1, 2), (3, 4)])
>>> decode(rows)
[(10, Point(x=1, y=2)), (11, Point(x=3, y=4))]
>>> encode([(10, (1, 2)), (11, (3, 4))])
([10, 11], None, [(<class 'tuple'>, [(1, 2), (3, 4)])])
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable
from typing import Any

FIELDS_ATTRIBUTE = "__jetlet_fields__"

Group = tuple[type, list[Any]]
"""One class and the fields of its records as tuples (its values, for a class in :data:`AS_THEY_ARE`)."""
Rows = tuple[list[Any] | None, list[int] | None, list[Group]]
"""``(timestamps, class index of each item, groups)``; see the module doc."""

AS_THEY_ARE: frozenset[type] = frozenset({tuple, int, float, str, bytes, bool, type(None)})
"""Classes whose values travel as they are: the C pickler writes them without a reduce."""

_first = operator.itemgetter(0)
_second = operator.itemgetter(1)


def fields_of(kind: type) -> tuple[str, ...] | None:
    """The fields ``kind`` travels as (its ``__jetlet_fields__``), or None when it does not say."""
    fields = getattr(kind, FIELDS_ATTRIBUTE, None)
    if type(fields) is not tuple or not fields:
        return None
    return fields


def encode(items: list[Any]) -> Rows | None:
    """``items`` (not empty) as rows when every item is a record or a ``(timestamp, record)`` pair."""
    timestamps: list[Any] | None = None
    records = items
    if type(items[0]) is tuple:
        if set(map(type, items)) != {tuple} or set(map(len, items)) != {2}:
            return None
        timestamps = list(map(_first, items))
        records = list(map(_second, items))
    classes = list(map(type, records))
    kinds = list(dict.fromkeys(classes))
    getters: list[Callable[[Any], tuple[Any, ...]] | None] = []
    for kind in kinds:
        if kind in AS_THEY_ARE:
            getters.append(None)
            continue
        getter = _getter(kind)
        if getter is None:
            return None  # a record that does not say its fields: the pickler's
        getters.append(getter)
    if tuple not in kinds and all(getter is None for getter in getters):
        return None  # plain values only, none a tuple: pickled as they are
    if len(kinds) == 1:
        return timestamps, None, [(kinds[0], _fields(getters[0], records))]
    index = {kind: position for position, kind in enumerate(kinds)}
    ids = list(map(index.__getitem__, classes))
    groups: list[Group] = []
    for position, (kind, getter) in enumerate(zip(kinds, getters, strict=True)):
        groups.append((kind, _fields(getter, itertools.compress(records, map(position.__eq__, ids)))))
    return timestamps, ids, groups


def _fields(getter: Callable[[Any], tuple[Any, ...]] | None, records: Iterable[Any]) -> list[Any]:
    return list(records) if getter is None else list(map(getter, records))


def _getter(kind: type) -> Callable[[Any], tuple[Any, ...]] | None:
    fields = fields_of(kind)
    if fields is None:
        return None
    if len(fields) == 1:
        return _one_field(operator.attrgetter(fields[0]))
    getter: Callable[[Any], tuple[Any, ...]] = operator.attrgetter(*fields)
    return getter


def _one_field(getter: Callable[[Any], Any]) -> Callable[[Any], tuple[Any, ...]]:
    return lambda record: (getter(record),)


def decode(rows: Rows) -> list[Any]:
    """The items :func:`encode` made ``rows`` of, in their order.

    Raises ValueError (or TypeError) when the parts do not fit together.
    """
    timestamps, ids, groups = rows
    built = [_built(kind, fields) for kind, fields in groups]
    if ids is None:
        if len(built) != 1:
            raise ValueError(f"{len(built)} groups of rows without class indexes")
        records = built[0]
    else:
        if len(ids) != sum(map(len, built)):
            raise ValueError(f"{len(ids)} class indexes for {sum(map(len, built))} records")
        records = list(map(next, map([iter(group) for group in built].__getitem__, ids)))
        if len(records) != len(ids):
            raise ValueError("more class indexes for a class than it has records")
    if timestamps is None:
        return records
    return list(zip(timestamps, records, strict=True))


def _built(kind: type, fields: list[Any]) -> list[Any]:
    if kind not in AS_THEY_ARE:
        return list(itertools.starmap(kind, fields))
    if not set(map(type, fields)) <= {kind}:  # the encoder groups values by their exact class
        raise ValueError(f"a group of {kind.__name__} values holds another class")
    return list(fields)
