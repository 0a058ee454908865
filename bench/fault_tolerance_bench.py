"""Fault-tolerance benchmark: recovery after a member dies, the cost of snapshots, snapshot sizes.

Every measurement runs member processes on loopback (``local_cluster``) with
``--heartbeat-interval-millis 100 --failure-timeout-millis 1500``. The job is
the same everywhere: ``Sources.test_stream`` emits the sequence numbers
``0, 1, 2, ...``; ``grouping_key(seq % keys)`` and ``map_stateful`` keep a
counter per key, so after ``keys`` items the job holds ``keys`` keys of state
(plus one position per source processor), and every snapshot saves all of it.

**Exactly-once check.** ``test_stream`` gives one source processor per
member, and processor ``i`` of ``n`` emits ``i, i + n, ...`` in order. With
``keys`` a multiple of 6, every item of one key comes from the same source
processor, in order, both on 3 members and on the 2 left after a kill, so the
count of a key must be exactly ``seq // keys + 1`` after item ``seq``. The
stateful function checks that for *every* item and emits a violation if it
does not hold (a lost or replayed item, or state restored from another point
than the sources); the table reports the violations seen by the sinks. Hence
the odd key counts (10,002 for "10k" ... 10,000,002 for "10M").

**Observing the restarted job.** The sink (a ``SinkBuilder`` sink, one per
member) writes a small file into a directory of this process when its
processor starts (the time of ``init``) and when it receives its first item,
named after the execution id (``context.execution_id``: a restart is a new
execution; ``context.job_id`` stays the same). The stateful stage emits every 1000th item (and every
violation), so the first item reaches the sink within about 3 ms of the
first new output at 300,000 items/s. Times are ``time.time()`` of the member
processes and of this process, one clock. Nothing is read over REST while a
member is down (a cluster-wide read waits on the dead member and can time
out). Detection is the time of the first line of the coordinator's log
(``m1.log``, found through the member's command line) that names the killed
member after the kill. So a recovery splits into:

* *detect*: the kill to the coordinator noticing (its log line);
* *restart*: to the first processor of the new execution starting (the old
  execution stopped, the new one initialised on the members left, the
  snapshot read back from the replicated store and routed to them);
* *restore + first output*: to the first new item at a sink (the processors
  restore their state, the sources resume after the snapshot).

Each run starts a fresh 3-member cluster, fills the state at 300,000
items/s, waits for a complete snapshot taken after the fill, then SIGKILLs
member ``m3`` (``client.pids[2]``, not the coordinator) and measures. A
killed process's connections are reset by the kernel, so detection is by the
lost connection; a member that *hangs* (SIGSTOP: its connections stay open)
can only be detected by the heartbeat timeout (1.5 s), and one more row
measures that case. After the first output the run also waits for the first
complete snapshot of the new execution (the job is fault tolerant again only
then).

**Cost of snapshots.** The same job on 2 members (one core each; the machine
has 2), bounded (``count`` items) and unpaced (the rate is far above what
the members reach, so the source emits whenever its outbox has room and the
job is CPU bound), with 100,002 keys of state, run with guarantee NONE and
with EXACTLY_ONCE and snapshot intervals of 10 s and 1 s; best of
``--repeats``, job time from submission to join as seen by the client. A
streaming source is used, not a batch one, because snapshots cost something
only while a streaming job runs, and because a batch source would finish
before the 10 s interval. The job runs long enough (about 25 s with NONE on
this machine) that the 10 s interval takes snapshots too; the number of
snapshots each run took is reported.

**Snapshot size and time.** The same job on 3 members holding 100k, 1M and
10M keys, filled at 300,000 items/s while it keeps running at that rate:
bytes, entries and the duration of complete snapshots taken after the fill
(``job.snapshot``; the best of up to ``--repeats`` consecutive ones), against
a baseline: ``pickle.dumps`` of the same state as one plain dict in this
process. A size whose fill and snapshot do not finish within a time budget
(480 s), whose members outgrow the memory budget, or whose job fails, is
reported as not measured, with the reason.

10M keys on this machine (2 cores, 24 GiB), when this was written: memory is
no problem (the 3 members hold about 5.6 GB), the fill takes about 34 s, and
one complete snapshot was measured at 330 MB in 110 s — close to the
coordinator's 120 s snapshot timeout, and the next one did fail on it. In 2 of
3 runs the job itself failed before its first complete snapshot after the fill
(a distributed-edge sender exceeded its flow-control window), so the table
may well say "not measured" for 10M, with that reason.

Run: ``python bench/fault_tolerance_bench.py [--quick] [--repeats N]
[--sections recovery,throughput,snapshots]``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import pathlib
import pickle
import re
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import _common
from jetlet import errors
from jetlet._cluster import snapshot_coordinator
from jetlet.client import Client, RemoteJob
from jetlet.config import JobConfig, ProcessingGuarantee
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sources
from jetlet.pipeline.sink_builder import SinkBuilder

MEMBER_ARGS = ["--heartbeat-interval-millis", "100", "--failure-timeout-millis", "1500"]
VICTIM = 2
"""Index in ``client.pids`` of the member that is killed: ``m3``, not the coordinator."""
STREAM_RATE = 300_000
"""Items per second of the recovery and snapshot-size jobs."""
UNPACED_RATE = 1e12
"""A rate no member reaches: the source emits whenever its outbox has room."""
SAMPLE = 1000
"""The stateful stage emits every SAMPLE-th item (and every violation)."""
SNAPSHOT_INTERVAL_MS = 2000
RECOVERY_KEYS = (10_002, 100_002, 1_000_002)
SNAPSHOT_KEYS = (100_002, 1_000_002, 10_000_002)
THROUGHPUT_KEYS = 100_002
THROUGHPUT_ITEMS = 36_000_000
QUICK_ITEMS = 600_000
THROUGHPUT_INTERVALS_MS = (10_000, 1_000)
RECOVERY_TIMEOUT_S = 120.0
HANG_TIMEOUT_S = 30.0
SIZE_BUDGET_S = 480.0
"""Longest a snapshot-size run may take (fill plus the snapshots measured)."""
MEMORY_BUDGET = 0.7
"""Largest share of the machine's memory the members may hold together."""
TARGET_RECOVERY_S = 5.0
TARGET_KEYS = 1_000_000
TARGET_SNAPSHOT_COST = 0.20
_POLL_S = 0.005
PROGRESS_EVERY_S = 0.005
"""How often at most a sink of the recovery job notes the highest sequence number it has seen."""
OUT_DIR = pathlib.Path(__file__).resolve().parent / "out"
_SNAPSHOT_FAILED = re.compile(r"snapshot \d+ failed")
_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def _progress(message: str) -> None:
    print(f"[fault_tolerance] {message}", file=sys.stderr, flush=True)


