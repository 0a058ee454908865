"""A/B of the engine: NEXMark embedded and unpaced, events per CPU-second, a commit against another.

For a change on the data path (e.g. the metrics' counters): the commit ``--before`` (and
``--after``, else this tree is measured) is checked out in a temporary ``git worktree``; each round
runs every query once on each tree, in a fresh process, in alternating order; a run waits 2 s, then
counts the source's ``emittedCount`` over ``--seconds`` of the process's CPU time
(``time.process_time()``: steadier than wall time on a shared machine). Prints the medians and each
round's after/before ratio as Markdown.

``--side-by-side`` runs the two trees' processes at the same time instead, each pinned to a core of
its own (``sched_setaffinity``), the cores swapped from round to round: the machine's speed, which
on the 2-core VM drifts by up to 1.5x within minutes, then falls on both sides of every pair alike,
where one after the other it falls on whichever ran in the faster minute. It needs two cores.

Run: ``python bench/engine_ab.py --before be65962 --after 64aa6c2 [--rounds 6] [--seconds 5]
[--queries q1,q5] [--side-by-side]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
QUERIES = ("q1", "q5")
_RUN = """
import json, sys, time
import jetlet
from jetlet.nexmark import fast_generator
from jetlet.nexmark.bench import jobs
query, seconds = sys.argv[1], float(sys.argv[2])
config = fast_generator.FastConfig(base_time=int(time.time() * 1000))
p = jobs.build_pipeline(query, config, paced=False, slide_ms=jobs.THROUGHPUT_SLIDE_MS, list_name="ab")
# a tree from before the planner chained stateless stages into sources counts the source's output
read = getattr(jobs, "events_read", lambda m: jobs.counter(m, jobs.SOURCE_NAME, "emittedCount"))
with jetlet.embedded() as jet:
    job = jet.new_job(p, jobs.job_config(False, "ab"))
    time.sleep(2)
    e0, c0 = read(job.metrics()), time.process_time()
    time.sleep(seconds)
    e1, c1 = read(job.metrics()), time.process_time()
    jobs.stop(job)
print(json.dumps((e1 - e0) / (c1 - c0)))
"""


def _start(
    tree: Path, query: str, seconds: float, cpu: int | None = None, script: str = _RUN
) -> subprocess.Popen[str]:
    """A run of ``query`` on ``tree`` in a new process, pinned to ``cpu`` when one is given."""
    env = {**os.environ, "PYTHONPATH": str(tree / "worker")}
    pin = None if cpu is None else functools.partial(os.sched_setaffinity, 0, {cpu})
    return subprocess.Popen(
        [sys.executable, "-c", script, query, str(seconds)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=pin,  # sets only the child's CPU affinity, before it starts any thread
    )


def _rate_of(run: subprocess.Popen[str]) -> float:
    """The events per CPU-second a run printed; RuntimeError with its stderr if it failed."""
    out, err = run.communicate()
    if run.returncode != 0:
        raise RuntimeError(f"a run failed (exit {run.returncode}): {err.strip()[-2000:]}")
    return float(json.loads(out.strip().splitlines()[-1]))


def _round(
    trees: dict[str, Path], query: str, seconds: float, index: int, side_by_side: bool
) -> dict[str, float]:
    """One round of ``query``: each side's events per CPU-second (see the module doc for the order)."""
    order = ("before", "after") if index % 2 == 0 else ("after", "before")
    if not side_by_side:
        return {side: _rate_of(_start(trees[side], query, seconds)) for side in order}
    runs = {side: _start(trees[side], query, seconds, cpu) for cpu, side in enumerate(order)}
    return {side: _rate_of(run) for side, run in runs.items()}


def main(argv: Sequence[str] = ()) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the commit measured first")
    parser.add_argument("--after", help="the commit to compare against it (default: this tree)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--queries", default=",".join(QUERIES), help="comma-separated (default: q1,q5)")
    parser.add_argument(
        "--side-by-side", action="store_true", help="run the two trees at once, each on a core of its own"
    )
    args = parser.parse_args(list(argv))
    queries = tuple(q.strip() for q in args.queries.split(",") if q.strip())
    if args.side_by_side and len(os.sched_getaffinity(0)) < 2:
        parser.error("--side-by-side needs two cores to pin the two runs to")
    load_before = os.getloadavg()[0]
    rates: dict[tuple[str, str], list[float]] = {(q, t): [] for q in queries for t in ("before", "after")}
    commits = {"before": args.before, "after": args.after}
    with tempfile.TemporaryDirectory(prefix="jetlet-ab-") as scratch:
        trees = {side: Path(scratch) / side if commit else REPO for side, commit in commits.items()}
        for side, commit in commits.items():
            if commit:
                subprocess.run(
                    ["git", "worktree", "add", "--detach", str(trees[side]), commit], cwd=REPO, check=True
                )
        try:
            for index in range(args.rounds):
                for query in queries:
                    for side, rate in _round(trees, query, args.seconds, index, args.side_by_side).items():
                        rates[(query, side)].append(rate)
        finally:
            for side, commit in commits.items():
                if commit:
                    subprocess.run(
                        ["git", "worktree", "remove", "--force", str(trees[side])], cwd=REPO, check=True
                    )
    lines = [
        f"Engine A/B, `{args.before}` against `{args.after or 'this tree'}`, "
        f"{args.rounds} {'side-by-side' if args.side_by_side else 'interleaved'} rounds, "
        f"load average {load_before:.1f} before and {os.getloadavg()[0]:.1f} after "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}):\n",
        "| query | before, events/CPU-s (median) | after (median) | after / before per round, % |",
        "| :--- | ---: | ---: | ---: |",
    ]
    for query in queries:
        before, after = rates[(query, "before")], rates[(query, "after")]
        per_round = ", ".join(f"{(a / b - 1) * 100:+.1f}" for a, b in zip(after, before, strict=True))
        medians = f"{statistics.median(before):,.0f} | {statistics.median(after):,.0f}"
        lines.append(f"| {query.upper()} | {medians} | {per_round} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(main(sys.argv[1:]))
