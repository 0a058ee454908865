"""Pipeline API benchmark: word count and NEXMark Q5 against plain-Python loops doing the same work.

Two jobs written with the Pipeline API, each run on one embedded member and
measured in the same run as a plain-Python loop that computes the same
answer:

* **word count** — ``Sources.from_iterable(lines).flat_map(tokenize)
  .grouping_key(word).aggregate(counting())`` into ``Sinks.map``, over the
  bundled text repeated :data:`WORD_COUNT_TEXT_COPIES` times, against a
  ``collections.Counter`` loop over the same ``tokenize``;
* **NEXMark Q5** ("hot items": the auction with the most bids in the last
  10 s, sliding by 1 s) — a finite stream of ``(timestamp_ms, auction)`` bids
  (in event-time order up to a jitter smaller than the allowed lag; skewed
  towards a hot auction that changes every 2 s) from
  ``Sources.stream_from_generator`` (only processor 0 emits), counted per
  auction in a sliding window by ``counting()``, then the top auction of
  every window picked by ``max_by`` in a tumbling window of one slide. The
  plain loop does what a careful Python programmer would: per-frame counts
  per auction, a running window count that adds the entering frame and
  deducts the leaving one, and the top auction per window. Ties are broken
  by the higher auction id on both sides, so the answers are unique and must
  be equal;
* **Q5's sliding-window count** alone (the issue's target): the same bids
  counted per auction in the same windows, every ``(window, auction,
  count)`` result compared with the plain frame loop's, which materialises
  the same results.

Only the job is timed (submit to join; the instance starts before), the best
of ``--repeats`` runs; the input lists are built before timing, so neither
side pays for generating them. The engine's answer is compared with the
plain loop's after timing and a difference raises. Each line reports items
per second (words, or bids) and ``engine/plain``, the engine's throughput as
a fraction of the plain loop's.
Run: ``python bench/pipeline_bench.py [--repeats N]``.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import _common
import jetlet
from jetlet import word_count
from jetlet.aggregate import counting, max_by
from jetlet.pipeline import Pipeline, Sinks, Sources, StreamStage, WindowDefinition

WORD_COUNT_TEXT_COPIES = 400

Q5_BIDS = 1_000_000
Q5_EVENT_TIME_MS = 100_000
Q5_AUCTIONS = 5_000
Q5_WINDOW_MS = 10_000
Q5_SLIDE_MS = 1_000
Q5_JITTER_MS = 200
Q5_HOT_PERIOD_MS = 2_000
Q5_ALLOWED_LAG_MS = 500

Bid = tuple[int, int]
"""``(timestamp_ms, auction_id)``."""
Winner = tuple[int, int, int]
"""``(window_end_ms, auction_id, bids)``: the top auction of the window ending at ``window_end_ms``."""


# -- word count ------------------------------------------------------------------


def _word(word: str) -> str:
    return word


def _word_count_pipeline(lines: list[str]) -> Pipeline:
    p = Pipeline()
    (
        p.read_from(Sources.from_iterable(lines))
        .flat_map(word_count.tokenize)
        .grouping_key(_word)
        .aggregate(counting())
        .write_to(Sinks.map("counts"))
    )
    return p


def _timed_pipeline_word_count(lines: list[str], repeats: int) -> float:
    with jetlet.embedded() as jet:
        counts = jet.get_map("counts")

        def run() -> None:
            counts.clear()
            jet.new_job(_word_count_pipeline(lines)).join()

        seconds = _common.best_time(run, repeats)
        if dict(counts) != _common.plain_word_count(lines):
            raise AssertionError("the word-count pipeline's counts differ from collections.Counter's")
    return seconds


# -- NEXMark Q5 ------------------------------------------------------------------


def make_bids(count: int = Q5_BIDS, seed: int = 5) -> list[Bid]:
    """``count`` bids evenly over the event time, each up to the jitter late, on drifting hot auctions.

    Every :data:`Q5_HOT_PERIOD_MS` a new random auction becomes the hot
    one; a bid goes to ``hot + offset`` with ``offset`` skewed towards 0
    (``AUCTIONS * random() ** 4``: 12 % of bids go to the hot auction), so
    all auctions get bids and the top auction changes as the window slides.
    """
    rng = random.Random(seed)
    hot = [rng.randrange(Q5_AUCTIONS) for _ in range(Q5_EVENT_TIME_MS // Q5_HOT_PERIOD_MS + 1)]
    step = Q5_EVENT_TIME_MS / count
    bids: list[Bid] = []
    for sequence in range(count):
        event_ms = int(sequence * step)
        offset = int(Q5_AUCTIONS * rng.random() ** 4)
        auction = (hot[event_ms // Q5_HOT_PERIOD_MS] + offset) % Q5_AUCTIONS
        bids.append((event_ms + rng.randrange(Q5_JITTER_MS), auction))
    return bids


def _plain_windows(bids: list[Bid], emit: Callable[[int, Counter[int]], None]) -> None:
    """Frames of counts per auction; a running window adds the entering frame and deducts the leaving one.

    ``emit(window_end, counts)`` sees every window that holds bids.
    """
    frames: dict[int, Counter[int]] = {}
    for timestamp, auction in bids:
        frame_end = timestamp - timestamp % Q5_SLIDE_MS + Q5_SLIDE_MS
        frame = frames.get(frame_end)
        if frame is None:
            frame = frames[frame_end] = Counter()
        frame[auction] += 1
    window: Counter[int] = Counter()
    last_end = max(frames) + Q5_WINDOW_MS - Q5_SLIDE_MS
    for end in range(min(frames), last_end + 1, Q5_SLIDE_MS):
        window.update(frames.get(end, ()))
        if window:
            emit(end, window)
        leaving = frames.get(end - Q5_WINDOW_MS + Q5_SLIDE_MS)
        if leaving:
            window.subtract(leaving)
            for auction in [a for a in leaving if window[a] <= 0]:
                del window[auction]


def _plain_q5(bids: list[Bid]) -> list[Winner]:
    """The top auction of every window."""
    winners: list[Winner] = []

    def top(end: int, window: Counter[int]) -> None:
        count, auction = max((count, auction) for auction, count in window.items())
        winners.append((end, auction, count))

    _plain_windows(bids, top)
    return winners


def _plain_sliding_count(bids: list[Bid]) -> list[Winner]:
    """Every auction's count in every window: ``(window end, auction, count)``."""
    counts: list[Winner] = []
    _plain_windows(bids, lambda end, window: counts.extend((end, a, c) for a, c in window.items()))
    return counts