# -- the job ----------------------------------------------------------------------------------


def _counting_job(keys: int, out_dir: str, rate: float, count: int | None) -> Pipeline:
    """``seq % keys`` counted per key, checked for exactly-once; the sink reports into ``out_dir``."""

    def create() -> list[int]:
        return [0]

    def count_and_check(state: list[int], key: int, seq: int) -> tuple[str, int, int] | None:
        state[0] += 1
        if state[0] != seq // keys + 1:
            return ("violation", seq, state[0])
        if seq % SAMPLE == 0:
            return ("ok", seq, state[0])
        return None

    def sink_create(context: Any) -> dict[str, Any]:
        tag = f"{context.execution_id}-{context.member_index}"
        _write_json(f"{out_dir}/start-{tag}.json", {"time": time.time()})
        return {"tag": tag, "first": False, "violations": 0, "examples": [], "top": -1, "noted": 0.0}

    def sink_receive(state: dict[str, Any], item: tuple[str, int, int]) -> None:
        now = time.time()
        if not state["first"]:
            state["first"] = True
            _write_json(f"{out_dir}/first-{state['tag']}.json", {"time": now, "item": list(item)})
        if item[1] > state["top"]:
            state["top"] = item[1]
            if now - state["noted"] >= PROGRESS_EVERY_S:  # the highest sequence seen, now and then
                state["noted"] = now
                with open(f"{out_dir}/{state['tag']}.progress", "a", encoding="utf-8") as f:
                    f.write(f"{now} {item[1]}\n")
        if item[0] == "violation":
            state["violations"] += 1
            if len(state["examples"]) < 5:
                state["examples"].append(list(item))
            n = state["violations"]
            if n <= 10 or n & (n - 1) == 0:  # the first ten, then at powers of two
                _write_json(
                    f"{out_dir}/violations-{state['tag']}.json",
                    {"count": n, "examples": state["examples"]},
                )

    sink = SinkBuilder.sink("check", sink_create).receive_fn(sink_receive).build()
    p = Pipeline()
    (
        p.read_from(Sources.test_stream(rate, _identity, count))
        .without_timestamps()
        .grouping_key(lambda seq: seq % keys)
        .map_stateful(create, count_and_check)
        .write_to(sink)
    )
    return p


def _identity(seq: int) -> int:
    return seq


