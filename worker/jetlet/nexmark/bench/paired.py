"""Interleaved rounds and their statistics: the schedule, medians with spreads, ratios paired by round.

Theory of operation. On a shared machine the load changes from minute to minute, so a rate
measured at one time cannot be compared with one measured minutes later, and the best of a few runs
only picks the luckiest moment. The harness therefore runs in *rounds* (:func:`schedule`): round
``r`` runs every contender (jetlet on each member count, the plain loop) once per query, query by
query, so the contenders of a query run back to back, under the same load; the contenders' order
rotates by one each round, so none is always first (or always right after a cluster's previous
query). A ratio between two contenders — jetlet over the plain loop, 2 members over 1 — is taken
**per round** (:func:`paired_ratios`: the two runs of one round share its load) and summarized by
its median and its spread over the rounds (:class:`Spread`: the minimum and maximum, and the
interquartile range when there are at least :data:`IQR_MIN` rounds). Rates are summarized the same
way; no best-of anywhere.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

IQR_MIN = 4
"""Rounds from which the interquartile range is reported (with fewer it is the min-max in all but name)."""

Contender = TypeVar("Contender")


def schedule(
    rounds: int, queries: Sequence[str], contenders: Sequence[Contender]
) -> list[tuple[int, str, Contender]]:
    """Every run of the benchmark in order: ``(round, query, contender)`` (see the module doc).

    >>> schedule(2, ["q1"], ["a", "b", "c"])
    [(0, 'q1', 'a'), (0, 'q1', 'b'), (0, 'q1', 'c'), (1, 'q1', 'b'), (1, 'q1', 'c'), (1, 'q1', 'a')]
    """
    runs: list[tuple[int, str, Contender]] = []
    for index in range(rounds):
        shift = index % len(contenders) if contenders else 0
        order = [*contenders[shift:], *contenders[:shift]]
        runs.extend((index, query, contender) for query in queries for contender in order)
    return runs


@dataclasses.dataclass(frozen=True, slots=True)
class Spread:
    """The median of some values and how far they spread."""

    median: float
    low: float
    high: float
    count: int
    quartiles: tuple[float, float] | None
    """The first and third quartile, from :data:`IQR_MIN` values on."""

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        """The spread of ``values`` (at least one).

        >>> Spread.of([3.0, 1.0, 2.0]).text("{:.1f}")
        '2.0 (1.0-3.0)'
        """
        ordered = sorted(values)
        if not ordered:
            raise ValueError("no values")
        quartiles = None
        if len(ordered) >= IQR_MIN:
            first, _, third = statistics.quantiles(ordered, n=4, method="inclusive")
            quartiles = (first, third)
        return cls(statistics.median(ordered), ordered[0], ordered[-1], len(ordered), quartiles)

    def text(self, number: str) -> str:
        """``median (min-max)``, with ``IQR a-b`` when there are quartiles; one value alone."""
        shown = number.format(self.median)
        if self.count == 1:
            return shown
        spread = f"{number.format(self.low)}-{number.format(self.high)}"
        if self.quartiles is not None:
            spread += f", IQR {number.format(self.quartiles[0])}-{number.format(self.quartiles[1])}"
        return f"{shown} ({spread})"


def paired_ratios(numerators: Mapping[int, float], denominators: Mapping[int, float]) -> list[float]:
    """``numerators[r] / denominators[r]`` for each round ``r`` both have (ascending); values by round.

    A round in which either contender has no value (or the denominator is 0) gives no ratio.

    >>> paired_ratios({0: 2.0, 1: 3.0, 2: 5.0}, {0: 1.0, 2: 10.0})
    [2.0, 0.5]
    """
    return [numerators[r] / denominators[r] for r in sorted(numerators) if denominators.get(r)]


def paired_spread(numerators: Mapping[int, float], denominators: Mapping[int, float]) -> Spread | None:
    """The :class:`Spread` of :func:`paired_ratios`, or None when no round has both."""
    ratios = paired_ratios(numerators, denominators)
    return Spread.of(ratios) if ratios else None
