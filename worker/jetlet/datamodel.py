"""Value types that windowed processors and stages emit (Jet's ``com.hazelcast.jet.datamodel``).

* :class:`WindowResult` - the result of a window without grouping key.
* :class:`KeyedWindowResult` - the result of one key's window.
* :class:`TimestampedEntry` - a keyed value with a timestamp; the first
  stage of a two-stage window aggregation emits one per frame and key, with
  the frame's *end* timestamp and the frame's accumulator.

They are named tuples: immutable, hashable and cheap to make (a window
stage makes one per key and window). Windows are half-open,
``[start, end)``. ``is_early`` marks a result emitted before the window was
complete (early results); the final result of the same window follows
later.

>>> KeyedWindowResult(0, 10, "a", 3)
KeyedWindowResult(start=0, end=10, key='a', result=3)
>>> WindowResult(0, 10, 3, is_early=True)
WindowResult(start=0, end=10, result=3, is_early=True)
"""

from __future__ import annotations

from typing import Generic, NamedTuple, TypeVar

__all__ = ["KeyedWindowResult", "TimestampedEntry", "WindowResult"]

K = TypeVar("K")
R = TypeVar("R")
V = TypeVar("V")


class WindowResult(NamedTuple, Generic[R]):
    """The aggregated ``result`` of the window ``[start, end)``."""

    start: int
    end: int
    result: R
    is_early: bool = False

    def __repr__(self) -> str:
        early = ", is_early=True" if self.is_early else ""
        return f"WindowResult(start={self.start}, end={self.end}, result={self.result!r}{early})"


class KeyedWindowResult(NamedTuple, Generic[K, R]):
    """The aggregated ``result`` of ``key``'s items in the window ``[start, end)``."""

    start: int
    end: int
    key: K
    result: R
    is_early: bool = False

    def __repr__(self) -> str:
        early = ", is_early=True" if self.is_early else ""
        return (
            f"KeyedWindowResult(start={self.start}, end={self.end}, key={self.key!r}, "
            f"result={self.result!r}{early})"
        )


class TimestampedEntry(NamedTuple, Generic[K, V]):
    """``value`` of ``key`` at ``timestamp`` (for frames: the frame's end)."""

    timestamp: int
    key: K
    value: V