def _write_json(path: str, value: object) -> None:
    """Write ``path`` whole or not at all (a reader polls the directory)."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(value, f)
    os.replace(path + ".tmp", path)


@dataclasses.dataclass(frozen=True)
class _Report:
    """What the sinks wrote: per execution id, start and first-item times; violations in total."""

    starts: dict[int, float]
    firsts: dict[int, float]
    violations: int
    examples: list[Any]


def _read_report(out_dir: pathlib.Path) -> _Report:
    starts: dict[int, float] = {}
    firsts: dict[int, float] = {}
    violations, examples = 0, []
    for path in out_dir.glob("*.json"):
        kind, execution, _member = path.stem.split("-")
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(path.read_text(encoding="utf-8"))
            if kind == "start":
                starts[int(execution)] = min(record["time"], starts.get(int(execution), float("inf")))
            elif kind == "first":
                firsts[int(execution)] = min(record["time"], firsts.get(int(execution), float("inf")))
            elif kind == "violations":
                violations += record["count"]
                examples += record["examples"]
    return _Report(starts, firsts, violations, examples)


# -- cluster helpers --------------------------------------------------------------------------


def _member_log(pid: int) -> pathlib.Path | None:
    """The log file of the member process ``pid`` (next to its ready file), or None."""
    try:
        args = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        ready = pathlib.Path(args[args.index("--ready-file") + 1])
    except (OSError, ValueError, IndexError):
        return None
    return ready.with_suffix(".log")


def _first_log_line_after(log: pathlib.Path | None, since: float, needle: str) -> float | None:
    """The time of the first line of ``log`` at or after ``since`` that contains ``needle``."""
    if log is None or not log.exists():
        return None
    for line in log.read_text(errors="replace").splitlines():
        match = _LOG_TIME.match(line)
        if match is None or needle not in line:
            continue
        stamp = _log_stamp(line)
        if stamp >= since - 0.001:  # the log has millisecond resolution
            return stamp
    return None


def _log_lines(log: pathlib.Path | None, needle: str) -> list[str]:
    if log is None or not log.exists():
        return []
    return [line for line in log.read_text(errors="replace").splitlines() if needle in line]


def _rss_mb(pids: Sequence[int]) -> list[int]:
    found = []
    for pid in pids:
        try:
            status = pathlib.Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                found.append(int(line.split()[1]) // 1024)
    return found


def _memory_total_mb() -> int:
    for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 0


def _retrying(call: Callable[[], Any], attempts: int = 20) -> Any:
    """A REST call that a busy member may answer late: retried for a while."""
    for attempt in range(attempts):
        try:
            return call()
        except (errors.JetletError, TimeoutError):
            if attempt == attempts - 1:
                raise
            time.sleep(0.25)
    raise AssertionError("unreachable")


def _stateful_received(job: RemoteJob) -> int:
    """Items the stateful stage received so far; 0 while the job has no metrics (it is (re)starting,
    or a member busy saving a large state answered too late): the caller's deadline bounds the wait."""
    metrics = _retrying(job.metrics)
    names = [name for name in metrics if "stateful" in name]
    return sum(int(metrics[name].get("receivedCount", 0)) for name in names)


class _Abort(Exception):
    """A run that cannot finish within its budgets, or whose job failed (the message says why)."""


def _raise_if_ended(client: Client, job: RemoteJob) -> None:
    """Raise :class:`_Abort` with the job's failure if the (streaming) job has ended."""
    record = _retrying(lambda: client.request("GET", f"/jobs/{job.id}"))
    if record["status"] in ("FAILED", "COMPLETED"):
        failure = str(record.get("failure") or "").strip().splitlines()
        raise _Abort(
            f"the job ended: {record['status']}"
            + (f" ({failure[0]})" if failure else "")
            + f"; its last snapshot: {record.get('snapshot')}"
        )


@dataclasses.dataclass(frozen=True)
class _Filled:
    snapshots: list[dict[str, Any]]
    """Complete snapshots taken after the fill (at least one)."""
    fill_rate: float
    peak_rss_mb: int
    failures: list[str]
    """The coordinator's log lines about snapshots that failed meanwhile."""


def _failed_snapshots(log: pathlib.Path | None, since: float) -> list[str]:
    """The coordinator's log lines since ``since`` about snapshots that failed (without the date)."""
    return [
        line[24:]
        for line in _log_lines(log, "snapshot")
        if _SNAPSHOT_FAILED.search(line) and _LOG_TIME.match(line) and _log_stamp(line) >= since
    ]


