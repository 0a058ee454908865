"""How many bytes an item holds, estimated cheaply: for queues and network windows bounded in bytes.

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
