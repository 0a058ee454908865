"""Sliding-window counting: cost per event and per result of ``aggregate_to_sliding_window_p``.

The issue's claim: 10,000 keys in a 10 s window sliding by 10 ms cost no
quadratic work, so the cost per event stays flat as the window/slide ratio
grows from 10 to 1,000. This benchmark keeps the slide at 10 ms and grows the
window: 100 ms, 1 s and 10 s (ratios 10, 100, 1000).

**Workload.** 100 events per millisecond (1,000 per 10 ms frame), event
times in order; the keys cycle through a fixed random permutation of the
10,000 keys, so any 10,000 consecutive events (100 ms) hold every key exactly
once. Every window, even the 100 ms one, therefore holds all 10,000 keys and
emits 10,000 results per slide: 10 results per event at every ratio, so a
flat cost per event and a flat cost per result are the same claim.

**What is timed.** The processor alone, run by hand (no engine): each
frame's 1,000 events go through ``process`` and a watermark at the frame's
end makes it emit the window ending there, as ``(window_end, key, count)``
tuples. Counting has ``deduct``, so the processor slides each key's running
count in O(1) per frame. Next to it, on the same frames, a plain-Python frame
loop does the same: one dict of counts per frame, a running dict per window
that adds the entering frame, materialises the same ``(window_end, key,
count)`` tuples, then deducts the leaving frame. Only the *steady state* is
measured: the first window/slide frames fill the first full window and are
not timed; then ``--events`` events (default 500,000, i.e. 500 slides) are
timed frame by frame, split into ``--repeats`` equal segments, and the best
segment counts. Every frame's results are checked equal between the two
(raise if not). Run: ``python bench/sliding_window_bench.py [--events N]
[--repeats N]`` (about 40 s with the defaults).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence

import _common
from jetlet.aggregate import operations
from jetlet.core import event_time
from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import watermark as wm
from jetlet.core.processors import windows
from jetlet.testing import make_context

KEYS = 10_000
EVENTS_PER_MS = 100
SLIDE_MS = 10
EVENTS_PER_FRAME = EVENTS_PER_MS * SLIDE_MS
WINDOWS_MS = (100, 1_000, 10_000)
DEFAULT_EVENTS = 500_000

Event = tuple[int, int]
"""``(timestamp_ms, key)``."""
Result = tuple[int, int, int]
"""``(window_end_ms, key, count)``."""


class FrameSource:
    """The events of frame ``index`` (``[index * slide, (index + 1) * slide)`` ms), made on demand."""

    def __init__(self, seed: int = 1) -> None:
        permutation = list(range(KEYS))
        random.Random(seed).shuffle(permutation)
        self._keys = permutation

    def frame(self, index: int) -> list[Event]:
        first = index * EVENTS_PER_FRAME
        keys, start_ms = self._keys, index * SLIDE_MS
        return [
            (start_ms + offset // EVENTS_PER_MS, keys[(first + offset) % KEYS])
            for offset in range(EVENTS_PER_FRAME)
        ]


def _event_key(event: Event) -> int:
    return event[1]


def _event_time(event: Event) -> int:
    return event[0]


def _result(start: int, end: int, key: int, count: int, is_early: bool) -> Result:
    return (end, key, count)


class ProcessorRunner:
    """``aggregate_to_sliding_window_p`` with counting, driven one frame at a time."""

    def __init__(self, window_ms: int) -> None:
        policy = event_time.sliding_win_policy(window_ms, SLIDE_MS)
        factory = windows.aggregate_to_sliding_window_p(
            _event_key, _event_time, policy, operations.counting(), _result
        )
        self._processor = factory()
        self._outbox = outbox_mod.Outbox(1, 1 << 30)
        self._processor.init(self._outbox, make_context())

    def _drain(self, into: list[Result]) -> None:
        outbox = self._outbox
        into.extend(outbox.buckets[0])
        outbox.buckets[0] = []
        outbox.take_control(0)

    def __call__(self, frame: list[Event]) -> list[Result]:
        """Process the frame's events, then the watermark at its end; return the window results."""
        processor = self._processor
        results: list[Result] = []
        inbox = inbox_mod.Inbox(frame)
        while inbox:
            processor.process(0, inbox)
        mark = wm.Watermark(frame[-1][0] + 1)
        while not processor.try_process_watermark(mark):
            self._drain(results)
        self._drain(results)
        return results