def _bid_time(bid: Bid) -> int:
    return bid[0]


def _bid_auction(bid: Bid) -> int:
    return bid[1]


def _count_then_auction(result: Any) -> tuple[int, int]:
    return (result.result, result.key)


def _winner(window: Any) -> Winner:
    top = window.result
    return (top.end, top.key, top.result)


def _bid_counts(bids: list[Bid]) -> tuple[Pipeline, StreamStage[Any]]:
    """Q5's first half: bids per auction in a 10 s window sliding by 1 s (only processor 0 reads)."""

    def generate(context: Any) -> Iterator[Bid]:
        if context.global_processor_index == 0:
            yield from bids

    p = Pipeline()
    counts = (
        p.read_from(Sources.stream_from_generator(generate, name="bids"))
        .with_timestamps(_bid_time, allowed_lag=Q5_ALLOWED_LAG_MS)
        .grouping_key(_bid_auction)
        .window(WindowDefinition.sliding(Q5_WINDOW_MS, Q5_SLIDE_MS))
        .aggregate(counting())
    )
    return p, counts


def _sliding_count_pipeline(bids: list[Bid], sink: list[Any]) -> Pipeline:
    p, counts = _bid_counts(bids)
    counts.write_to(Sinks.to_list(sink))
    return p


def _q5_pipeline(bids: list[Bid], sink: list[Any]) -> Pipeline:
    """The whole query: the sliding counts, then the top auction of each step."""
    p, counts = _bid_counts(bids)
    top = counts.window(WindowDefinition.tumbling(Q5_SLIDE_MS)).aggregate(max_by(_count_then_auction))
    top.map(_winner).write_to(Sinks.to_list(sink))
    return p


