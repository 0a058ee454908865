"""How many bytes an item holds, estimated cheaply, and how many rows a list of items holds.

Queues between processors are bounded in items (``queue_size``), and that
bounds memory only while items are small: 1,024 items of 200 KB are 200 MB
in one queue. So each queue, and each sender of a distributed edge, also
holds at most a share of the member's ``max_queued_bytes``, and they need to
know what an item weighs without serializing it.

Theory of operation
-------------------
:func:`item_bytes` is ``sys.getsizeof`` of the item, plus that of its parts
one level down for the containers items usually are (tuples, lists, dicts,
objects with a ``__dict__`` or ``__slots__``), from a sample of at most
:data:`SAMPLE` parts scaled to their number; which kind a class is, is found
once per class. Strings, bytes and numbers take one ``getsizeof``. It is
called once per batch, on the batch's first item, and the batch is taken to
be that many times it: an estimate, right for the usual stream of items of
one shape, that costs the same whatever the batch's length. Deeper structure
is not counted: a list of lists of large strings is underestimated, and the
bound is then looser by as much.

Rows
----
Queue capacities and the received and emitted counts are counted in *rows*: an
ordinary item is one row, and an item that holds many (a record batch, whose class defines
``__jetlet_rows__(self) -> int``), or a ``(timestamp, batch)`` event of one, is as many rows as it
holds (at least one). :func:`batch_rows` looks at a list's first item only: a list of ordinary
items costs one type check, whatever its length; for a list of batches it calls
``__jetlet_rows__`` once per batch.
"""

from __future__ import annotations

import sys
from itertools import islice
from typing import Any

SAMPLE = 8
"""Parts of a container measured for its estimate (the rest are taken to weigh as much on average)."""

_sizeof = sys.getsizeof
_FLAT = frozenset({str, bytes, bytearray, int, float, bool, complex, type(None)})
_HAS_DICT = ("__dict__",)
"""The fields of a type whose instances keep their attributes in a ``__dict__``."""
_fields: dict[type, tuple[str, ...]] = {}
"""Per type: its ``__slots__`` (all of its classes'), :data:`_HAS_DICT`, or () for none; found once."""


def item_bytes(item: Any) -> int:
    """An estimate of the bytes that ``item`` holds (see the module doc)."""
    size = _sizeof(item)
    kind = type(item)
    if kind in _FLAT:
        return size
    if kind is tuple or kind is list:
        count = len(item)
        if count:
            sample = item[:SAMPLE]
            size += sum(_sizeof(part) for part in sample) * count // len(sample)
        return size
    if kind is dict:
        return size + _mapping_bytes(item)
    fields = _fields.get(kind)
    if fields is None:
        fields = _fields[kind] = _fields_of(kind)
    if fields is _HAS_DICT:
        attributes = item.__dict__
        return size + _sizeof(attributes) + _mapping_bytes(attributes)
    if fields:
        sample_fields = fields[:SAMPLE]
        size += (
            sum(_sizeof(getattr(item, f, None)) for f in sample_fields) * len(fields) // len(sample_fields)
        )
    return size


def _fields_of(kind: type) -> tuple[str, ...]:
    if getattr(kind, "__dictoffset__", 0):
        return _HAS_DICT
    slots: list[str] = []
    for klass in kind.__mro__:
        declared = klass.__dict__.get("__slots__", ())
        slots += [declared] if isinstance(declared, str) else [n for n in declared if n != "__weakref__"]
    return tuple(slots)


def _mapping_bytes(mapping: dict[Any, Any]) -> int:
    count = len(mapping)
    if not count:
        return 0
    sample = list(islice(mapping.items(), SAMPLE))
    return sum(_sizeof(key) + _sizeof(value) for key, value in sample) * count // len(sample)


def _payload(item: Any) -> Any:
    return item[1] if type(item) is tuple and len(item) == 2 else item


def batch_rows(items: list[Any]) -> list[int] | None:
    """The rows of each item of a non-empty list of record batches; None for ordinary items.

    Decided by the first item (see the module doc): a list is of one kind, and one type check is
    all an ordinary list costs. An item holds at least one row.
    """
    if getattr(type(_payload(items[0])), "__jetlet_rows__", None) is None:
        return None
    rows = []
    for item in items:
        count = getattr(_payload(item), "__jetlet_rows__", None)
        rows.append(max(1, count()) if count is not None else 1)
    return rows


def rows_of(items: list[Any]) -> int:
    """The rows a list of items holds: its length, or its batches' rows (see :func:`batch_rows`)."""
    rows = batch_rows(items) if items else None
    return len(items) if rows is None else sum(rows)
