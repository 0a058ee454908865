"""Window definitions (Jet's ``WindowDefinition``): how a stream is cut into windows.

* ``tumbling(size)``: back-to-back windows ``[k*size, (k+1)*size)``;
* ``sliding(size, slide)``: windows of ``size`` starting every ``slide``
  (``size`` must be a multiple of ``slide``); computed from per-slide
  *frames*, so a window costs a combine per frame, not a pass over its items;
* ``session(gap)``: per key, items closer than ``gap`` belong to one session.

Times are in the unit of the stage's timestamps (milliseconds, usually).
``set_early_results_period(ms)`` asks for results of windows still open,
every ``ms`` of wall-clock time, flagged ``is_early``.

>>> WindowDefinition.sliding(10_000, 1_000)
WindowDefinition(kind='sliding', size=10000, slide=1000, gap=0, early_results_period_millis=0)
"""

from __future__ import annotations

import dataclasses


def _positive(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"WindowDefinition: {name} must be a positive integer, got {value!r}")


@dataclasses.dataclass(frozen=True)
class WindowDefinition:
    """A tumbling, sliding or session window; build with the static methods."""

    kind: str
    size: int = 0
    slide: int = 0
    gap: int = 0
    early_results_period_millis: int = 0

    @staticmethod
    def tumbling(size: int) -> WindowDefinition:
        _positive("size", size)
        return WindowDefinition("sliding", size, size)

    @staticmethod
    def sliding(size: int, slide: int) -> WindowDefinition:
        _positive("size", size)
        _positive("slide", slide)
        if size % slide:
            raise ValueError(f"WindowDefinition: size ({size}) must be a multiple of slide ({slide})")
        return WindowDefinition("sliding", size, slide)

    @staticmethod
    def session(gap: int) -> WindowDefinition:
        _positive("gap", gap)
        return WindowDefinition("session", gap=gap)

    @property
    def is_tumbling(self) -> bool:
        return self.kind == "sliding" and self.size == self.slide

    def set_early_results_period(self, millis: int) -> WindowDefinition:
        """Emit early results of open windows every ``millis`` ms of wall-clock time (0: never)."""
        if not isinstance(millis, int) or millis < 0:
            raise ValueError(f"WindowDefinition: early_results_period_millis must be >= 0, got {millis!r}")
        return dataclasses.replace(self, early_results_period_millis=millis)
