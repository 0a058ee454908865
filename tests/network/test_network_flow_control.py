"""Jet's adaptive receive window: the window math, and that a sender never exceeds its window."""

from __future__ import annotations

import math
import random

import pytest

from jetlet._network.flow_control import ReceiveWindow, SendWindow


def _reference_windows(
    initial: int, floor: int, multiplier: int, period: float, steps: list[tuple[int, float]]
) -> list[int]:
    """Jet's rule restated: target = multiplier x processed per period; move halfway, toward zero."""
    window, windows, last_time = initial, [], None
    for processed, now in steps:
        if last_time is not None:
            elapsed = now - last_time
            rate = processed if elapsed <= 0 else processed * period / elapsed
            target = multiplier * math.ceil(rate)
            window = max(floor, window + int((target - window) / 2))
        last_time = now
        windows.append(window)
    return windows


# steps: (items processed since the previous ack, time of the ack in ms)
WINDOW_CASES = {
    "first ack only starts the clock": [(500, 0.0)],
    "steady 100 per period converges to 300": [(0, 0.0)] + [(100, 100.0 * i) for i in range(1, 30)],
    "one step halfway from the initial": [(0, 0.0), (100, 100.0)],
    "a late ack is projected onto one period": [(0, 0.0), (100, 200.0)],
    "an early ack too": [(0, 0.0), (100, 50.0)],
    "a burst grows the window": [(0, 0.0), (5000, 100.0), (5000, 200.0)],
    "idle shrinks to the floor": [(0, 0.0)] + [(0, 100.0 * i) for i in range(1, 15)],
    "odd differences round toward zero": [(0, 0.0), (1, 100.0), (7, 200.0), (333, 300.0)],
    "same instant counts as one period": [(0, 5.0), (40, 5.0)],
}


@pytest.mark.parametrize("steps", WINDOW_CASES.values(), ids=WINDOW_CASES.keys())
def test_given_processing_between_acks_when_acking_then_the_window_follows_jets_rule(
    steps: list[tuple[int, float]],
) -> None:
    window = ReceiveWindow(multiplier=3, initial=1024, floor=16, period_ms=100)
    limits = []
    for processed, now in steps:
        window.processed(processed)
        limits.append(window.ack(now))
    expected = _reference_windows(1024, 16, 3, 100, steps)
    acked = [sum(p for p, _ in steps[: i + 1]) for i in range(len(steps))]
    assert limits == [a + w for a, w in zip(acked, expected, strict=True)]
    assert window.window == expected[-1]


def test_given_a_steady_rate_when_acked_many_times_then_the_window_is_three_periods_of_items() -> None:
    window = ReceiveWindow()
    for tick in range(40):
        window.processed(250)
        window.ack(100.0 * tick)
    assert window.window in (750, 751)  # halving toward zero stops one item above the target


def test_given_a_concrete_step_then_it_moves_exactly_halfway() -> None:
    window = ReceiveWindow(multiplier=3, initial=1024)
    window.ack(0.0)
    window.processed(100)
    assert window.ack(100.0) == 100 + 662  # 1024 + (3 * 100 - 1024) / 2
    assert window.window == 662


def test_given_nothing_waiting_when_the_target_is_smaller_then_the_window_does_not_shrink() -> None:
    window = ReceiveWindow(initial=1000)
    window.ack(0.0)
    window.processed(10)
    window.ack(100.0, waiting=0)
    assert window.window == 1000
    window.processed(1000)
    window.ack(200.0, waiting=0)
    assert window.window == 1000 + (3000 - 1000) // 2
    window.ack(300.0, waiting=5)
    assert window.window == 2000 // 2


def test_given_a_sender_and_a_slow_receiver_when_simulated_then_in_flight_never_exceeds_the_window() -> None:
    rng = random.Random(7)
    receiver = ReceiveWindow(multiplier=3, initial=64, floor=4)
    sender = SendWindow(initial_limit=64)
    granted_window = 64
    received = processed = 0
    now = 0.0
    receiver.ack(now)
    for tick in range(5000):
        want = rng.randint(0, 40)
        room = sender.room()
        batch = min(want, room)
        assert sender.can_send(batch) and not sender.can_send(room + 1)
        sender.sent(batch)
        received += batch
        if batch:  # what was just sent is within the limit, so in flight <= the window of the last ack
            assert sender.sent_seq <= sender.limit
            assert sender.sent_seq - processed <= granted_window
        capacity = rng.randint(0, 8) if tick < 2500 else rng.randint(20, 60)
        step = min(capacity, received - processed)
        receiver.processed(step)
        processed += step
        if tick % 10 == 9:
            now += 100.0
            sender.on_ack(receiver.ack(now, waiting=received - processed))
            granted_window = receiver.window
    assert processed > 10_000
    assert receiver.acked == processed


def test_given_a_send_window_when_an_ack_shrinks_it_then_there_is_no_room() -> None:
    sender = SendWindow(initial_limit=10)
    sender.sent(8)
    sender.on_ack(5)
    assert (sender.room(), sender.can_send(1), sender.can_send(0)) == (0, False, True)
    with pytest.raises(ValueError, match="exceed the window"):
        sender.sent(1)
    sender.on_ack(20)
    assert sender.room() == 12


def test_given_room_promised_when_an_ack_shrinks_the_limit_before_sending_then_the_promise_holds() -> None:
    # the sender tasklet takes items within room() while the network thread delivers a smaller limit
    sender = SendWindow(initial_limit=10)
    promised = sender.room()
    sender.on_ack(4)
    sender.sent(promised)
    assert (sender.sent_seq, sender.room()) == (10, 0)
    with pytest.raises(ValueError, match="exceed the window"):
        sender.sent(1)
    sender.on_ack(15)
    assert sender.room() == 5


@pytest.mark.parametrize(
    "kwargs",
    [{"multiplier": 0}, {"floor": 0}, {"initial": 3, "floor": 4}, {"period_ms": 0}],
)
def test_given_invalid_settings_then_construction_fails(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="ReceiveWindow needs"):
        ReceiveWindow(**kwargs)  # type: ignore[arg-type]


def test_given_a_negative_count_then_processed_refuses_it() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        ReceiveWindow().processed(-1)
