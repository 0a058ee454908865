"""Tasklets and what one step of a tasklet reports.

A tasklet is one non-blocking step, ``call() -> ProgressState``, that the
execution service calls over and over. The state says whether the call made
progress (moved an item, changed state) and whether the tasklet is done; a
worker whose whole pass over its tasklets made no progress backs off.
"""

from __future__ import annotations

import abc
import enum
import threading


class ProgressState(enum.Enum):
    """What one ``Tasklet.call()`` achieved (Jet's ``ProgressState``)."""

    NO_PROGRESS = (False, False)
    MADE_PROGRESS = (True, False)
    DONE = (True, True)
    WAS_ALREADY_DONE = (False, True)

    @property
    def made_progress(self) -> bool:
        return self.value[0]

    @property
    def is_done(self) -> bool:
        return self.value[1]

    @staticmethod
    def of(made_progress: bool, is_done: bool) -> ProgressState:
        if is_done:
            return ProgressState.DONE if made_progress else ProgressState.WAS_ALREADY_DONE
        return ProgressState.MADE_PROGRESS if made_progress else ProgressState.NO_PROGRESS


class Tasklet(abc.ABC):
    """One unit of cooperative work; ``call`` must return quickly and never block.

    The execution service times every call: ``busy_ns`` adds up the calls that made progress, and
    ``longest_call_ns`` is the longest call so far (a cooperative tasklet's long call holds up every
    other tasklet of its thread; a blocking tasklet's includes its waits).
    """

    name: str = "tasklet"
    busy_ns: int = 0
    longest_call_ns: int = 0

    def is_cooperative(self) -> bool:
        return True

    def init(self) -> None:
        """Called once, on the thread that will run the tasklet, before the first call."""

    @abc.abstractmethod
    def call(self) -> ProgressState:
        """Do a little work and report it."""

    def close(self) -> None:
        """Called once when the tasklet finishes, fails or is cancelled."""

    def wake_on_input(self, wake: threading.Event) -> bool:
        """Have ``wake`` set whenever input reaches this tasklet; True if arranged (a sink: no output
        to push on, no outside source to poll). The default: False, nothing arranged."""
        return False

    def waits_for_input_alone(self) -> bool:
        """Whether, idle now, only new input can give it work (so its thread may park until woken)."""
        return False


def call_times(tasklet: Tasklet) -> dict[str, int]:
    """A tasklet's call-time metrics: ``busyTimeMicros`` and ``longestCallMicros`` (see :class:`Tasklet`)."""
    return {"busyTimeMicros": tasklet.busy_ns // 1000, "longestCallMicros": tasklet.longest_call_ns // 1000}