def _fill_and_snapshot(
    client: Client, job: RemoteJob, keys: int, deadline: float, snapshots: int = 1
) -> _Filled:
    """Wait until every key has state, then for ``snapshots`` complete snapshots taken after that.

    At least one; fewer than ``snapshots`` when the next would not fit before ``deadline``
    (estimated from the last one's duration) or did not complete by then.
    """
    started = time.time()
    filled_at = 0.0
    memory_limit = _memory_total_mb() * MEMORY_BUDGET
    peak_rss = 0
    found: list[dict[str, Any]] = []
    last_id = 0
    coordinator_log = _member_log(client.pids[0])
    while len(found) < snapshots:
        time.sleep(0.2)
        rss = _rss_mb(client.pids)
        peak_rss = max(peak_rss, sum(rss))
        if sum(rss) > memory_limit:
            raise _Abort(f"the members hold {sum(rss):,} MB, over {memory_limit:,.0f} MB of memory")
        if time.time() > deadline:
            if found:
                _progress(f"  the budget is spent: keeping {len(found)} snapshots")
                break
            failed = _failed_snapshots(coordinator_log, started)
            what = "the fill" if not filled_at else "no complete snapshot after the fill"
            detail = f"; coordinator log: {failed[-1]}" if failed else "; no snapshot failure logged"
            with contextlib.suppress(errors.JetletError, TimeoutError):
                detail += f"; the job's last snapshot: {job.snapshot}"
            detail += f"; member logs kept in {_keep_logs(client, f'{keys}-snapshots')}"
            raise _Abort(f"{what} within the {deadline - started:.0f} s budget{detail}")
        _raise_if_ended(client, job)
        if not filled_at:
            if _stateful_received(job) >= keys:
                filled_at = time.time()
                _progress(f"  {keys:,} keys filled in {filled_at - started:.1f} s; waiting for a snapshot")
            continue
        snap = _retrying(lambda: job.snapshot)
        if snap.get("count", 0) and snap["id"] != last_id and snap["time"] / 1000 >= filled_at:
            last_id = snap["id"]
            found.append(snap)
            _progress(
                f"  snapshot {snap['id']}: {snap['bytes'] / 1e6:.1f} MB, {snap['entries']:,} entries, "
                f"{snap['duration_ms']:,} ms"
            )
            next_due = time.time() + SNAPSHOT_INTERVAL_MS / 1000 + 1.5 * snap["duration_ms"] / 1000
            if len(found) < snapshots and next_due > deadline:
                _progress(f"  no time for another snapshot within the budget: keeping {len(found)}")
                break
    failures = _failed_snapshots(coordinator_log, started)
    for line in failures:
        _progress(f"  {line}")
    return _Filled(found, keys / (filled_at - started), peak_rss, failures)


# -- 1. recovery ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Recovery:
    keys: int
    snapshot_bytes: int
    detect_s: float | None
    restart_s: float | None
    first_output_s: float | None
    """Kill to the first item at a sink of the new execution (None: none within the timeout)."""
    next_snapshot_s: float | None
    violations: int
    examples: list[Any]
    evidence: str = ""
    """What the job and the coordinator's log said when there was no recovery."""
    snapshot_failures: list[str] = dataclasses.field(default_factory=list)
    """The coordinator's log lines about snapshots that failed after the recovery."""
    stall_s: float | None = None
    """The longest time without a result for an item newer than any seen before (see :func:`_stall`)."""


def _stall(out_dir: pathlib.Path, signalled: float) -> float | None:
    """The longest time the job made no progress around ``signalled``, from the sinks' notes.

    Progress is a result for an item newer than every item any sink saw before it. The
    stall is the longest gap between two such results, from the last one before the signal
    to the first one by an execution that started after it: items replayed from a snapshot
    (after a crash) are not progress, results of the old execution while it takes a
    terminal snapshot (a graceful leave) are. None when there is no such later result.
    """
    notes: list[tuple[float, int, bool]] = []
    started = _read_report(out_dir).starts
    for path in out_dir.glob("*.progress"):
        execution = int(path.stem.split("-")[0])
        fresh = started.get(execution, 0.0) > signalled
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                noted, seen = line.split()
                notes.append((float(noted), int(seen), fresh))
    notes.sort()
    top, last, longest = -1, None, 0.0
    for stamp, seq, fresh in notes:
        if seq <= top:
            continue
        top = seq
        if last is not None and stamp > signalled:
            longest = max(longest, stamp - last)
        if stamp > signalled and fresh:
            return longest
        last = stamp
    return None


def _recover_once(keys: int, how: signal.Signals, timeout: float, delay_s: float = 0.0) -> _Recovery:
    with (
        tempfile.TemporaryDirectory(prefix="jetlet-ft-bench-") as tmp,
        local_cluster(3, MEMBER_ARGS) as client,
    ):
        out_dir = pathlib.Path(tmp)
        config = JobConfig(
            processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
            snapshot_interval_millis=SNAPSHOT_INTERVAL_MS,
        )
        job = client.new_job(_counting_job(keys, tmp, STREAM_RATE, None), config)
        victim = client.pids[VICTIM]
        try:
            deadline = time.time() + SIZE_BUDGET_S
            snap = _fill_and_snapshot(client, job, keys, deadline).snapshots[0]
            time.sleep(delay_s)  # a moment of the snapshot interval that the caller chose
            before = _read_report(out_dir)
            killed = time.time()
            os.kill(victim, how)
            _progress(f"  sent {how.name} to m{VICTIM + 1} after snapshot {snap['id']}")
            report = before
            next_status_check = killed + 1.0
            while time.time() - killed < timeout:
                report = _read_report(out_dir)
                if set(report.firsts) - set(before.firsts):
                    break
                if time.time() >= next_status_check:  # a job that failed instead of restarting
                    next_status_check += 1.0
                    with contextlib.suppress(errors.JetletError, TimeoutError):
                        if job.status.value in ("FAILED", "COMPLETED"):
                            break
                time.sleep(_POLL_S)
            new = set(report.firsts) - set(before.firsts)
            first = min((report.firsts[e] for e in new), default=None)
            starts = [t for e, t in report.starts.items() if e not in before.starts]
            start = min(starts, default=None)
            detected = _first_log_line_after(_member_log(client.pids[0]), killed, f"m{VICTIM + 1}")
            next_snapshot = None
            evidence = ""
            failures: list[str] = []
            stall = None
            if first is not None:
                wait_until_progress = time.time() + timeout
                while (stall := _stall(out_dir, killed)) is None and time.time() < wait_until_progress:
                    time.sleep(_POLL_S)
                next_snapshot = _next_snapshot(job, snap["id"], killed + timeout) - killed
                report = _read_report(out_dir)
                failures = _failed_snapshots(_member_log(client.pids[0]), killed)
                for line in failures:
                    _progress(f"  after the kill: {line}")
            else:
                evidence = _keep_evidence(client, job, killed, keys, how)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)  # a stopped member would not heed the cluster's SIGTERM
    detect_s = None if detected is None else detected - killed
    return _Recovery(
        keys=keys,
        snapshot_bytes=snap["bytes"],
        detect_s=detect_s,
        restart_s=None if start is None or detected is None else start - detected,
        first_output_s=None if first is None else first - killed,
        next_snapshot_s=next_snapshot,
        violations=report.violations,
        examples=report.examples,
        evidence=evidence,
        snapshot_failures=failures,
        stall_s=stall,
    )


