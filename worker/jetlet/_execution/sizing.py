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
objects with a ``__dict__``), from a sample of at most :data:`SAMPLE` parts
scaled to their number. It is called once per batch, on the batch's first
item, and the batch is taken to be that many times it: an estimate, right
for the usual stream of items of one shape, that costs the same whatever
the batch's length. Deeper structure is not counted: a list of lists of
large strings is underestimated, and the bound is then looser by as much.
"""

from __future__ import annotations

import sys
from itertools import islice
from typing import Any

SAMPLE = 8
"""Parts of a container measured for its estimate (the rest are taken to weigh as much on average)."""

_sizeof = sys.getsizeof


def item_bytes(item: Any) -> int:
    """An estimate of the bytes that ``item`` holds (see the module doc)."""
    size = _sizeof(item)
    kind = type(item)
    if kind is tuple or kind is list:
        count = len(item)
        if count:
            sample = item[:SAMPLE]
            size += sum(_sizeof(part) for part in sample) * count // len(sample)
        return size
    if kind is dict:
        return size + _mapping_bytes(item)
    fields = getattr(item, "__dict__", None)
    if type(fields) is dict:
        size += _sizeof(fields) + _mapping_bytes(fields)
    return size


def _mapping_bytes(mapping: dict[Any, Any]) -> int:
    count = len(mapping)
    if not count:
        return 0
    sample = list(islice(mapping.items(), SAMPLE))
    return sum(_sizeof(key) + _sizeof(value) for key, value in sample) * count // len(sample)