class FrameLoop:
    """The plain-Python floor: per-frame counts, a running window adding and deducting frames."""

    def __init__(self, window_ms: int) -> None:
        self._window_ms = window_ms
        self._frames: dict[int, dict[int, int]] = {}
        self._window: dict[int, int] = {}

    def __call__(self, frame_events: list[Event]) -> list[Result]:
        frames, window = self._frames, self._window
        end = frame_events[-1][0] + 1
        counts: dict[int, int] = {}
        get = counts.get
        for _timestamp, key in frame_events:
            counts[key] = get(key, 0) + 1
        frames[end] = counts
        window_get = window.get
        for key, count in counts.items():
            window[key] = window_get(key, 0) + count
        results = [(end, key, count) for key, count in window.items()]
        leaving = frames.pop(end - self._window_ms + SLIDE_MS, None)
        if leaving:
            for key, count in leaving.items():
                left = window[key] - count
                if left:
                    window[key] = left
                else:
                    del window[key]
        return results


def _best_segment(frame_seconds: list[float], segments: int) -> float:
    """The least total time of ``segments`` equal runs of consecutive frames."""
    size = max(1, len(frame_seconds) // segments)
    return min(sum(frame_seconds[i : i + size]) for i in range(0, size * segments, size))


def measure(window_ms: int, steady_frames: int, segments: int, source: FrameSource) -> tuple[float, float]:
    """Seconds per steady-state event of the processor and of the plain loop; raises if results differ."""
    runner, loop = ProcessorRunner(window_ms), FrameLoop(window_ms)
    warmup = window_ms // SLIDE_MS
    jetlet_seconds: list[float] = []
    plain_seconds: list[float] = []
    for index in range(warmup + steady_frames):
        frame = source.frame(index)
        started = time.perf_counter()
        got = runner(frame)
        middle = time.perf_counter()
        expected = loop(frame)
        done = time.perf_counter()
        if index >= warmup:
            jetlet_seconds.append(middle - started)
            plain_seconds.append(done - middle)
        if got != expected and sorted(got) != sorted(expected):
            raise AssertionError(f"window {window_ms} ms, frame {index}: the processor's results differ")
    events = (steady_frames // segments) * EVENTS_PER_FRAME
    return _best_segment(jetlet_seconds, segments) / events, _best_segment(plain_seconds, segments) / events


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--events", type=int, default=DEFAULT_EVENTS, help="steady-state events timed per window size"
    )
    parser.add_argument("--repeats", type=int, default=_common.DEFAULT_REPEATS, help="segments (best wins)")
    args = parser.parse_args(list(argv))
    if args.repeats < 1 or args.events < args.repeats * EVENTS_PER_FRAME:
        parser.error(f"need --repeats >= 1 and --events >= {EVENTS_PER_FRAME} x repeats")
    return args


def main(argv: Sequence[str] = ()) -> str:
    """Run the benchmark and return its Markdown section (a heading and a table)."""
    args = _parse(argv)
    steady_frames = args.events // EVENTS_PER_FRAME
    source = FrameSource()
    results_per_event = KEYS / EVENTS_PER_FRAME
    rows = []
    for window_ms in WINDOWS_MS:
        jetlet_per_event, plain_per_event = measure(window_ms, steady_frames, args.repeats, source)
        rows.append(
            [
                f"{window_ms // SLIDE_MS:,}",
                f"{window_ms / 1000:g} s",
                f"{results_per_event:g}",
                f"{jetlet_per_event * 1e6:.2f}",
                f"{jetlet_per_event / results_per_event * 1e9:.0f}",
                f"{plain_per_event * 1e6:.2f}",
                f"{plain_per_event / results_per_event * 1e9:.0f}",
                f"{plain_per_event / jetlet_per_event:.2f}",
            ]
        )
    headers = [
        "window/slide",
        "window",
        "results/event",
        "jetlet µs/event",
        "jetlet ns/result",
        "plain µs/event",
        "plain ns/result",
        "jetlet/plain speed",
    ]
    return (
        "## Sliding-window counting (`aggregate_to_sliding_window_p`, no engine)\n\n"
        f"{KEYS:,} keys, all present in every window; {EVENTS_PER_MS} events/ms; slide {SLIDE_MS} ms; "
        f"steady state only ({steady_frames * EVENTS_PER_FRAME:,} events after the first full window), "
        f"best of {args.repeats} segments. `jetlet/plain speed` is the plain frame loop's time over "
        "the processor's.\n\n" + _common.markdown_table(headers, rows)
    )


if __name__ == "__main__":
    print(main(sys.argv[1:]))