def _keep_evidence(client: Client, job: RemoteJob, since: float, keys: int, how: signal.Signals) -> str:
    """A recovery that did not happen: the job's state and the members' logs since the failure.

    The logs are copied to ``bench/out/`` (the cluster's directory goes when it stops); the
    answer names the copy and quotes the coordinator's lines (repeated reconnects left out).
    """
    try:
        record = _retrying(lambda: client.request("GET", f"/jobs/{job.id}"), attempts=4)
        state = f"job {record['status']}, snapshot {record.get('snapshot')}, failure {record['failure']!r}"
    except (errors.JetletError, TimeoutError) as exc:
        state = f"job record unreadable: {exc}"
    keep = _keep_logs(client, f"{keys}-{how.name}")
    log = keep / "m1.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    quoted = [
        line[11:]
        for line in text.splitlines()
        if _LOG_TIME.match(line)
        and _log_stamp(line) >= since - 0.001
        and "cannot connect to member" not in line
    ][:12]
    _progress(f"  NO RECOVERY: {state}; member logs kept in {keep}")
    for line in quoted:
        _progress(f"    m1: {line}")
    return f"{state}; logs in {keep}; coordinator after the failure: " + " | ".join(quoted[:6])


def _keep_logs(client: Client, label: str) -> pathlib.Path:
    """Copy the members' logs to ``bench/out/`` (the cluster's directory goes when it stops)."""
    keep = OUT_DIR / f"fault_tolerance-{time.strftime('%Y%m%d-%H%M%S')}-{label}"
    keep.mkdir(parents=True, exist_ok=True)
    for pid in client.pids:
        log = _member_log(pid)
        if log is not None and log.exists():
            (keep / log.name).write_text(log.read_text(errors="replace"))
    return keep


def _log_stamp(line: str) -> float:
    match = _LOG_TIME.match(line)
    assert match is not None
    return datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _next_snapshot(job: RemoteJob, after_id: int, deadline: float) -> float:
    """When the first snapshot after ``after_id`` completed (member clock), or ``inf``."""
    while time.time() < deadline:
        with contextlib.suppress(errors.JetletError, TimeoutError):
            snap = job.snapshot
            if snap.get("id", 0) > after_id:
                return float(snap["time"] + snap["duration_ms"]) / 1000
        time.sleep(0.1)
    return float("inf")


