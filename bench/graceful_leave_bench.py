"""Graceful leave against a crash: how long a job is without output when a member gets SIGTERM or SIGKILL.

The job, the cluster and the measurement are those of
``fault_tolerance_bench.py``'s recovery section (3 member processes on
loopback, ``seq % keys`` counted per key with EXACTLY_ONCE and checked on
every item, once every key has state). A crash does not choose its moment,
so m3 is signalled at a random moment of the snapshot interval: after a
complete snapshot and a delay drawn uniformly from the interval (seeded, one
delay per round, the same for the round's three signals). The signals are
measured in rounds, SIGTERM, SIGKILL, SIGSTOP, ``--repeats`` times, so all see
the same machine load:

* SIGKILL: the member dies; the coordinator notices the lost connection,
  and restarts the job on the members left from the last periodic snapshot;
* SIGTERM: the member leaves (``jetlet member``'s graceful leave): the
  coordinator takes a terminal snapshot, restarts the job without it from
  that snapshot and moves its partitions off it, and the member exits;
* SIGSTOP: the member vanishes without its connections closing, as when its
  machine dies: only the failure detector (``--failure-timeout-millis``)
  notices, then the job restarts as after SIGKILL.

On loopback a killed process's connections are reset at once, so SIGKILL is
noticed at once too; SIGSTOP shows what a graceful leave saves when they are
not.

Reported, in seconds, best, median and worst of the runs:

* *first output*: from the signal to the first item at a sink from the new
  execution;
* *stall*: the longest time without progress — a result for an item newer
  than every item seen before — from the last one before the signal to the
  first one of the new execution. After a crash the new execution first
  replays what came after the last snapshot, which is no progress; during a
  graceful leave the old execution goes on until its terminal snapshot, which
  is. This is how long the job is not running, as its user sees it.

and exactly-once violations.

Run: ``python bench/graceful_leave_bench.py [--repeats N] [--keys K]``, or
``python bench/run_all.py --only graceful_leave_bench``.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import signal
import statistics
import sysconfig
from collections.abc import Sequence

import _common
import fault_tolerance_bench as ft

KEYS = 100_002
"""100k keys (a multiple of 6: see the exactly-once check of fault_tolerance_bench)."""
TARGET_S = 1.0
SEED = 13
"""Seed of the signal moments."""


def _measure(keys: int, how: signal.Signals, delay_s: float) -> ft._Recovery:
    try:
        return ft._recover_once(keys, how, ft.RECOVERY_TIMEOUT_S, delay_s)
    except ft._Abort as exc:
        return ft._Recovery(keys, 0, None, None, None, None, 0, [], f"aborted before the signal: {exc}")


def main(argv: Sequence[str] = ()) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=_common.DEFAULT_REPEATS, help="rounds of the three")
    parser.add_argument("--keys", type=int, default=KEYS, help="keys of state (a multiple of 6)")
    args = parser.parse_args(list(argv))
    if args.keys % 6:
        parser.error("--keys must be a multiple of 6")
    load_before = os.getloadavg()
    kinds = (signal.SIGTERM, signal.SIGKILL, signal.SIGSTOP)
    results: dict[signal.Signals, list[ft._Recovery]] = {how: [] for how in kinds}
    moments = random.Random(SEED)
    delays = []
    for run in range(args.repeats):
        delays.append(moments.uniform(0.0, ft.SNAPSHOT_INTERVAL_MS / 1000))
        for how in kinds:
            ft._progress(
                f"graceful leave, {args.keys:,} keys, {how.name}, round {run + 1}/{args.repeats}, "
                f"{delays[-1]:.2f} s after a snapshot"
            )
            result = _measure(args.keys, how, delays[-1])
            ft._progress(
                f"  first output {ft._seconds(result.first_output_s)} s, "
                f"stall {ft._seconds(result.stall_s)} s after {how.name}"
            )
            results[how].append(result)
    rows = []
    stalls: dict[signal.Signals, float | None] = {}
    firsts: dict[signal.Signals, float | None] = {}
    labels = {
        signal.SIGTERM: "SIGTERM (graceful leave)",
        signal.SIGKILL: "SIGKILL (crash, connections reset)",
        signal.SIGSTOP: "SIGSTOP (machine lost: failure detector)",
    }
    for how, label in labels.items():
        first = [r.first_output_s for r in results[how] if r.first_output_s is not None]
        stall = [r.stall_s for r in results[how] if r.stall_s is not None]
        firsts[how] = statistics.median(first) if first else None
        stalls[how] = statistics.median(stall) if stall else None
        rows.append(
            [
                label,
                *_spread(first),
                *_spread(stall),
                f"{len(stall)}/{len(results[how])}",
                str(sum(r.violations for r in results[how])),
            ]
        )
    term, kill, stop = stalls[signal.SIGTERM], stalls[signal.SIGKILL], stalls[signal.SIGSTOP]
    if term is None or kill is None or stop is None:
        verdict = "not measured (a run did not recover)"
    else:
        met = "met" if term < TARGET_S and term < kill / 2 else "NOT met"
        verdict = (
            f"SIGTERM's median stall {term:.2f} s against SIGKILL's {kill:.2f} s "
            f"({kill / term:.1f}x): {met}; "
            f"against a lost machine (SIGSTOP) {stop:.2f} s ({stop / term:.1f}x). By first output alone "
            f"SIGTERM takes {_seconds_or_none(firsts[signal.SIGTERM])} s against SIGKILL's "
            f"{_seconds_or_none(firsts[signal.SIGKILL])} s: the graceful leave first takes its terminal "
            "snapshot, while the old execution keeps the job going"
        )
    load_after = os.getloadavg()
    optimized = "--enable-optimizations" in str(sysconfig.get_config_var("CONFIG_ARGS"))
    interpreter = f"CPython {platform.python_version()} ({'PGO' if optimized else 'no PGO'} build)"
    notes = [r.evidence for rs in results.values() for r in rs if r.first_output_s is None and r.evidence]
    signalled_at = ", ".join(f"{d:.2f}" for d in delays)
    return (
        "## Graceful leave against a crash (member processes on loopback)\n\n"
        f"3 members, {args.keys:,} keys of state, EXACTLY_ONCE, snapshots every "
        f"{ft.SNAPSHOT_INTERVAL_MS / 1000:g} s; m3 gets the signal at a random moment of the snapshot "
        f"interval ({signalled_at} s after a complete snapshot, seed {SEED}). *First output*: seconds from "
        "the signal to the first item at a sink from the new execution. *Stall*: the longest time "
        "without progress (a result for an item newer than every item seen before; replayed items "
        f"are not progress). {args.repeats} rounds of the three signals, interleaved, on {interpreter}; "
        f"one-minute load average {load_before[0]:.1f} before and {load_after[0]:.1f} after. Member flags: `"
        + " ".join(ft.MEMBER_ARGS)
        + "`.\n\n"
        + _common.markdown_table(
            [
                "signal",
                "first output: best",
                "median",
                "worst",
                "stall: best",
                "median",
                "worst",
                "recovered",
                "violations",
            ],
            rows,
        )
        + f"\nTarget: under {TARGET_S:g} s and well under the SIGKILL figure — {verdict}.\n"
        + "".join(f"\n- {note}" for note in notes)
    )


def _spread(values: list[float]) -> list[str]:
    """Best, median and worst of ``values`` as table cells ("none" when empty)."""
    if not values:
        return ["none"] * 3
    return [ft._seconds(min(values)), ft._seconds(statistics.median(values)), ft._seconds(max(values))]


def _seconds_or_none(value: float | None) -> str:
    """``value`` with two decimals, or "none"."""
    return "none" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    import sys

    print(main(sys.argv[1:]))
