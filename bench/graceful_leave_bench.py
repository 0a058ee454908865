"""Graceful leave against a crash: how long a job is without output when a member gets SIGTERM or SIGKILL.

The job, the cluster and the measurement are those of
``fault_tolerance_bench.py``'s recovery section (3 member processes on
loopback, ``seq % keys`` counted per key with EXACTLY_ONCE and checked on
every item, m3 signalled right after a complete snapshot taken once every
key had state). The signals are measured in rounds, SIGTERM, SIGKILL, SIGSTOP,
``--repeats`` times, so all see the same machine load:

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

Reported: seconds from the signal to the first new output at a sink (the job
running again), best and median of the runs, and exactly-once violations.

Run: ``python bench/graceful_leave_bench.py [--repeats N] [--keys K]``, or
``python bench/run_all.py --only graceful_leave_bench``.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import sysconfig
from collections.abc import Sequence

import _common
import fault_tolerance_bench as ft

KEYS = 100_002
"""100k keys (a multiple of 6: see the exactly-once check of fault_tolerance_bench)."""
TARGET_S = 1.0


def _measure(keys: int, how: signal.Signals) -> ft._Recovery:
    try:
        return ft._recover_once(keys, how, ft.RECOVERY_TIMEOUT_S)
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
    for run in range(args.repeats):
        for how in kinds:
            ft._progress(f"graceful leave, {args.keys:,} keys, {how.name}, pair {run + 1}/{args.repeats}")
            result = _measure(args.keys, how)
            ft._progress(f"  first output {ft._seconds(result.first_output_s)} s after {how.name}")
            results[how].append(result)
    rows = []
    medians: dict[signal.Signals, float | None] = {}
    labels = {
        signal.SIGTERM: "SIGTERM (graceful leave)",
        signal.SIGKILL: "SIGKILL (crash, connections reset)",
        signal.SIGSTOP: "SIGSTOP (machine lost: failure detector)",
    }
    for how, label in labels.items():
        times = [r.first_output_s for r in results[how] if r.first_output_s is not None]
        medians[how] = statistics.median(times) if times else None
        rows.append(
            [
                label,
                ft._seconds(min(times)) if times else "none",
                ft._seconds(medians[how]),
                ft._seconds(max(times)) if times else "none",
                f"{len(times)}/{len(results[how])}",
                str(sum(r.violations for r in results[how])),
            ]
        )
    term, kill, stop = medians[signal.SIGTERM], medians[signal.SIGKILL], medians[signal.SIGSTOP]
    if term is None or kill is None or stop is None:
        verdict = "not measured (a run did not recover)"
    else:
        met = "met" if term < TARGET_S and term < kill / 2 else "NOT met"
        verdict = (
            f"SIGTERM median {term:.2f} s against SIGKILL {kill:.2f} s ({kill / term:.1f}x): {met}; "
            f"against a lost machine (SIGSTOP) {stop:.2f} s ({stop / term:.1f}x)"
        )
    load_after = os.getloadavg()
    optimized = "--enable-optimizations" in str(sysconfig.get_config_var("CONFIG_ARGS"))
    interpreter = f"CPython {platform.python_version()} ({'PGO' if optimized else 'no PGO'} build)"
    notes = [r.evidence for rs in results.values() for r in rs if r.first_output_s is None and r.evidence]
    return (
        "## Graceful leave against a crash (member processes on loopback)\n\n"
        f"3 members, {args.keys:,} keys of state, EXACTLY_ONCE, snapshots every "
        f"{ft.SNAPSHOT_INTERVAL_MS / 1000:g} s; m3 gets the signal right after a complete snapshot. "
        f"Seconds from the signal to the first new output at a sink; {args.repeats} rounds of the "
        f"three signals, interleaved, on {interpreter}; one-minute load average {load_before[0]:.1f} "
        f"before and {load_after[0]:.1f} after. Member flags: `"
        + " ".join(ft.MEMBER_ARGS)
        + "`.\n\n"
        + _common.markdown_table(["signal", "best", "median", "worst", "recovered", "violations"], rows)
        + f"\nTarget: under {TARGET_S:g} s and well under the SIGKILL figure — {verdict}.\n"
        + "".join(f"\n- {note}" for note in notes)
    )


if __name__ == "__main__":
    import sys

    print(main(sys.argv[1:]))