def _timed(
    make: Callable[[list[Bid], list[Any]], Pipeline],
    bids: list[Bid],
    expected: list[Winner],
    shape: Callable[[Any], Winner],
    repeats: int,
) -> float:
    """The best job time of ``make``'s pipeline; its output, shaped as ``expected``, must equal it."""
    out: list[Any] = []

    def run() -> None:
        out.clear()
        jet.new_job(make(bids, out)).join()

    with jetlet.embedded() as jet:
        seconds = _common.best_time(run, repeats)
    if sorted(map(shape, out)) != sorted(expected):
        raise AssertionError(
            f"{make.__name__}: the results differ from the plain loop's ({len(out)} vs {len(expected)})"
        )
    return seconds


def _as_count(result: Any) -> Winner:
    return (result.end, result.key, result.result)


def _as_winner(winner: Winner) -> Winner:
    return winner


# -- report ----------------------------------------------------------------------


def main(argv: Sequence[str] = ()) -> str:
    """Run the benchmark and return its Markdown section (a heading and a table)."""
    repeats = _common.parse_repeats(argv, __doc__.splitlines()[0] if __doc__ else "pipeline benchmark")
    lines = word_count.bundled_text().splitlines() * WORD_COUNT_TEXT_COPIES
    words = sum(len(word_count.tokenize(line)) for line in lines)
    plain_wc = _common.best_time(lambda: _common.plain_word_count(lines), repeats)
    pipeline_wc = _timed_pipeline_word_count(lines, repeats)
    bids = make_bids()
    expected = _plain_q5(bids)
    plain_q5 = _common.best_time(lambda: _plain_q5(bids), repeats)
    pipeline_q5 = _timed(_q5_pipeline, bids, expected, _as_winner, repeats)
    counts = _plain_sliding_count(bids)
    plain_count = _common.best_time(lambda: _plain_sliding_count(bids), repeats)
    pipeline_count = _timed(_sliding_count_pipeline, bids, counts, _as_count, repeats)
    rows = [
        _common.result_row("word count: plain `Counter` loop", words, plain_wc, plain_wc),
        _common.result_row("word count: Pipeline API", words, pipeline_wc, plain_wc),
        _common.result_row("Q5 sliding-window count: plain frame loop", len(bids), plain_count, plain_count),
        _common.result_row("Q5 sliding-window count: Pipeline API", len(bids), pipeline_count, plain_count),
        _common.result_row(
            "NEXMark Q5 (count + top auction): plain frame loop", len(bids), plain_q5, plain_q5
        ),
        _common.result_row(
            "NEXMark Q5 (count + top auction): Pipeline API", len(bids), pipeline_q5, plain_q5
        ),
    ]
    table = _common.markdown_table(["workload", "items/s", "best ms", "engine/plain"], rows)
    return (
        "## Pipeline API (one embedded member)\n\n"
        f"Word count: {len(lines):,} lines, {words:,} words. "
        f"NEXMark Q5: {len(bids):,} bids over {Q5_EVENT_TIME_MS // 1000} s of event time, "
        f"{Q5_AUCTIONS:,} auctions (skewed to a hot one that changes every {Q5_HOT_PERIOD_MS // 1000} s), "
        f"windows of {Q5_WINDOW_MS // 1000} s sliding by "
        f"{Q5_SLIDE_MS // 1000} s: the count per auction ({len(counts):,} results), then the top auction "
        f"per window ({len(expected)} windows). "
        f"Best of {repeats}; `engine/plain` is the engine's throughput over the plain loop's.\n\n" + table
    )


if __name__ == "__main__":
    print(main(sys.argv[1:]))
