"""CPU-seconds spent by a run: user + system time summed over the driver and every member process.

Theory of operation. Wall-clock rates on a shared machine measure the machine's load as much as the
engine; the CPU time the run's own processes used does not (up to cache and frequency effects). A
:class:`Meter` names the processes of one contender — the driver (this process, which runs the
plain loop, an embedded instance, and the client of a local cluster) and each member process of the
cluster measured — once each. :meth:`Meter.read` takes every process's cumulative user + system
seconds (``psutil``, i.e. ``/proc/PID/stat`` on Linux; children's times are not included: a member
starts none); :func:`used` is the sum, over the same processes, of the second reading minus the
first. The throughput run reads the meter at the same moments as the source's counter, so CPU
seconds per event is :func:`used` over the events counted between the two reads.

A process that ended between the reads fails the run (its CPU time would be lost, not zero). A
member's idle cluster-mates of another contender (the 2-member cluster while the 1-member one runs)
are not this contender's processes and are not counted.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping

import psutil

Reader = Callable[[int], float]
"""A process id → its cumulative user + system CPU seconds."""


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process ``pid`` has used so far (all its threads)."""
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


@dataclasses.dataclass(frozen=True, slots=True)
class Meter:
    """Reads the CPU time of a fixed set of processes (see the module doc)."""

    pids: tuple[int, ...]
    """Each process once, the driver first."""
    reader: Reader = process_cpu_seconds

    @classmethod
    def of(cls, member_pids: Iterable[int] = (), reader: Reader = process_cpu_seconds) -> Meter:
        """The driver (this process) and ``member_pids``, each once (embedded: the driver alone)."""
        return cls(tuple(dict.fromkeys((os.getpid(), *member_pids))), reader)

    def read(self) -> dict[int, float]:
        """Every process's cumulative CPU seconds now."""
        return {pid: self.reader(pid) for pid in self.pids}


def used(before: Mapping[int, float], after: Mapping[int, float]) -> float:
    """CPU seconds used between two readings of one meter (summed over its processes).

    Raises ValueError when the readings are of different processes or a process's time went back
    (a pid reused by another process).
    """
    if before.keys() != after.keys():
        raise ValueError(f"readings of different processes: {sorted(before)} and {sorted(after)}")
    spent = {pid: after[pid] - before[pid] for pid in before}
    backwards = [pid for pid, seconds in spent.items() if seconds < 0]
    if backwards:
        raise ValueError(f"CPU time went back for processes {backwards}")
    return sum(spent.values())
