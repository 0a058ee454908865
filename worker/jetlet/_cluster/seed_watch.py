"""A member told whom to join (``--members``) that is still alone: say why, rarely, and maybe give up.

Theory of operation
-------------------
Without a word, a member whose seeds are down, or refuse its REST token,
would form a cluster of its own, and its user would believe it joined.
:class:`SeedWatch` is sans-IO: the member tells it what each message to a
seed met (:meth:`SeedWatch.note_failure`) and, every tick, whether it is
alone (:meth:`SeedWatch.observe`, which returns what to log and whether to
stop). A member with seeds that has been alone for :data:`FIRST_REPORT_MS`
logs one warning naming each seed and why it failed, then again after
intervals that double up to :data:`MAX_REPORT_INTERVAL_MS` (a line per
change of state, not one per retry); once it joins it logs that, once.
With ``join_timeout_ms`` > 0 (``--join-timeout-millis``) a member still
alone after that long gives up: it stops with a message naming the flag
instead of running as a cluster of one. A member without seeds (the first
of a cluster) is alone by design and never warned about.

>>> watch = SeedWatch(("127.0.0.1:8701",), join_timeout_ms=0)
>>> watch.observe(alone=True, now_ms=0)
Observation(log=None, give_up=False)
>>> watch.note_failure("127.0.0.1:8701", "unreachable (connection refused)")
>>> print(watch.observe(alone=True, now_ms=5_000).log)  # doctest: +NORMALIZE_WHITESPACE
still alone after 5 s: no seed of --members answered
(127.0.0.1:8701: unreachable (connection refused)); retrying, next report in 10 s
>>> watch.observe(alone=True, now_ms=6_000).log is None
True
"""

from __future__ import annotations

import dataclasses

FIRST_REPORT_MS = 5_000
"""How long a member with seeds may be alone before it says so."""
MAX_REPORT_INTERVAL_MS = 60_000
"""The longest interval between two reports of the same state."""


@dataclasses.dataclass(frozen=True)
class Observation:
    """What the member should do after a tick: log ``log`` (a warning unless ``give_up`` is False
    and the member joined: then it is news), and stop if ``give_up``."""

    log: str | None
    give_up: bool = False


class SeedWatch:
    """Reports a member alone despite its seeds, with backoff; gives up after a timeout (see the module)."""

    def __init__(self, seeds: tuple[str, ...], join_timeout_ms: int) -> None:
        self._seeds = seeds
        self._join_timeout_ms = join_timeout_ms
        self._failures: dict[str, str] = {}
        self._alone_since: int | None = None
        self._next_report: int | None = None
        self._interval = FIRST_REPORT_MS
        self._reported = False
        self._joined = False

    def note_failure(self, seed: str, reason: str) -> None:
        """A message to ``seed`` failed for ``reason`` (its latest reason is kept)."""
        self._failures[seed] = reason

    def observe(self, alone: bool, now_ms: int) -> Observation:
        """The member is (or is not) alone at ``now_ms``: what to log, and whether to give up."""
        if not self._seeds:
            return Observation(None)
        if not alone:
            news = "joined the cluster" if self._reported and not self._joined else None
            self._joined = True
            self._alone_since = None
            return Observation(news)
        if self._joined:  # alone again after a cluster went away: the failure detector speaks for that
            return Observation(None)
        if self._alone_since is None:
            self._alone_since = now_ms
            self._next_report = now_ms + FIRST_REPORT_MS
        waited = now_ms - self._alone_since
        if self._join_timeout_ms > 0 and waited >= self._join_timeout_ms:
            return Observation(
                f"no seed of --members answered within --join-timeout-millis {self._join_timeout_ms} "
                f"({self._why()}): stopping rather than running as a cluster of one",
                give_up=True,
            )
        assert self._next_report is not None
        if now_ms < self._next_report:
            return Observation(None)
        self._interval = min(self._interval * 2, MAX_REPORT_INTERVAL_MS)
        self._next_report = now_ms + self._interval
        self._reported = True
        return Observation(
            f"still alone after {waited // 1000} s: no seed of --members answered ({self._why()}); "
            f"retrying, next report in {self._interval // 1000} s"
        )

    def _why(self) -> str:
        if not self._failures:
            return f"{', '.join(self._seeds)}: no answer yet"
        return ", ".join(f"{seed}: {reason}" for seed, reason in sorted(self._failures.items()))
