"""Jet's adaptive receive window, counted in items (sans-IO).

Over the network there is no bounded queue to push back on a producer, and
TCP's own window cannot help because one connection carries every edge of
every job. So each receiver tells each sender how far it may go, as in TCP:

* the receiver counts the items it has *processed* (handed on downstream)
  from one sender: its acknowledged sequence ``acked``;
* every flow-control period (100 ms) it sends an ack carrying the *send
  limit* ``acked + window``: the sender may have sent at most that many items
  in all;
* before each ack the window adapts to the rate of processing: the *target*
  is ``multiplier`` (3) times the items processed since the previous ack,
  projected onto one period (``processed * period_ms / elapsed_ms``, so a late
  ack does not inflate the rate), and the window moves *halfway* from its
  current size toward the target (integer halving toward zero, as Jet's
  ``ReceiverTasklet``), never below ``floor`` so that a stalled stream can
  always restart. In a steady state the window holds about three periods
  (300 ms) worth of items.

As in Jet, the first ack only starts the clock, and a receiver with nothing
waiting in its inbox does not shrink the window (the sender, not the
consumer, is what is slow): pass ``waiting`` to :meth:`ReceiveWindow.ack`.

:class:`SendWindow` is the sender's side: it starts with the receiver's
initial window, counts what it sent, takes the latest limit from each ack,
and refuses to go past it, so the items in flight never exceed the window.
Acks arrive on the network thread while the sender tasklet fills a packet
within the room it was given, so a limit may shrink below what was already
promised: those items still go (the receiver's window is a target, not a
buffer size), and :meth:`SendWindow.room` stays 0 until the acks catch up.
"""

from __future__ import annotations

import math

DEFAULT_MULTIPLIER = 3
"""Jet's ``receive_window_multiplier``."""

DEFAULT_PERIOD_MILLIS = 100
"""Jet's ``flow_control_period_millis``."""

INITIAL_RECEIVE_WINDOW = 1024
"""Items a sender may send before the receiver's first ack."""

MIN_RECEIVE_WINDOW = 16
"""The window never shrinks below this many items."""


def _half_toward_zero(value: int) -> int:
    return value // 2 if value >= 0 else -(-value // 2)


class ReceiveWindow:
    """The receiver's flow-control state for one sender on one edge (see the module docstring)."""

    def __init__(
        self,
        multiplier: int = DEFAULT_MULTIPLIER,
        initial: int = INITIAL_RECEIVE_WINDOW,
        *,
        floor: int = MIN_RECEIVE_WINDOW,
        period_ms: float = DEFAULT_PERIOD_MILLIS,
    ) -> None:
        if multiplier < 1 or floor < 1 or initial < floor or period_ms <= 0:
            raise ValueError(
                "ReceiveWindow needs multiplier >= 1, floor >= 1, initial >= floor and period_ms > 0, got "
                f"multiplier={multiplier}, floor={floor}, initial={initial}, period_ms={period_ms}"
            )
        self.multiplier = multiplier
        self.floor = floor
        self.period_ms = period_ms
        self.window = initial
        """Current window size, in items."""
        self.acked = 0
        """Items processed so far (the acknowledged sequence)."""
        self._acked_at_last_ack = 0
        self._last_ack_ms: float | None = None

    def processed(self, n: int) -> None:
        """Count ``n`` more items from this sender as processed."""
        if n < 0:
            raise ValueError(f"processed item count must be >= 0, got {n}")
        self.acked += n

    def ack(self, now_ms: float, waiting: int | None = None) -> int:
        """Adapt the window and return the send limit for the sender: ``acked + window``.

        ``now_ms``: a monotonic clock in milliseconds. ``waiting``: items received but
        not yet processed; 0 keeps the window from shrinking (None: unknown, always adapt).
        """
        delta = self.acked - self._acked_at_last_ack
        self._acked_at_last_ack = self.acked
        last_ms, self._last_ack_ms = self._last_ack_ms, now_ms
        if last_ms is not None:
            elapsed_ms = now_ms - last_ms
            per_period = delta if elapsed_ms <= 0 else delta * self.period_ms / elapsed_ms
            target = self.multiplier * math.ceil(per_period)
            change = _half_toward_zero(target - self.window)
            if change < 0 and waiting == 0:
                change = 0
            self.window = max(self.floor, self.window + change)
        return self.acked + self.window


class SendWindow:
    """The sender's flow-control state toward one receiver on one edge."""

    def __init__(self, initial_limit: int = INITIAL_RECEIVE_WINDOW) -> None:
        self.sent_seq = 0
        """Items sent so far."""
        self.limit = initial_limit
        """The latest send limit: ``sent_seq`` goes past it only by what :meth:`room` promised before."""
        self._promised = initial_limit
        """``sent_seq`` plus the room given by the last :meth:`room` call."""

    def room(self) -> int:
        """How many more items may be sent now (promised: a shrinking ack does not take it back)."""
        room = max(0, self.limit - self.sent_seq)
        self._promised = self.sent_seq + room
        return room

    def can_send(self, n: int) -> bool:
        """True when ``n`` more items stay within the window (sending none always does)."""
        return n <= self.room()

    def sent(self, n: int) -> None:
        """Count ``n`` items as sent; :class:`ValueError` if that exceeds both the window and the promise."""
        if n and self.sent_seq + n > max(self.limit, self._promised):
            raise ValueError(
                f"sending {n} items would exceed the window: {self.sent_seq} sent, limit {self.limit}"
            )
        self.sent_seq += n

    def on_ack(self, limit: int) -> None:
        """Take the send limit of the receiver's latest ack (it may shrink)."""
        self.limit = limit
