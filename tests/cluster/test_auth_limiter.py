"""Guessing tokens is slowed down: a failure budget per address, then 429 with Retry-After, one log line.

Issue 15 item 8: a client could try about 1,700 tokens a second, each one a
log line. The limiter is tested with a fake clock, then through a real REST
server on loopback.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request

import pytest
from test_rest_and_client import TOKEN, Member

from jetlet._cluster import auth_limiter, rest_auth, rest_requests
from jetlet.testing import wait_until


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_address_gets_its_burst_then_waits_for_its_bucket_to_refill() -> None:
    clock = Clock()
    limiter = auth_limiter.FailureLimiter(burst=3, per_second=2.0, clock=clock)
    for _ in range(3):
        assert limiter.allow("a") is None
        limiter.failed("a")
    # then a must wait half a second (one token at 2 a second); b is not affected
    assert limiter.allow("a") == pytest.approx(0.5)
    assert limiter.allow("b") is None
    clock.now += 0.25
    assert limiter.allow("a") == pytest.approx(0.25)
    clock.now += 0.25
    assert limiter.allow("a") is None
    limiter.failed("a")
    assert limiter.allow("a") == pytest.approx(0.5)  # one more try, then waiting again


def test_a_refilled_address_is_forgotten_and_memory_is_bounded() -> None:
    clock = Clock()
    limiter = auth_limiter.FailureLimiter(burst=2, per_second=1.0, max_addresses=100, clock=clock)
    for i in range(1000):
        limiter.failed(f"10.0.{i // 256}.{i % 256}")
    assert len(limiter._buckets) == 100  # the oldest were dropped
    clock.now += 2.0  # every bucket is full again: asked about, each is forgotten
    assert all(limiter.allow(a) is None for a in list(limiter._buckets))
    assert not limiter._buckets


def test_failures_are_summarised_at_most_once_per_interval() -> None:
    clock = Clock()
    limiter = auth_limiter.FailureLimiter(burst=2, per_second=1.0, report_interval_s=10.0, clock=clock)
    assert limiter.summary() is None
    limiter.failed("a")
    first = limiter.summary()
    assert first is not None and first.startswith("1 failed and 0 rate-limited")
    for _ in range(50):
        limiter.failed("a")
        limiter.allow("a")
    limiter.failed("b")
    assert limiter.summary() is None  # within the interval
    clock.now += 10.0
    second = limiter.summary()
    assert second is not None
    assert second.startswith("51 failed and 50 rate-limited authentication(s) from 2 address(es)")
    assert "a (50 failed, 50 limited)" in second
    assert limiter.summary() is None


def _get(member: Member, token: str) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(f"http://{member.address}/jobs")
    request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        exc.read()
        return exc.code, dict(exc.headers)


def test_wrong_tokens_past_the_burst_get_429_and_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="jetlet._cluster.rest")
    member = Member()
    try:
        limiter = member.app[rest_auth.LIMITER_KEY]
        # given a client that guesses tokens as fast as it can
        answers = [_get(member, f"guess-{i}")[0] for i in range(limiter.burst + 40)]
        # then it gets its burst of 401s, then only 429s with Retry-After
        assert answers == [401] * limiter.burst + [429] * 40
        status, headers = _get(member, TOKEN)  # even the right token is not checked while limited
        assert status == 429 and int(headers["Retry-After"]) >= 1
        counts = rest_requests.refused_counts(member.app)
        assert counts["refused_unauthorized"] == limiter.burst
        assert counts["refused_rate_limited"] == 41
        # and once it has waited, the right token is accepted
        wait_until(lambda: _get(member, TOKEN)[0] == 200, "the address to be let in again", 10)
        # and the log has one line for all of it, not one per request
        lines = [r.getMessage() for r in caplog.records if "bad or missing tokens" in r.getMessage()]
        assert len(lines) == 1 and "127.0.0.1" in lines[0]
    finally:
        member.close()
