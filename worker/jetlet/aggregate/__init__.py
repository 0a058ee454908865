"""Aggregate operations: how to fold many items into one result.

An :class:`AggregateOperation` is a set of functions over an *accumulator*:
``create`` a new one, ``accumulate`` an item into it, ``combine`` two of them
(for two-stage aggregation across processors and members), optionally
``deduct`` one from another (so a sliding window slides in O(1)), then
``export`` (a result, accumulator still usable) or ``finish`` (the final
result). Python accumulators are often immutable (an ``int`` count), so every
function *returns* the accumulator; a mutable accumulator returns itself.

>>> op = counting()
>>> acc = op.create_fn()
>>> for item in "abc":
...     acc = op.accumulate_fn(0)(acc, item)
>>> op.finish_fn(acc)
3
"""

from __future__ import annotations

from jetlet.aggregate.operation import AggregateOperation
from jetlet.aggregate.operations import (
    all_of,
    averaging,
    bottom_n,
    concatenating,
    counting,
    filtering,
    flat_mapping,
    grouping,
    grouping_by,
    linear_trend,
    mapping,
    max_by,
    min_by,
    pick_any,
    reducing,
    summing,
    to_dict,
    to_list,
    to_set,
    top_n,
)

__all__ = [
    "AggregateOperation",
    "all_of",
    "averaging",
    "bottom_n",
    "concatenating",
    "counting",
    "filtering",
    "flat_mapping",
    "grouping",
    "grouping_by",
    "linear_trend",
    "mapping",
    "max_by",
    "min_by",
    "pick_any",
    "reducing",
    "summing",
    "to_dict",
    "to_list",
    "to_set",
    "top_n",
]