def _seconds(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value == float("inf"):
        return "none"
    return f"{value:.2f}"


def _recovery_section(keys_list: Sequence[int], repeats: int, hang_timeout: float) -> str:
    rows = []
    best_by_keys: dict[int, float | None] = {}
    problems: list[str] = []
    for keys in keys_list:
        runs = []
        for run in range(repeats):
            _progress(f"recovery, {keys:,} keys, run {run + 1}/{repeats}")
            try:
                result = _recover_once(keys, signal.SIGKILL, RECOVERY_TIMEOUT_S)
            except _Abort as exc:  # before the kill: no snapshot to recover from, or the job failed
                _progress(f"  aborted before the kill: {exc}")
                result = _Recovery(keys, 0, None, None, None, None, 0, [], f"aborted before the kill: {exc}")
            _progress(
                f"  first output {_seconds(result.first_output_s)} s after the kill "
                f"(detect {_seconds(result.detect_s)}, restart {_seconds(result.restart_s)}), "
                f"violations {result.violations}"
            )
            runs.append(result)
        done = [r for r in runs if r.first_output_s is not None]
        best = min(done, key=lambda r: r.first_output_s or 0.0) if done else runs[0]
        worst = max((r.first_output_s or 0.0 for r in done), default=None)
        best_by_keys[keys] = best.first_output_s
        violations = sum(r.violations for r in runs)
        if violations:
            problems.append(
                f"{keys:,} keys: {violations} exactly-once violations, e.g. {runs[0].examples[:3]}"
            )
        if len(done) < len(runs):
            problems.append(
                f"{keys:,} keys: {len(runs) - len(done)} of {len(runs)} runs had no new output "
                f"(within {RECOVERY_TIMEOUT_S:.0f} s of the kill, or the run aborted): "
                + "; ".join(r.evidence for r in runs if r.first_output_s is None)
            )
        failed_snapshots = [line for r in runs for line in r.snapshot_failures]
        if failed_snapshots:
            problems.append(
                f"{keys:,} keys: {len(failed_snapshots)} snapshots failed after recoveries: "
                + " | ".join(failed_snapshots[:3])
            )
        rows.append(_recovery_row(f"{keys:,}, SIGKILL", best, worst, len(done), len(runs), violations))
    if hang_timeout > 0:
        keys = keys_list[0]
        _progress(f"recovery, {keys:,} keys, member hangs (SIGSTOP)")
        try:
            hung = _recover_once(keys, signal.SIGSTOP, hang_timeout)
        except _Abort as exc:
            _progress(f"  aborted before SIGSTOP: {exc}")
            hung = _Recovery(keys, 0, None, None, None, None, 0, [], f"aborted before SIGSTOP: {exc}")
        _progress(f"  first output {_seconds(hung.first_output_s)} s after SIGSTOP")
        done_count = int(hung.first_output_s is not None)
        rows.append(
            _recovery_row(
                f"{keys:,}, SIGSTOP (hang)", hung, hung.first_output_s, done_count, 1, hung.violations
            )
        )
        if hung.first_output_s is None:
            problems.append(
                f"a member that hangs (SIGSTOP) was not recovered from: no new output within "
                f"{hang_timeout:.0f} s, although the membership drops it after the 1.5 s failure "
                f"timeout ({hung.evidence})"
            )
    target_keys = max(keys_list)
    achieved = best_by_keys.get(target_keys)
    if target_keys < TARGET_KEYS:
        verdict = f"not measured (the largest state here is {target_keys:,} keys)"
    elif achieved is None:
        verdict = f"no recovery measured for {target_keys:,} keys: NOT met"
    else:
        met = "met" if achieved <= TARGET_RECOVERY_S else "NOT met"
        verdict = f"best {achieved:.2f} s for {target_keys:,} keys: {met}"
    notes = "".join(f"\n- {p}" for p in problems)
    return (
        "### Recovery after a member's death\n\n"
        f"3 members; the job counts `seq % keys` at {STREAM_RATE:,} items/s with EXACTLY_ONCE, snapshots "
        f"every {SNAPSHOT_INTERVAL_MS / 1000:g} s; m3 is killed right after a complete snapshot taken once "
        f"every key had state. Seconds from the kill; best of {repeats} by first output (its split shown), "
        "and the worst. *detect*: the coordinator logs the loss; *restart*: the new execution's first "
        "processor starts; *restore + first output*: the first new item reaches a sink; *next snapshot*: "
        "the new execution's first complete snapshot. Violations: items whose key count was not "
        "`seq // keys + 1` (lost or replayed), checked on every item.\n\n"
        + _common.markdown_table(
            [
                "keys, failure",
                "snapshot MB",
                "detect",
                "restart",
                "restore + first output",
                "kill → first output",
                "worst",
                "kill → next snapshot",
                "recovered",
                "violations",
            ],
            rows,
        )
        + f"\nTarget: recovery under {TARGET_RECOVERY_S:g} s for 1M keys — {verdict}.{notes}\n"
    )


def _recovery_row(
    label: str, r: _Recovery, worst: float | None, done: int, runs: int, violations: int
) -> list[str]:
    restore = None
    if r.first_output_s is not None and r.restart_s is not None and r.detect_s is not None:
        restore = r.first_output_s - r.detect_s - r.restart_s
    return [
        label,
        f"{r.snapshot_bytes / 1e6:.1f}",
        _seconds(r.detect_s),
        _seconds(r.restart_s),
        _seconds(restore),
        _seconds(r.first_output_s) if r.first_output_s is not None else "none",
        _seconds(worst) if worst is not None else "none",
        _seconds(r.next_snapshot_s),
        f"{done}/{runs}",
        str(violations),
    ]


# -- 2. the cost of snapshots -----------------------------------------------------------------


def _timed_bounded_run(client: Client, items: int, config: JobConfig) -> tuple[float, int, int]:
    """Seconds from submission to join, snapshots taken, and exactly-once violations."""
    with tempfile.TemporaryDirectory(prefix="jetlet-ft-bench-") as tmp:
        started = time.perf_counter()
        job = client.new_job(_counting_job(THROUGHPUT_KEYS, tmp, UNPACED_RATE, items), config)
        job.join()
        seconds = time.perf_counter() - started
        violations = _read_report(pathlib.Path(tmp)).violations
    return seconds, int(job.snapshot.get("count", 0)), violations


def _throughput_section(items: int, repeats: int) -> tuple[str, float | None]:
    configs: list[tuple[str, JobConfig]] = [("NONE", JobConfig())]
    for interval in THROUGHPUT_INTERVALS_MS:
        configs.append(
            (
                f"EXACTLY_ONCE, every {interval / 1000:g} s",
                JobConfig(
                    processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, snapshot_interval_millis=interval
                ),
            )
        )
    results: dict[str, tuple[float, int]] = {}
    every_run: dict[str, list[float]] = {label: [] for label, _ in configs}
    violations = 0
    with local_cluster(2, MEMBER_ARGS) as client:
        for run in range(repeats):  # interleaved, so a slow spell of the machine hits every config alike
            for label, config in configs:
                _progress(f"throughput, {label}, run {run + 1}/{repeats}")
                seconds, snapshots, bad = _timed_bounded_run(client, items, config)
                violations += bad
                every_run[label].append(seconds)
                _progress(f"  {items / seconds:,.0f} items/s, {snapshots} snapshots")
                best = results.get(label)
                if best is None or seconds < best[0]:
                    results[label] = (seconds, snapshots)
    base = results["NONE"][0]
    median_base = statistics.median(every_run["NONE"])
    rows = []
    for label, (seconds, snapshots) in results.items():
        snaps = "-" if label == "NONE" else str(snapshots)
        median = statistics.median(every_run[label])
        rows.append(
            [
                label,
                _common.rate(items, seconds),
                f"{seconds * 1000:,.0f}",
                f"{base / seconds:.2f}",
                _common.rate(items, median),
                f"{median_base / median:.2f}",
                snaps,
            ]
        )
    every_second = configs[-1][0]
    cost = 1 - base / results[every_second][0]
    median_cost = 1 - median_base / statistics.median(every_run[every_second])
    verdict = "met" if cost <= TARGET_SNAPSHOT_COST else "NOT met"
    check = "" if not violations else f"\n- {violations} exactly-once violations (should be 0)"
    return (
        "### Throughput cost of snapshots\n\n"
        f"2 members; the counting job, bounded to {items:,} items, unpaced, {THROUGHPUT_KEYS:,} keys of "
        f"state. Best and median of {repeats} interleaved runs, job time (submit to join); throughput as "
        "a fraction of NONE's; snapshots: complete snapshots in the best run.\n\n"
        + _common.markdown_table(
            ["guarantee", "best items/s", "ms", "vs NONE", "median items/s", "vs NONE", "snapshots"], rows
        )
        + f"\nTarget: snapshots every 1 s cost at most {TARGET_SNAPSHOT_COST:.0%} of throughput — "
        f"best against best they cost {cost:.1%}: {verdict} (median against median: "
        f"{median_cost:.1%}).{check}\n",
        cost,
    )


# -- 3. snapshot size and time ----------------------------------------------------------------


def _plain_pickle(keys: int) -> tuple[int, float]:
    """Bytes and seconds of ``pickle.dumps`` of the same state as one plain dict ``{key: [count]}``."""
    state = {key: [1] for key in range(keys)}
    started = time.perf_counter()
    size = len(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
    seconds = time.perf_counter() - started
    del state
    return size, seconds


def _snapshot_sizes_section(keys_list: Sequence[int], repeats: int, budget_s: float) -> str:
    rows = []
    notes = []
    for keys in keys_list:
        _progress(f"snapshot size, {keys:,} keys ({repeats} snapshots after the fill)")
        try:
            with (
                tempfile.TemporaryDirectory(prefix="jetlet-ft-bench-") as tmp,
                local_cluster(3) as client,  # the default failure detector: a large state is no failure
            ):
                config = JobConfig(
                    processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
                    snapshot_interval_millis=SNAPSHOT_INTERVAL_MS,
                )
                job = client.new_job(_counting_job(keys, tmp, STREAM_RATE, None), config)
                filled = _fill_and_snapshot(client, job, keys, time.time() + budget_s, repeats)
                violations = _read_report(pathlib.Path(tmp)).violations
        except _Abort as exc:
            _progress(f"  not measured: {exc}")
            rows.append([f"{keys:,}", "not measured", "", "", "", "", "", ""])
            notes.append(f"{keys:,} keys not measured: {exc}.")
            continue
        plain_bytes, plain_s = _plain_pickle(keys)
        snaps = filled.snapshots
        best = min(snaps, key=lambda s: s["duration_ms"])
        if violations:
            notes.append(f"{keys:,} keys: {violations} exactly-once violations (should be 0).")
        if filled.failures:
            notes.append(
                f"{keys:,} keys: {len(filled.failures)} snapshots failed meanwhile (the coordinator gives "
                f"the members' parts {snapshot_coordinator.SNAPSHOT_TIMEOUT_S:.0f} s): "
                + " | ".join(filled.failures[:3])
            )
        rows.append(
            [
                f"{keys:,}",
                f"{best['entries']:,}",
                f"{best['bytes'] / 1e6:.1f}",
                f"{best['bytes'] / keys:.1f}",
                f"{best['bytes'] / plain_bytes:.2f}",
                f"{best['duration_ms']:,} (of {len(snaps)})",
                f"{plain_s * 1000:,.0f}",
                f"{filled.peak_rss_mb:,}",
            ]
        )
        _progress(
            f"  fill {filled.fill_rate:,.0f} items/s; "
            f"plain pickle {plain_bytes / 1e6:.1f} MB in {plain_s:.2f} s"
        )
    text = "".join(f"\n- {n}" for n in notes)
    return (
        "### Snapshot size and time\n\n"
        "3 members with the default failure detector (a member busy with a large state is no failure); "
        f"the counting job at {STREAM_RATE:,} items/s (it keeps running while it snapshots), "
        f"EXACTLY_ONCE, snapshots every {SNAPSHOT_INTERVAL_MS / 1000:g} s. A complete snapshot taken "
        f"after every key had state (the best of up to {repeats} consecutive ones by duration, fewer "
        f"when the next would not fit in the {budget_s:.0f} s budget; how many in brackets): entries "
        "(keys plus source positions), "
        "bytes, bytes per key, bytes over a plain `pickle.dumps` of the same state as one dict; duration "
        "(start to every member's part stored with its backup); the plain pickle's time; peak resident "
        "memory of the 3 members together.\n\n"
        + _common.markdown_table(
            [
                "keys",
                "entries",
                "MB",
                "bytes/key",
                "vs pickle",
                "duration ms",
                "pickle ms",
                "members' RSS MB",
            ],
            rows,
        )
        + (text + "\n" if text else "")
    )


# -- main -------------------------------------------------------------------------------------

SECTIONS = ("recovery", "throughput", "snapshots")


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Fault-tolerance benchmark: recovery time, snapshot cost, snapshot size"
    )
    parser.add_argument(
        "--repeats", type=int, default=_common.DEFAULT_REPEATS, help="runs per measurement (best wins)"
    )
    parser.add_argument("--quick", action="store_true", help="a short smoke run (small sizes, 1 repeat)")
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated sections to run, of {', '.join(SECTIONS)} (default: all)",
    )
    parser.add_argument(
        "--recovery-keys",
        type=_key_counts,
        help="key counts of the recovery runs, comma-separated multiples of 6 "
        f"(default: {_join(RECOVERY_KEYS)}; --quick: {RECOVERY_KEYS[0]})",
    )
    parser.add_argument(
        "--snapshot-keys",
        type=_key_counts,
        help=f"key counts of the snapshot-size runs (default: {_join(SNAPSHOT_KEYS)}; --quick: "
        f"{SNAPSHOT_KEYS[0]})",
    )
    parser.add_argument(
        "--throughput-items",
        type=int,
        help=f"items of each throughput run (default: {THROUGHPUT_ITEMS:,}; --quick: {QUICK_ITEMS:,})",
    )
    args = parser.parse_args(list(argv))
    if args.recovery_keys and any(k % 6 for k in args.recovery_keys):
        parser.error("--recovery-keys must be multiples of 6 (see the exactly-once check)")
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    chosen = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown or not chosen:
        parser.error(f"--sections: unknown {unknown}; choose from {', '.join(SECTIONS)}")
    args.sections = chosen
    return args


