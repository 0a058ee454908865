"""Event time: how timestamps and watermarks are made, and how time is cut into windows.

Two value types, as in Hazelcast Jet:

* :class:`EventTimePolicy` tells ``insert_watermarks_p`` how to read an
  item's timestamp (``timestamp_fn``), how to wrap the item it emits
  (``wrap_fn``, by default the pipeline's ``(timestamp, item)`` event tuple),
  and how to derive watermarks. The watermark policy is Jet's *limiting lag*:
  the watermark is the highest timestamp seen so far minus ``allowed_lag``,
  so items may arrive out of order by up to ``allowed_lag``; an item older
  than the last emitted watermark is *late*. Emitted watermarks are
  *throttled*: rounded down to the boundaries of frames of
  ``watermark_throttling_frame_size`` (shifted by the offset), so at most one
  watermark per frame is emitted. A source that sees no item for
  ``idle_timeout_ms`` declares itself idle with ``IDLE_MESSAGE``.

* :class:`SlidingWindowPolicy` cuts the time axis into *frames* of
  ``frame_size`` (shifted by ``frame_offset``); a window is
  ``frames_per_window`` consecutive frames, and a sliding window advances by
  one frame. Frames and windows are identified by their *end* timestamp
  (exclusive), as in Jet: an event at ``ts`` falls into the frame that ends at
  ``higher_frame_ts(ts)``, and the window ending at ``end`` covers
  ``[end - window_size, end)``.

>>> policy = sliding_win_policy(10, 5)
>>> policy.frame_size, policy.frames_per_window, policy.window_size
(5, 2, 10)
>>> policy.floor_frame_ts(12), policy.higher_frame_ts(12), policy.higher_frame_ts(15)
(10, 15, 20)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = [
    "EventTimePolicy",
    "SlidingWindowPolicy",
    "sliding_win_policy",
    "tumbling_win_policy",
    "wrap_as_event",
]


def wrap_as_event(item: Any, timestamp: int) -> tuple[int, Any]:
    """The default ``wrap_fn``: the pipeline's timestamped event ``(timestamp, item)``."""
    return (timestamp, item)


def _require_int(name: str, value: object, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__qualname__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


@dataclasses.dataclass(frozen=True, slots=True)
class SlidingWindowPolicy:
    """Frames of ``frame_size`` starting at multiples of it plus ``frame_offset``; windows of frames."""

    frame_size: int
    frame_offset: int = 0
    frames_per_window: int = 1

    def __post_init__(self) -> None:
        _require_int("frame_size", self.frame_size, 1)
        _require_int("frames_per_window", self.frames_per_window, 1)
        _require_int("frame_offset", self.frame_offset, 0)
        if self.frame_offset >= self.frame_size:
            raise ValueError(
                f"frame_offset must be less than frame_size ({self.frame_size}), got {self.frame_offset}"
            )

    @property
    def window_size(self) -> int:
        """The length of a window: ``frame_size * frames_per_window``."""
        return self.frame_size * self.frames_per_window

    @property
    def is_tumbling(self) -> bool:
        """True when a window is one frame (windows do not overlap)."""
        return self.frames_per_window == 1

    def floor_frame_ts(self, timestamp: int) -> int:
        """The highest frame boundary ``<= timestamp``."""
        return timestamp - (timestamp - self.frame_offset) % self.frame_size

    def higher_frame_ts(self, timestamp: int) -> int:
        """The lowest frame boundary ``> timestamp``: the end of the frame holding ``timestamp``."""
        return self.floor_frame_ts(timestamp) + self.frame_size

    def with_offset(self, offset: int) -> SlidingWindowPolicy:
        """The same windows, with frames shifted by ``offset`` (``0 <= offset < frame_size``)."""
        return SlidingWindowPolicy(self.frame_size, offset, self.frames_per_window)

    def to_tumbling_by_frame(self) -> SlidingWindowPolicy:
        """A tumbling policy whose windows are this policy's frames (the first stage of two)."""
        return SlidingWindowPolicy(self.frame_size, self.frame_offset, 1)


def sliding_win_policy(window_size: int, slide_by: int) -> SlidingWindowPolicy:
    """Windows of ``window_size`` that advance by ``slide_by``; the size must be a multiple of the slide.

    >>> sliding_win_policy(10_000, 10).frames_per_window
    1000
    """
    _require_int("window_size", window_size, 1)
    _require_int("slide_by", slide_by, 1)
    if window_size % slide_by:
        raise ValueError(f"window_size ({window_size}) must be an integer multiple of slide_by ({slide_by})")
    return SlidingWindowPolicy(slide_by, 0, window_size // slide_by)


def tumbling_win_policy(window_size: int) -> SlidingWindowPolicy:
    """Back-to-back windows of ``window_size``."""
    return sliding_win_policy(window_size, window_size)


@dataclasses.dataclass(frozen=True, slots=True)
class EventTimePolicy:
    """How ``insert_watermarks_p`` timestamps items and makes watermarks (Jet's ``EventTimePolicy``).

    ``timestamp_fn`` reads an item's event time; None means the source gives
    native timestamps (``insert_watermarks_p`` needs a function). ``wrap_fn``
    makes the emitted item from the item and its timestamp; None emits the
    item unchanged.
    """

    timestamp_fn: Callable[[Any], int] | None
    allowed_lag: int
    wrap_fn: Callable[[Any, int], Any] | None = wrap_as_event
    idle_timeout_ms: int = 60_000
    """After this long without items emit ``IDLE_MESSAGE`` once; 0 never does."""
    watermark_throttling_frame_size: int = 1
    watermark_throttling_frame_offset: int = 0

    def __post_init__(self) -> None:
        if self.timestamp_fn is not None and not callable(self.timestamp_fn):
            raise TypeError(f"timestamp_fn must be callable or None, got {self.timestamp_fn!r}")
        if self.wrap_fn is not None and not callable(self.wrap_fn):
            raise TypeError(f"wrap_fn must be callable or None, got {self.wrap_fn!r}")
        _require_int("allowed_lag", self.allowed_lag, 0)
        _require_int("idle_timeout_ms", self.idle_timeout_ms, 0)
        _require_int("watermark_throttling_frame_size", self.watermark_throttling_frame_size, 1)
        _require_int("watermark_throttling_frame_offset", self.watermark_throttling_frame_offset, 0)
        if self.watermark_throttling_frame_offset >= self.watermark_throttling_frame_size:
            raise ValueError(
                "watermark_throttling_frame_offset must be less than watermark_throttling_frame_size "
                f"({self.watermark_throttling_frame_size}), got {self.watermark_throttling_frame_offset}"
            )

    @property
    def throttling(self) -> SlidingWindowPolicy:
        """The frames that emitted watermarks are rounded down to."""
        return SlidingWindowPolicy(
            self.watermark_throttling_frame_size, self.watermark_throttling_frame_offset
        )

    def watermark_for(self, top_timestamp: int) -> int:
        """The throttled limiting-lag watermark once ``top_timestamp`` is the highest seen."""
        return self.throttling.floor_frame_ts(top_timestamp - self.allowed_lag)
