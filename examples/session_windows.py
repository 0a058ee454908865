"""Session windows: a user's clicks belong to one session until 30 s pass without a click.

Per user (the grouping key), clicks closer than the session gap merge into
one session; the result of each session is its click count and the pages
visited, with the session's start and end. A late click (beyond the allowed
lag) is dropped and counted in the job's metrics.

Run it with ``python examples/session_windows.py``, or submit it to a cluster
with ``jetlet submit examples/session_windows.py`` and read the sessions with
``jetlet get-list sessions``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import jetlet
from jetlet.aggregate import all_of, counting, to_list
from jetlet.pipeline import Pipeline, Sinks, Sources, WindowDefinition

GAP_MS = 30_000
CLICKS = [  # (timestamp_ms, user, page)
    (0, "ann", "/home"),
    (5_000, "bob", "/home"),
    (12_000, "ann", "/shop"),
    (20_000, "ann", "/cart"),
    (41_000, "bob", "/help"),
    (95_000, "ann", "/home"),
    (99_000, "ann", "/shop"),
    (100_000, "bob", "/home"),
]


def clicks(context: Any) -> Iterator[tuple[int, str, str]]:
    if context.global_processor_index == 0:
        yield from CLICKS


def build_pipeline() -> Pipeline:
    p = Pipeline()
    (
        p.read_from(Sources.stream_from_generator(clicks, name="clicks"))
        .with_timestamps(lambda click: click[0], allowed_lag=1_000)
        .grouping_key(lambda click: click[1])
        .window(WindowDefinition.session(GAP_MS))
        .aggregate(all_of(counting(), to_list()))
        .write_to(Sinks.list("sessions"))
    )
    return p


def main() -> int:
    with jetlet.embedded() as jet:
        jet.new_job(build_pipeline()).join()
        sessions = sorted(jet.get_list("sessions"), key=lambda s: (s.key, s.start))
    for session in sessions:
        count, visited = session.result
        pages = " -> ".join(click[2] for click in sorted(visited))
        bounds = f"[{session.start / 1000:6.1f} s, {session.end / 1000:6.1f} s)"
        print(f"{session.key:<4} {bounds} {count} clicks: {pages}")
    return 0 if len(sessions) == 5 else 1


if __name__ == "__main__":
    sys.exit(main())