def _key_counts(text: str) -> tuple[int, ...]:
    counts = tuple(int(part.replace("_", "")) for part in text.split(",") if part.strip())
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"expected positive key counts, got {text!r}")
    return counts


def _join(counts: Sequence[int]) -> str:
    return ",".join(str(c) for c in counts)


@contextlib.contextmanager
def _timed(what: str) -> Iterator[None]:
    started = time.monotonic()
    yield
    _progress(f"{what} took {time.monotonic() - started:.0f} s")


def main(argv: Sequence[str] = ()) -> str:
    args = _parse(argv)
    repeats = 1 if args.quick else args.repeats
    parts = [
        "## Fault tolerance (member processes on loopback)\n\n"
        + ("Quick smoke run (`--quick`): small sizes, 1 repeat.\n\n" if args.quick else "")
        + "Member flags: `"
        + " ".join(MEMBER_ARGS)
        + "`.\n"
    ]
    if "recovery" in args.sections:
        keys = args.recovery_keys or (RECOVERY_KEYS[:1] if args.quick else RECOVERY_KEYS)
        with _timed("recovery"):
            parts.append(_recovery_section(keys, repeats, 10.0 if args.quick else HANG_TIMEOUT_S))
    if "throughput" in args.sections:
        items = args.throughput_items or (QUICK_ITEMS if args.quick else THROUGHPUT_ITEMS)
        with _timed("throughput"):
            parts.append(_throughput_section(items, repeats)[0])
    if "snapshots" in args.sections:
        keys = args.snapshot_keys or (SNAPSHOT_KEYS[:1] if args.quick else SNAPSHOT_KEYS)
        with _timed("snapshot sizes"):
            parts.append(_snapshot_sizes_section(keys, repeats, 60.0 if args.quick else SIZE_BUDGET_S))
    return "\n".join(parts)


if __name__ == "__main__":
    print(main(sys.argv[1:]))
