"""A/B of the engine: NEXMark embedded and unpaced, events per CPU-second, a commit against another.

For a change on the data path (e.g. the metrics' counters): the commit ``--before`` (and
``--after``, else this tree is measured) is checked out in a temporary ``git worktree``; each round
runs every query once on each tree, in a fresh process, in alternating order; a run waits 2 s, then
counts the source's ``emittedCount`` over ``--seconds`` of the process's CPU time
(``time.process_time()``: steadier than wall time on a shared machine). Prints the medians and each
round's after/before ratio as Markdown.

Run: ``python bench/engine_ab.py --before be65962 --after 64aa6c2 [--rounds 6] [--seconds 5]``.
"""

from __future__ import annotations

import argparse
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
with jetlet.embedded() as jet:
    job = jet.new_job(p, jobs.job_config(False, "ab"))
    time.sleep(2)
    e0, c0 = jobs.counter(job.metrics(), jobs.SOURCE_NAME, "emittedCount"), time.process_time()
    time.sleep(seconds)
    e1, c1 = jobs.counter(job.metrics(), jobs.SOURCE_NAME, "emittedCount"), time.process_time()
    jobs.stop(job)
print(json.dumps((e1 - e0) / (c1 - c0)))
"""


def _rate(tree: Path, query: str, seconds: float) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree / "worker")}
    done = subprocess.run(
        [sys.executable, "-c", _RUN, query, str(seconds)], env=env, capture_output=True, text=True, check=True
    )
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: Sequence[str] = ()) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the commit measured first")
    parser.add_argument("--after", help="the commit to compare against it (default: this tree)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args(list(argv))
    load_before = os.getloadavg()[0]
    rates: dict[tuple[str, str], list[float]] = {(q, t): [] for q in QUERIES for t in ("before", "after")}
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
                for query in QUERIES:
                    for side in ("before", "after") if index % 2 == 0 else ("after", "before"):
                        rates[(query, side)].append(_rate(trees[side], query, args.seconds))
        finally:
            for side, commit in commits.items():
                if commit:
                    subprocess.run(
                        ["git", "worktree", "remove", "--force", str(trees[side])], cwd=REPO, check=True
                    )
    lines = [
        f"Engine A/B, `{args.before}` against `{args.after or 'this tree'}`, "
        f"{args.rounds} interleaved rounds, "
        f"load average {load_before:.1f} before and {os.getloadavg()[0]:.1f} after "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}):\n",
        "| query | before, events/CPU-s (median) | after (median) | after / before per round, % |",
        "| :--- | ---: | ---: | ---: |",
    ]
    for query in QUERIES:
        before, after = rates[(query, "before")], rates[(query, "after")]
        per_round = ", ".join(f"{(a / b - 1) * 100:+.1f}" for a, b in zip(after, before, strict=True))
        medians = f"{statistics.median(before):,.0f} | {statistics.median(after):,.0f}"
        lines.append(f"| {query.upper()} | {medians} | {per_round} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(main(sys.argv[1:]))
