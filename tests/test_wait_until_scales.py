"""Deadlines of ``wait_until`` scale with the machine's load (issue 16 item 12)."""

from __future__ import annotations

import threading

import pytest

from jetlet import testing


def test_a_busy_machine_gets_a_longer_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a machine with four times as much runnable work as cores
    monkeypatch.setattr(testing.os, "getloadavg", lambda: (8.0, 8.0, 8.0))
    monkeypatch.setattr(testing.os, "cpu_count", lambda: 2)
    assert testing.load_factor() == 4.0
    # when a condition takes twice the nominal timeout, the wait still sees it
    ready = threading.Event()
    threading.Timer(0.2, ready.set).start()
    testing.wait_until(ready.is_set, "the timer fired", timeout=0.1)


def test_an_idle_machine_keeps_the_nominal_deadline_and_the_factor_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(testing.os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    assert testing.load_factor() == 1.0
    with pytest.raises(AssertionError, match=r"timed out after 0\.05 s"):
        testing.wait_until(lambda: False, "never", timeout=0.05)
    monkeypatch.setattr(testing.os, "getloadavg", lambda: (100.0, 100.0, 100.0))
    assert testing.load_factor() == testing.MAX_LOAD_FACTOR
