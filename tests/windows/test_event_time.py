"""EventTimePolicy and SlidingWindowPolicy: frame arithmetic and argument validation."""

from __future__ import annotations

import random

import pytest

from jetlet.core import event_time


def reference_floor(ts: int, size: int, offset: int) -> int:
    """The highest ``offset + n * size`` not above ``ts``, by search (independent of the modulo)."""
    n = (ts - offset) // size + 2
    while offset + n * size > ts:
        n -= 1
    return offset + n * size


@pytest.mark.parametrize(("size", "offset"), [(1, 0), (10, 0), (10, 3), (7, 6)])
def test_frame_boundaries_match_a_reference_for_random_timestamps(size: int, offset: int) -> None:
    # given a policy with frames of `size` shifted by `offset`
    policy = event_time.SlidingWindowPolicy(size, offset, 3)
    rng = random.Random(size * 31 + offset)
    for ts in [rng.randint(-1000, 1000) for _ in range(300)] + [offset, offset - 1, offset + size]:
        # when frames are computed, then they are the boundaries around ts
        floor = reference_floor(ts, size, offset)
        assert policy.floor_frame_ts(ts) == floor
        assert policy.higher_frame_ts(ts) == floor + size
        assert policy.floor_frame_ts(ts) <= ts < policy.higher_frame_ts(ts)


def test_sliding_policy_cuts_windows_into_frames_of_the_slide() -> None:
    # given a sliding window of 10 s that slides by 10 ms
    policy = event_time.sliding_win_policy(10_000, 10)
    # then it has 1000 frames of 10 ms
    assert (policy.frame_size, policy.frame_offset, policy.frames_per_window) == (10, 0, 1000)
    assert policy.window_size == 10_000
    assert not policy.is_tumbling
    # and its first stage is tumbling by frame
    assert policy.to_tumbling_by_frame() == event_time.SlidingWindowPolicy(10, 0, 1)


def test_tumbling_policy_is_one_frame_per_window() -> None:
    policy = event_time.tumbling_win_policy(5)
    assert policy.is_tumbling
    assert (policy.frame_size, policy.window_size) == (5, 5)
    assert policy.with_offset(2).floor_frame_ts(6) == 2


def test_window_size_that_is_not_a_multiple_of_the_slide_is_refused_naming_both() -> None:
    with pytest.raises(ValueError, match=r"window_size \(10\).*multiple of slide_by \(3\)"):
        event_time.sliding_win_policy(10, 3)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((0, 1), ValueError, "window_size"),
        ((10, 0), ValueError, "slide_by"),
        ((10.0, 5), TypeError, "window_size"),
    ],
)
def test_sliding_policy_arguments_are_validated(
    args: tuple[object, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        event_time.sliding_win_policy(*args)  # type: ignore[arg-type]


def test_frame_offset_must_be_inside_a_frame() -> None:
    with pytest.raises(ValueError, match="frame_offset must be less than frame_size"):
        event_time.SlidingWindowPolicy(10, 10, 1)
    with pytest.raises(ValueError, match="frames_per_window"):
        event_time.SlidingWindowPolicy(10, 0, 0)


def test_event_time_policy_defaults_wrap_items_as_pipeline_events() -> None:
    policy = event_time.EventTimePolicy(timestamp_fn=len, allowed_lag=5)
    assert policy.wrap_fn is not None
    assert policy.wrap_fn("abc", 3) == (3, "abc")
    assert policy.idle_timeout_ms == 60_000
    assert policy.watermark_throttling_frame_size == 1


def test_watermark_is_top_timestamp_minus_lag_rounded_down_to_the_throttling_frame() -> None:
    # given a lag of 5 and throttling frames of 10 shifted by 2
    policy = event_time.EventTimePolicy(
        timestamp_fn=int,
        allowed_lag=5,
        watermark_throttling_frame_size=10,
        watermark_throttling_frame_offset=2,
    )
    # then the watermark is the frame boundary at or below top - lag
    assert [policy.watermark_for(top) for top in (17, 16, 26, 27, 37)] == [12, 2, 12, 22, 32]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"allowed_lag": -1}, "allowed_lag"),
        ({"allowed_lag": 0, "idle_timeout_ms": -5}, "idle_timeout_ms"),
        ({"allowed_lag": 0, "watermark_throttling_frame_size": 0}, "watermark_throttling_frame_size"),
        (
            {"allowed_lag": 0, "watermark_throttling_frame_size": 4, "watermark_throttling_frame_offset": 4},
            "watermark_throttling_frame_offset",
        ),
    ],
)
def test_event_time_policy_arguments_are_validated(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        event_time.EventTimePolicy(timestamp_fn=int, **kwargs)  # type: ignore[arg-type]


def test_event_time_policy_refuses_a_timestamp_fn_that_is_not_callable() -> None:
    with pytest.raises(TypeError, match="timestamp_fn"):
        event_time.EventTimePolicy(timestamp_fn=5, allowed_lag=0)  # type: ignore[arg-type]
