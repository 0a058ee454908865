"""Slow down whoever guesses credentials: a token bucket of failures per client address, and a summary log.

Theory of operation
-------------------
Each client address has a bucket of ``burst`` failure tokens that refills at
``per_second`` tokens a second. A failed authentication (:meth:`FailureLimiter.failed`)
takes one token. Before checking a credential, the caller asks
:meth:`FailureLimiter.allow`: ``None`` while the address holds at least one
token, else the seconds until it will (the caller answers ``429`` with
``Retry-After`` and does not check the credential at all, so a correct guess
made while limited is never confirmed). A legitimate client that mistypes a
few times never notices; a guesser gets ``burst`` tries, then ``per_second``
a second.

A bucket that has refilled is forgotten, and at most ``max_addresses`` are
kept (the oldest are dropped first), so memory stays bounded whatever
addresses a peer comes from. The limiter counts failures and refusals, and
:meth:`FailureLimiter.summary` returns a line describing them at most once
per ``report_interval_s`` (the first failure after a quiet interval is
reported at once; later ones are summed into the next line), so a flood of
bad tokens costs one log line per interval, not one per request.

Thread-safe (a lock): the REST API and the web console may share one.

>>> clock = [0.0]
>>> limiter = FailureLimiter(burst=2, per_second=1.0, clock=lambda: clock[0])
>>> limiter.failed("10.0.0.9"); limiter.failed("10.0.0.9")
>>> limiter.allow("10.0.0.9"), limiter.allow("10.0.0.8")
(1.0, None)
>>> clock[0] = 1.0
>>> limiter.allow("10.0.0.9") is None
True
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Callable


@dataclasses.dataclass
class _Bucket:
    tokens: float
    at: float


class FailureLimiter:
    """Per-address token buckets of authentication failures (see the module's docstring)."""

    def __init__(
        self,
        burst: int = 10,
        per_second: float = 1.0,
        *,
        max_addresses: int = 10_000,
        report_interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if burst < 1 or per_second <= 0 or max_addresses < 1:
            raise ValueError("burst and max_addresses must be >= 1 and per_second > 0")
        self.burst = burst
        self.per_second = per_second
        self.max_addresses = max_addresses
        self.report_interval_s = report_interval_s
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()
        self._failures: collections.Counter[str] = collections.Counter()
        self._limited: collections.Counter[str] = collections.Counter()
        self._reported_at = -float("inf")

    def allow(self, address: str) -> float | None:
        """``None`` if ``address`` may try a credential now, else the seconds until it may."""
        with self._lock:
            bucket = self._refilled(address)
            if bucket is None or bucket.tokens >= 1.0:
                return None
            self._limited[address] += 1
            return (1.0 - bucket.tokens) / self.per_second

    def failed(self, address: str) -> None:
        """Record a failed authentication by ``address`` (takes one token of its bucket)."""
        with self._lock:
            bucket = self._refilled(address)
            if bucket is None:
                self._make_room()
                bucket = self._buckets[address] = _Bucket(float(self.burst), self._clock())
            bucket.tokens = max(0.0, bucket.tokens - 1.0)
            self._failures[address] += 1

    def summary(self) -> str | None:
        """A line describing the failures and refusals since the last one, at most once per interval."""
        with self._lock:
            now = self._clock()
            if not self._failures and not self._limited:
                return None
            if now - self._reported_at < self.report_interval_s:
                return None
            self._reported_at = now
            total, limited = sum(self._failures.values()), sum(self._limited.values())
            addresses = (self._failures + self._limited).most_common()
            worst = ", ".join(
                f"{a} ({self._failures[a]} failed, {self._limited[a]} limited)" for a, _ in addresses[:3]
            )
            self._failures.clear()
            self._limited.clear()
        return (
            f"{total} failed and {limited} rate-limited authentication(s) from {len(addresses)} "
            f"address(es) since the last report: {worst}"
        )

    def _refilled(self, address: str) -> _Bucket | None:
        bucket = self._buckets.get(address)
        if bucket is None:
            return None
        now = self._clock()
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) * self.per_second)
        bucket.at = now
        if bucket.tokens >= self.burst:  # full again: nothing to remember
            del self._buckets[address]
            return None
        return bucket

    def _make_room(self) -> None:
        while len(self._buckets) >= self.max_addresses:  # the oldest first: O(1), and memory stays bounded
            del self._buckets[next(iter(self._buckets))]
