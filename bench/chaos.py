"""Chaos suite: seeded faults against a running local cluster, every result compared with plain Python.

Each *scenario* starts a fresh cluster of member processes on loopback
(``local_cluster``, with a 100 ms heartbeat and a 1.5 s failure timeout),
submits one EXACTLY_ONCE job, waits for its first complete snapshot, injects
its fault at a moment drawn from a seeded generator, and waits for the job to
end. The job reads ``Sources.test_stream`` (``COUNT`` items at ``RATE`` a
second) and keeps three kinds of state, one branch each:

* *windowed*: tumbling-window counts per key, written with the
  two-phase file sink;
* *keyed-stateful*: ``map_stateful`` running counts per key, file sink;
* *map-sink*: ``rolling_aggregate`` counts per key put into a grid map
  (``Sinks.map``), whose state is the map itself.

The committed files and the map are then compared with the same computation
in plain Python: *lost* and *duplicated* count the output records (windowed,
keyed-stateful) and the per-key counts (map) that are missing or in excess;
a keyed-stateful record whose running count is not one of ``1..n`` for its
key is a *wrong state* and counts as a duplicate. A run is

* **exact**: the job COMPLETED and nothing is lost or duplicated;
* **failed with a reason**: the job ended FAILED and said why (a job that
  cannot be restored exactly must fail; this is not wrong, and is counted
  apart);
* **wrong**: anything else (a COMPLETED job with a wrong result, a FAILED
  job without a reason, a job that did not end within ``JOB_TIMEOUT_S``);
* **run error**: the run broke off before a verdict (the cluster did not
  start, or did not do what the fault waits for, such as removing a paused
  member within a minute); the reason says which. Not exact either.

Every run that is not exact keeps its evidence — the members' logs, the
job's output directory, its record and the differences — in ``bench/out/chaos-<scenario>-seed<N>-<time>/``,
and can be replayed alone with ``--scenario NAME --seed N`` (the seed draws
every moment and choice of the run, so the replay is the same run up to the
machine's timing).

*Recovery* is the time from the fault to the job's next ``RUNNING``
transition in any member's log (the new execution initialised on every
member it runs on); a run in which the job never restarted (a link reset
that was reconnected) has none. For the whole-cluster crash it includes
starting the new cluster. The members' resident memory is sampled every
0.2 s; the *large items* scenario states a bound (``LARGE_RSS_BOUND_MB`` per
member) and a run that goes over it is not exact.

The scenarios (``--list`` prints them) are in :data:`SCENARIOS`. Runs are
interleaved: round ``r`` runs every chosen scenario with seed ``r``, so a
suite cut short by ``--deadline`` has at most one run fewer of some of them.

The link reset closes one established data connection between two members
from outside the processes: ``ss -K`` (iproute2) asks the kernel to destroy
the socket (``SOCK_DESTROY``; it needs root and a kernel built with
``CONFIG_INET_DIAG_DESTROY``); the process holding it sees the connection
aborted and its peer sees a reset, as after a middlebox drop. jetlet has no
test hook for it.

Run: ``python bench/chaos.py [--scenario A,B] [--seed N | --repeats N] [--deadline HH:MM]``
or ``python bench/run_all.py --only chaos --repeats 20``.
"""

from __future__ import annotations

import argparse
import ast
import collections
import contextlib
import dataclasses
import datetime
import json
import os
import pathlib
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import _common
import jetlet
from jetlet import AggregateOperations, JobConfig, ProcessingGuarantee, config, records
from jetlet.client import Client, RemoteJob
from jetlet.local_cluster import LocalCluster
from jetlet.pipeline import Pipeline, Sinks, Sources, WindowDefinition
from jetlet.testing import wait_until

BENCH_DIR = pathlib.Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out"
FAST_FAILURE = ("--heartbeat-interval-millis", "100", "--failure-timeout-millis", "1500")
FAILURE_TIMEOUT_S = 1.5
BASE_ARGS = (*FAST_FAILURE, "--scale-up-delay-millis", "1000")
KEYS = 7
RATE = 3000
COUNT = 9_000
"""Three seconds of input at ``RATE``."""
LONG_COUNT = 18_000
"""Six seconds: the scenarios whose member comes back (it joins while the job still runs)."""
WINDOW_MS = 500
SNAPSHOT_INTERVAL_MS = 200
MAP_NAME = "chaos-counts"
JOB_TIMEOUT_S = 150.0
"""Longest a run waits for its job to end after the fault."""
LARGE_ITEM_BYTES = 200_000
LARGE_COUNT = 900
LARGE_RATE = 150
"""Items a second of the large-item source: 30 MB/s, faster than the slow stage drains them."""
LARGE_SLOW_S = 0.03
"""What the slow stage spends on every large item (a processor on each of 3 members: 100 items a second)."""
LARGE_QUEUED_BYTES = 32 * 1024 * 1024
"""The members' ``--max-queued-bytes`` in the large-items scenario (their queue size is the default)."""
LARGE_QUEUE_SIZE = 32
"""The members' ``--queue-size`` in the large-items scenario if they have no ``--max-queued-bytes``."""
LARGE_RSS_BOUND_MB = 400
"""The bound on each member's resident memory in the large-items scenario."""
_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def _progress(message: str) -> None:
    print(f"[chaos] {message}", file=sys.stderr, flush=True)


# -- the jobs and their plain-Python reference ------------------------------------------------------


def _event(seq: int) -> tuple[int, int]:
    return (seq % KEYS, seq)


def _running_count(state: list[int], key: int, event: tuple[int, int]) -> tuple[int, int, int]:
    state[0] += 1
    return (key, event[1], state[0])


def mixed_job(out: pathlib.Path, count: int = COUNT) -> Pipeline:
    """One source, three branches: windowed counts, running counts (files) and rolling counts (a map)."""
    p = Pipeline()
    events = p.read_from(Sources.test_stream(RATE, _event, count)).with_timestamps(lambda e: e[1], 0)
    (
        events.grouping_key(lambda e: e[0])
        .window(WindowDefinition.tumbling(WINDOW_MS))
        .aggregate(AggregateOperations.counting())
        .map(lambda result: (result.key, result.end, result.result))
        .write_to(Sinks.files(str(out / "windowed")))
    )
    (
        events.grouping_key(lambda e: e[0])
        .map_stateful(lambda: [0], _running_count)
        .write_to(Sinks.files(str(out / "stateful")))
    )
    events.grouping_key(lambda e: e[0]).rolling_aggregate(AggregateOperations.counting()).write_to(
        Sinks.map(MAP_NAME)
    )
    return p


def _large_event(seq: int) -> tuple[int, int, bytes]:
    return (seq % KEYS, seq, bytes(LARGE_ITEM_BYTES))


def _large_running_count(
    state: list[int], key: int, event: tuple[int, int, bytes]
) -> tuple[int, int, int, bytes]:
    state[0] += 1
    return (key, event[1], state[0], event[2])


def _slowly(item: tuple[int, int, int, bytes]) -> tuple[int, int, int]:
    time.sleep(LARGE_SLOW_S)
    return item[:3]


def large_job(out: pathlib.Path, count: int = LARGE_COUNT) -> Pipeline:
    """200 KB items through a keyed running count into a slow stage; only the counts are written."""
    p = Pipeline()
    (
        p.read_from(Sources.test_stream(LARGE_RATE, _large_event, count))
        .without_timestamps()
        .grouping_key(lambda e: e[0])
        .map_stateful(lambda: [0], _large_running_count)
        .rebalance()
        .map(_slowly)
        .write_to(Sinks.files(str(out / "stateful")))
    )
    return p


@dataclasses.dataclass
class Comparison:
    """The output against plain Python: what is missing and what is in excess, per kind of state."""

    lost: dict[str, int]
    duplicated: dict[str, int]
    examples: list[str]

    @property
    def exact(self) -> bool:
        return not any(self.lost.values()) and not any(self.duplicated.values())


def _committed(directory: pathlib.Path) -> collections.Counter[Any]:
    """Every line of every committed file (uncommitted ones start with a dot)."""
    found: collections.Counter[Any] = collections.Counter()
    if directory.is_dir():
        for path in directory.iterdir():
            if path.is_file() and not path.name.startswith("."):
                for line in path.read_text().splitlines():
                    found[ast.literal_eval(line)] += 1
    return found


def windowed_reference(count: int = COUNT) -> collections.Counter[tuple[int, int, int]]:
    per_window = collections.Counter((seq % KEYS, (seq // WINDOW_MS + 1) * WINDOW_MS) for seq in range(count))
    return collections.Counter((key, end, n) for (key, end), n in per_window.items())


def _difference(found: collections.Counter[Any], expected: collections.Counter[Any]) -> tuple[int, int]:
    return sum((expected - found).values()), sum((found - expected).values())


def _stateful_difference(found: collections.Counter[Any], count: int) -> tuple[int, int, list[str]]:
    """Items lost and repeated, plus running counts that are not ``1..n`` of their key (as repeated)."""
    items = collections.Counter((record[0], record[1]) for record in found.elements())
    lost, repeated = _difference(items, collections.Counter(_event(seq) for seq in range(count)))
    examples = []
    for key in range(KEYS):
        counts = sorted(record[2] for record in found.elements() if record[0] == key)
        wrong = sum((collections.Counter(counts) - collections.Counter(range(1, len(counts) + 1))).values())
        if wrong:
            repeated += wrong
            examples.append(f"key {key}: {wrong} running counts outside 1..{len(counts)}")
    return lost, repeated, examples


def compare(out: pathlib.Path, grid_map: dict[Any, Any] | None, kind: str, count: int) -> Comparison:
    """The run's committed output (and map) against plain Python, for ``count`` input items."""
    lost: dict[str, int] = {}
    duplicated: dict[str, int] = {}
    examples: list[str] = []
    lost["stateful"], duplicated["stateful"], more = _stateful_difference(_committed(out / "stateful"), count)
    examples += more
    if kind == "mixed":
        lost["windowed"], duplicated["windowed"] = _difference(
            _committed(out / "windowed"), windowed_reference(count)
        )
        expected = collections.Counter(seq % KEYS for seq in range(count))
        found = collections.Counter(grid_map or {})
        lost["map"], duplicated["map"] = _difference(found, expected)
        if lost["map"] or duplicated["map"]:
            examples.append(f"map {dict(sorted(found.items()))} != {dict(sorted(expected.items()))}")
    return Comparison(lost, duplicated, examples)


# -- observing the members --------------------------------------------------------------------------


def _log_stamp(line: str) -> float | None:
    match = _LOG_TIME.match(line)
    if match is None:
        return None
    return datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _first_line_after(logs: Sequence[pathlib.Path], since: float, pattern: str) -> float | None:
    """The time of the earliest line of any of ``logs`` at or after ``since`` matching ``pattern``."""
    found = []
    wanted = re.compile(pattern)
    for log in logs:
        if not log.exists():
            continue
        for line in log.read_text(errors="replace").splitlines():
            stamp = _log_stamp(line)
            if stamp is not None and stamp >= since - 0.001 and wanted.search(line):  # millisecond resolution
                found.append(stamp)
                break
    return min(found, default=None)


class MemorySampler:
    """Samples the resident memory of a set of processes every 0.2 s, keeping each one's peak (MB)."""

    def __init__(self) -> None:
        self.peaks: dict[int, int] = {}
        self._pids: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-memory", daemon=True)

    def watch(self, pids: Sequence[int]) -> None:
        self._pids |= set(pids)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for pid in list(self._pids):
                rss = _rss_mb(pid)
                if rss is not None:
                    self.peaks[pid] = max(self.peaks.get(pid, 0), rss)


def _rss_mb(pid: int) -> int | None:
    try:
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    return None


# -- a run ------------------------------------------------------------------------------------------


@dataclasses.dataclass
class RunContext:
    """What a scenario's fault works with; the fault sets ``observer`` to a client of a member that lives."""

    cluster: LocalCluster
    client: Client
    job: RemoteJob
    rng: random.Random
    work: pathlib.Path
    out: pathlib.Path
    memory: MemorySampler
    stack: contextlib.ExitStack
    observer: Client
    fault_at: float = 0.0
    logs: list[pathlib.Path] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    extra: list[subprocess.Popen[bytes]] = dataclasses.field(default_factory=list)
    """Member processes the fault started itself (stopped when the run ends)."""
    after: list[Callable[[RunContext], None]] = dataclasses.field(default_factory=list)
    """What the fault still notes once the job has ended."""

    def client_of(self, index: int) -> Client:
        return Client(self.client.addresses[index], self.client.token)

    def signal(self, index: int, how: signal.Signals) -> None:
        os.kill(self.client.pids[index], how)

    def wait_snapshots(self, more: int = 1) -> None:
        """Wait until ``more`` further snapshots of the job have completed."""
        taken = int(self.job.snapshot.get("count", 0))
        wait_until(lambda: int(self.job.snapshot.get("count", 0)) >= taken + more, "a snapshot", 60)


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    fault: Callable[[RunContext], None]
    members: int = 3
    member_args: tuple[str, ...] = BASE_ARGS
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    kind: str = "mixed"
    fixed_ports: bool = False
    count: int = COUNT
    """Items of the job's input."""


@dataclasses.dataclass
class RunResult:
    scenario: str
    seed: int
    verdict: str
    """``exact``, ``failed`` (FAILED with a reason), ``wrong``, or ``error`` (the run broke off)."""
    status: str = ""
    lost: int = 0
    duplicated: int = 0
    recovery_s: float | None = None
    reason: str = ""
    peak_rss_mb: int = 0
    evidence: str = ""
    notes: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0


def _ephemeral_ports() -> range:
    """The ports the kernel hands out to ``bind(0)`` and outgoing connections (Linux's default if unread)."""
    try:
        low, high = map(int, pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32_768, 60_999
    return range(low, high + 1)


def _free_port_block(count: int) -> int:
    """A first port of ``count`` consecutive ports free on 127.0.0.1 (bound and released).

    The block lies below the kernel's ephemeral range: a port in it, released here and bound by
    the member a moment later, could be taken meanwhile by any process's outgoing connection or
    ``bind(0)`` (on a busy machine it was: the member exited with "Address already in use").
    """
    rng = random.Random()
    top = min(_ephemeral_ports().start, 65_536)
    for _ in range(200):
        first = rng.randrange(10_000, top - count)
        sockets = []
        try:
            for port in range(first, first + count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError(f"no block of {count} free ports found")


def _job_config(scenario: Scenario) -> JobConfig:
    return JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=SNAPSHOT_INTERVAL_MS,
        **scenario.config,
    )


def _start_cluster(scenario: Scenario, args: Sequence[str], log_dir: pathlib.Path) -> LocalCluster:
    rest_port = _free_port_block(scenario.members) if scenario.fixed_ports else 0
    data_port = _free_port_block(scenario.members) if scenario.fixed_ports else 0
    return LocalCluster(
        scenario.members, list(args), log_dir=log_dir, rest_port=rest_port, data_port=data_port
    )


def run_once(scenario: Scenario, seed: int) -> RunResult:
    """One seeded run of ``scenario``: its verdict, differences, recovery time and evidence."""
    started = time.monotonic()
    rng = random.Random(f"{scenario.name}:{seed}")
    work = pathlib.Path(tempfile.mkdtemp(prefix=f"jetlet-chaos-{scenario.name}-"))
    result = RunResult(scenario.name, seed, "wrong")
    record: dict[str, Any] = {}
    try:
        with contextlib.ExitStack() as stack, MemorySampler() as memory:
            log_dir = work / "logs"
            cluster = _start_cluster(scenario, [*scenario.member_args, *_args_for(scenario, work)], log_dir)
            client = stack.enter_context(cluster)
            memory.watch(client.pids)
            build = large_job if scenario.kind == "large" else mixed_job
            job = client.new_job(build(work / "out", scenario.count), _job_config(scenario))
            context = RunContext(cluster, client, job, rng, work, work / "out", memory, stack, client)
            context.logs = list(cluster.log_paths)
            stack.callback(_stop_extra, context)
            if _first_snapshot_or_end(job):
                scenario.fault(context)
            memory.watch(context.client.pids)
            result.status, result.reason = _wait_for_end(context, context.job.id)
            record = _retrying(lambda: context.observer.request("GET", f"/jobs/{context.job.id}"))
            grid_map = (
                _retrying(lambda: context.observer.get_map(MAP_NAME)) if scenario.kind == "mixed" else None
            )
            comparison = compare(work / "out", grid_map, scenario.kind, scenario.count)
            result.lost = sum(comparison.lost.values())
            result.duplicated = sum(comparison.duplicated.values())
            for note in context.after:
                note(context)
            result.notes = [*context.notes, *comparison.examples]
            if not comparison.exact:
                result.notes.append(f"lost {comparison.lost}, duplicated {comparison.duplicated}")
            result.verdict = _verdict(result, comparison)
            if context.fault_at:
                result.recovery_s = _recovery(context)
            result.peak_rss_mb = max(memory.peaks.values(), default=0)
            if scenario.kind == "large" and result.peak_rss_mb > LARGE_RSS_BOUND_MB:
                result.verdict = "wrong"
                result.notes.append(
                    f"peak RSS {result.peak_rss_mb} MB over the {LARGE_RSS_BOUND_MB} MB bound"
                )
    except Exception as exc:  # no verdict: the run broke off (the reason says where); not exact, kept
        result.verdict = "error"
        result.reason = f"run error: {type(exc).__name__}: {exc}"
    result.seconds = time.monotonic() - started
    if result.verdict != "exact":
        result.evidence = str(_keep_evidence(result, work, record))
    shutil.rmtree(work, ignore_errors=True)
    return result


def _first_snapshot_or_end(job: RemoteJob) -> bool:
    """Wait for the job's first complete snapshot (True), or for its end before one (False)."""
    ended = False

    def snapshot_or_end() -> bool:
        nonlocal ended
        record = job.record()
        ended = record.status in records.TERMINAL_STATUSES
        return ended or int(record.snapshot.get("count", 0)) >= 1

    wait_until(snapshot_or_end, "the job's first complete snapshot", 60)
    return not ended


def _verdict(result: RunResult, comparison: Comparison) -> str:
    if result.status == "COMPLETED" and comparison.exact:
        return "exact"
    if result.status == "FAILED" and result.reason.strip():
        return "failed"
    return "wrong"


def _wait_for_end(context: RunContext, job_id: int) -> tuple[str, str]:
    """The job's final status and failure, read from the observer; ``TIMEOUT`` if it did not end."""
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(jetlet.JetletError, OSError, TimeoutError):
            record = context.observer.request("GET", f"/jobs/{job_id}")
            if record["status"] in ("COMPLETED", "FAILED"):
                return record["status"], str(record.get("failure") or "")
        time.sleep(0.2)
    return "TIMEOUT", f"the job did not end within {JOB_TIMEOUT_S:.0f} s of the fault"


def _retrying(call: Callable[[], Any], attempts: int = 20) -> Any:
    for attempt in range(attempts):
        try:
            return call()
        except (jetlet.JetletError, OSError, TimeoutError):
            if attempt == attempts - 1:
                raise
            time.sleep(0.25)
    raise AssertionError("unreachable")


def _recovery(context: RunContext) -> float | None:
    running = _first_line_after(context.logs, context.fault_at, " RUNNING")
    return None if running is None else running - context.fault_at


def _stop_extra(context: RunContext) -> None:
    for process in context.extra:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGCONT)
            process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for pid in context.client.pids:  # a stopped member would not heed the cluster's SIGTERM
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def _keep_evidence(result: RunResult, work: pathlib.Path, record: dict[str, Any]) -> pathlib.Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    keep = OUT_DIR / f"chaos-{result.scenario}-seed{result.seed}-{stamp}"
    keep.mkdir(parents=True, exist_ok=True)
    for log in sorted(work.glob("logs*/*.log")):
        shutil.copy(log, keep / f"{log.parent.name}-{log.name}")
    if (work / "out").is_dir():  # the committed files and the temporary ones, by name
        shutil.copytree(work / "out", keep / "out", dirs_exist_ok=True)
    summary = dataclasses.asdict(result) | {"job_record": _jsonable(record)}
    (keep / "run.json").write_text(json.dumps(summary, indent=2, default=str))
    return keep


def _jsonable(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("dag", "definition")}


def _args_for(scenario: Scenario, work: pathlib.Path) -> list[str]:
    if scenario.name == "cluster-crash-durable":
        return ["--snapshot-directory", str(work / "snapshots")]
    return []


# -- the faults -------------------------------------------------------------------------------------


def _moment(context: RunContext, low: float = 0.1, high: float = 1.5) -> None:
    """Let the job run on for a seeded moment before the fault (a chosen moment, not a wait)."""
    time.sleep(context.rng.uniform(low, high))


def _kill(index: int) -> Callable[[RunContext], None]:
    def fault(context: RunContext) -> None:
        _moment(context)
        context.fault_at = time.time()
        context.signal(index, signal.SIGKILL)
        context.observer = context.client_of(1 if index == 0 else 0)

    return fault


def _kill_during_snapshot(context: RunContext) -> None:
    """SIGKILL of m3 while a snapshot is in flight.

    Snapshots start at a steady period (one interval after the last one's commit); the starts of
    two consecutive ones (the event feed's ``snapshot_started``) give it, and the kill comes at a
    later start plus a seeded share of the last snapshot's duration. Whether a snapshot was in
    flight is read from the coordinator's log after the run (it logs the snapshot failed).
    """
    starts: list[float] = []
    for event in context.client.events(timeout=30):
        if event.kind is records.EventKind.SNAPSHOT_STARTED and event.job_id == context.job.id:
            starts.append(event.time / 1000)
            if len(starts) == 2:
                break
    if len(starts) < 2:
        raise RuntimeError("no two snapshot starts within 30 s")
    period = starts[-1] - starts[-2]
    duration = max(int(context.job.snapshot.get("duration_ms", 0)) / 1000, 0.01)
    target = starts[-1] + context.rng.uniform(0.1, 0.9) * duration
    while target < time.time() + 0.02:
        target += period
    time.sleep(target - time.time())
    context.fault_at = time.time()
    context.signal(2, signal.SIGKILL)
    context.after.append(_note_failed_snapshot)


def _note_failed_snapshot(context: RunContext) -> None:
    hit = _first_line_after(context.logs[:1], context.fault_at, r"snapshot \d+ failed") is not None
    context.notes.append("in flight: a snapshot failed" if hit else "no snapshot failure logged")


def _two_kills(context: RunContext) -> None:
    _moment(context)
    context.fault_at = time.time()
    context.signal(2, signal.SIGKILL)
    time.sleep(0.25)  # the scenario's gap between the two deaths
    context.signal(3, signal.SIGKILL)


def _member_count(client: Client) -> int:
    return len(client.cluster().members)


def _pause(index: int) -> Callable[[RunContext], None]:
    def fault(context: RunContext) -> None:
        observer = context.client_of(1 if index == 0 else 0)
        _moment(context)
        context.fault_at = time.time()
        context.signal(index, signal.SIGSTOP)
        try:
            wait_until(lambda: _member_count(observer) == 2, "the paused member to be removed", 60)
            time.sleep(context.rng.uniform(0.0, 1.0))  # paused on a little past its removal
        finally:
            context.signal(index, signal.SIGCONT)
        context.observer = observer
        _note_convergence(context)

    return fault


def _note_convergence(context: RunContext, timeout: float = 30.0) -> None:
    """Whether every member comes to see the same members and coordinator (noted, not the verdict)."""
    clients = [context.client_of(i) for i in range(len(context.client.addresses))]

    def one_cluster() -> bool:
        views = [c.cluster() for c in clients]
        coordinators = {v.coordinator for v in views}
        return len(coordinators) == 1 and all(len(v.members) == len(clients) for v in views)

    try:
        wait_until(one_cluster, "one cluster", timeout)
    except (AssertionError, TimeoutError, jetlet.JetletError):
        context.notes.append(f"the members did not converge on one view within {timeout:.0f} s")


def _data_connections(pids: Sequence[int], data_ports: dict[int, int]) -> list[tuple[str, str, int, int]]:
    """Established TCP connections from one member's process to another member's data port.

    ``(local, peer, from pid, to pid)``; read with ``ss -tnp`` (the owning process needs root).
    """
    shown = subprocess.run(
        ["ss", "-tnpH", "state", "established"], capture_output=True, text=True, check=True, timeout=10
    ).stdout
    found = []
    for line in shown.splitlines():
        fields = line.split()
        owner = re.search(r"pid=(\d+)", line)
        if len(fields) < 4 or owner is None:
            continue
        local, peer, pid = fields[2], fields[3], int(owner.group(1))
        to = next((p for p, port in data_ports.items() if peer.endswith(f":{port}")), None)
        if pid in pids and to is not None and to != pid:
            found.append((local, peer, pid, to))
    return sorted(found)


def _reset_link(context: RunContext) -> None:
    """Close one data connection between two live members with ``ss -K`` (SOCK_DESTROY; needs root)."""
    pids = list(context.client.pids)
    by_name = {m.name: m for m in context.client.cluster().members}
    data_ports = {
        pid: int(by_name[name].data_address.rpartition(":")[2])
        for pid, name in zip(pids, context.cluster.names, strict=True)
    }
    _moment(context)
    links = _data_connections(pids, data_ports)
    if not links:
        raise RuntimeError("no data connection between two members was found with ss -tnp")
    local, peer, source, target = context.rng.choice(links)
    context.fault_at = time.time()
    subprocess.run(
        ["ss", "-K", "-tn", "src", local, "dst", peer], capture_output=True, check=True, timeout=10
    )
    names = dict(zip(pids, context.cluster.names, strict=True))
    context.notes.append(f"reset {names[source]} -> {names[target]} ({local} -> {peer})")
    _note_convergence(context)


def _restart_on_address(context: RunContext) -> None:
    """SIGKILL of m3, then the same command (same ports, name and files) started again."""
    pid = context.client.pids[2]
    command = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    ready = pathlib.Path(command[command.index("--ready-file") + 1])
    log = context.cluster.log_paths[2]
    _moment(context)
    context.fault_at = time.time()
    context.signal(2, signal.SIGKILL)
    context.observer = context.client_of(0)
    wait_until(lambda: _member_count(context.observer) == 2, "the killed member to be removed", 60)
    ready.unlink(missing_ok=True)
    with log.open("ab") as out:
        context.extra.append(
            subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
    wait_until(ready.exists, "the restarted member's ready file", 60)
    context.memory.watch([context.extra[-1].pid])
    wait_until(lambda: _member_count(context.observer) == 3, "the restarted member to join", 60)


def _graceful_leave(context: RunContext) -> None:
    _moment(context)
    context.fault_at = time.time()
    context.signal(2, signal.SIGTERM)
    context.observer = context.client_of(0)


def _whole_cluster_crash(context: RunContext) -> None:
    """SIGKILL of every member, then a new cluster on the same snapshot directory resumes the job.

    A job that ended before the crash is rightly unknown to the new cluster (its folder was
    removed when it ended): that run breaks off at once, saying so, instead of waiting for it.
    """
    _moment(context)
    status = context.job.status
    if status.is_terminal:
        raise RuntimeError(f"the job ended ({status.value}) before the crash: the moment came too late")
    context.fault_at = time.time()
    for pid in context.client.pids:
        os.kill(pid, signal.SIGKILL)
    context.cluster.stop()
    args = [*BASE_ARGS, "--snapshot-directory", str(context.work / "snapshots")]
    second = LocalCluster(3, args, log_dir=context.work / "logs2")
    client = context.stack.enter_context(second)
    context.cluster, context.client, context.observer = second, client, client
    context.logs += second.log_paths
    context.memory.watch(client.pids)
    wait_until(lambda: client.get_job(context.job.id) is not None, "the job resumed from the directory", 60)


def _large_items_memory_args() -> tuple[str, ...]:
    """The bound in bytes where the members have that setting, else a queue of ``LARGE_QUEUE_SIZE`` items."""
    if "max_queued_bytes" in {field.name for field in dataclasses.fields(config.InstanceConfig)}:
        return ("--max-queued-bytes", str(LARGE_QUEUED_BYTES))
    return ("--queue-size", str(LARGE_QUEUE_SIZE))


def _no_fault(context: RunContext) -> None:
    """Large items: no fault; the job runs to its end under the memory sampler."""


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("kill-member", "SIGKILL of m3", _kill(2)),
        Scenario("kill-coordinator", "SIGKILL of the coordinator m1", _kill(0)),
        Scenario(
            "kill-during-snapshot", "SIGKILL of m3 while a snapshot is in flight", _kill_during_snapshot
        ),
        Scenario(
            "two-kills-backup1",
            "4 members, SIGKILL of m3 and m4 0.25 s apart, backup_count 1",
            _two_kills,
            members=4,
            member_args=(*BASE_ARGS, "--backup-count", "1"),
        ),
        Scenario(
            "two-kills-backup2",
            "4 members, SIGKILL of m3 and m4 0.25 s apart, backup_count 2",
            _two_kills,
            members=4,
            member_args=(*BASE_ARGS, "--backup-count", "2"),
        ),
        Scenario(
            "pause-member",
            "SIGSTOP of m3 past the failure timeout, then SIGCONT",
            _pause(2),
            count=LONG_COUNT,
        ),
        Scenario(
            "pause-coordinator",
            "SIGSTOP of m1 past the failure timeout, then SIGCONT",
            _pause(0),
            count=LONG_COUNT,
        ),
        Scenario(
            "pause-member-sbp",
            "as pause-member, the job with split_brain_protection",
            _pause(2),
            config={"split_brain_protection": True},
            count=LONG_COUNT,
        ),
        Scenario(
            "pause-coordinator-sbp",
            "as pause-coordinator, the job with split_brain_protection",
            _pause(0),
            config={"split_brain_protection": True},
            count=LONG_COUNT,
        ),
        Scenario(
            "link-reset",
            "one data connection between two members closed (ss -K)",
            _reset_link,
            count=LONG_COUNT,
        ),
        Scenario(
            "restart-on-address",
            "SIGKILL of m3, then m3 started again on its ports",
            _restart_on_address,
            fixed_ports=True,
            count=LONG_COUNT,
        ),
        Scenario("graceful-leave", "SIGTERM of m3 (graceful leave)", _graceful_leave),
        Scenario(
            "cluster-crash-durable",
            "SIGKILL of all 3 members; a new cluster on the same snapshot directory resumes",
            _whole_cluster_crash,
        ),
        Scenario(
            "large-items",
            f"{LARGE_ITEM_BYTES // 1000} KB items at {LARGE_RATE}/s into a stage that takes "
            f"{LARGE_SLOW_S * 1000:.0f} ms each, `{' '.join(_large_items_memory_args())}`; "
            f"bound: {LARGE_RSS_BOUND_MB} MB RSS per member",
            _no_fault,
            member_args=(*BASE_ARGS, *_large_items_memory_args()),
            kind="large",
        ),
    )
}


# -- the table --------------------------------------------------------------------------------------


def _seconds(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} / {max(values):.2f}"


def table(results: Sequence[RunResult]) -> str:
    """Per scenario: N of M exact, FAILED with a reason, wrong, lost, duplicated, recovery, memory."""
    rows = []
    for name, scenario in SCENARIOS.items():
        runs = [r for r in results if r.scenario == name]
        if not runs:
            continue
        exact = sum(r.verdict == "exact" for r in runs)
        failed = sum(r.verdict == "failed" for r in runs)
        wrong = sum(r.verdict == "wrong" for r in runs)
        broken = sum(r.verdict == "error" for r in runs)
        recoveries = [r.recovery_s for r in runs if r.recovery_s is not None]
        rows.append(
            [
                f"{name}: {scenario.what}",
                f"{exact} of {len(runs)}",
                str(failed),
                str(wrong),
                str(broken),
                str(sum(r.lost for r in runs)),
                str(sum(r.duplicated for r in runs)),
                _seconds(recoveries),
                f"{len(recoveries)}",
                str(max(r.peak_rss_mb for r in runs)),
            ]
        )
    return _common.markdown_table(
        [
            "scenario",
            "exact",
            "FAILED with reason",
            "wrong",
            "run error",
            "lost",
            "duplicated",
            "recovery s (median / max)",
            "restarts seen",
            "peak member RSS MB",
        ],
        rows,
    )


def _details(results: Sequence[RunResult]) -> str:
    lines = []
    for r in results:
        if r.verdict == "exact":
            continue
        what = {"failed": "FAILED with a reason", "wrong": "WRONG", "error": "RUN ERROR"}[r.verdict]
        reason = r.reason.strip().splitlines()[0] if r.reason.strip() else "(no reason)"
        notes = "; ".join(r.notes)
        lines.append(
            f"- `{r.scenario}` seed {r.seed}: {what} — status {r.status or 'n/a'}: {reason}"
            + (f" ({notes})" if notes else "")
            + (f"; evidence `{pathlib.Path(r.evidence).relative_to(BENCH_DIR.parent)}`" if r.evidence else "")
        )
    return "\n".join(lines)


# -- main -------------------------------------------------------------------------------------------


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="", help="comma-separated scenario names (default: all)")
    parser.add_argument("--seed", type=int, help="run only this seed (replay a run)")
    parser.add_argument("--repeats", type=int, default=1, help="seeds 1..N of every scenario (default 1)")
    parser.add_argument("--first-seed", type=int, default=1, help="the first seed of --repeats (default 1)")
    parser.add_argument(
        "--deadline", default="", help="HH:MM UTC: start no run after it (the table says how many ran)"
    )
    parser.add_argument("--list", action="store_true", help="print the scenarios and exit")
    parser.add_argument(
        "--record", type=pathlib.Path, help="append every run's result to this JSON-lines file as it ends"
    )
    parser.add_argument(
        "--table-from", type=pathlib.Path, help="run nothing: make the section from a --record file"
    )
    parser.add_argument(
        "--results", type=pathlib.Path, help="also put the section into this RESULTS.md (as run_all does)"
    )
    parser.add_argument("--about", default="", help="a sentence the section adds (e.g. how it was run)")
    args = parser.parse_args(list(argv))
    chosen = [s.strip() for s in args.scenario.split(",") if s.strip()] or list(SCENARIOS)
    unknown = sorted(set(chosen) - set(SCENARIOS))
    if unknown:
        parser.error(f"--scenario: unknown {unknown}; choose from {', '.join(SCENARIOS)}")
    args.scenarios = chosen
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    return args


def _deadline(text: str) -> float:
    if not text:
        return float("inf")
    hour, minute = (int(part) for part in text.split(":"))
    now = datetime.datetime.now(datetime.UTC)
    return now.replace(hour=hour, minute=minute, second=0, microsecond=0).timestamp()


def run_suite(
    names: Sequence[str],
    seeds: Sequence[int],
    deadline: float = float("inf"),
    record: pathlib.Path | None = None,
) -> list[RunResult]:
    """Rounds of every scenario in ``names``, one seed a round, until ``deadline``; every run's result."""
    results: list[RunResult] = []
    for seed in seeds:
        for name in names:
            if time.time() >= deadline:
                _progress(f"the deadline has passed: stopping after {len(results)} runs")
                return results
            _progress(f"{name} seed {seed} ...")
            result = run_once(SCENARIOS[name], seed)
            _progress(_one_line(result))
            results.append(result)
            if record is not None:
                with record.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(dataclasses.asdict(result)) + "\n")
    return results


def _one_line(result: RunResult) -> str:
    recovery = "none" if result.recovery_s is None else f"{result.recovery_s:.2f} s"
    reason = result.reason.strip().splitlines()[0] if result.reason.strip() else ""
    return (
        f"  {result.verdict} ({result.status}) lost {result.lost} dup {result.duplicated} "
        f"recovery {recovery}, run {result.seconds:.0f} s"
        + (f": {reason}" if reason else "")
        + (f" [{'; '.join(result.notes)}]" if result.notes else "")
    )


def _read_record(path: pathlib.Path) -> list[RunResult]:
    return [RunResult(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def _snapshot_hits(results: Sequence[RunResult]) -> str:
    """How many kill-during-snapshot runs met a snapshot in flight (the coordinator logged it failed)."""
    runs = [r for r in results if r.scenario == "kill-during-snapshot"]
    if not runs:
        return ""
    hits = sum(any(note.startswith("in flight") for note in r.notes) for r in runs)
    return (
        f"\nkill-during-snapshot: the kill met a snapshot in flight (the coordinator logged it failed) "
        f"in {hits} of {len(runs)} runs.\n"
    )


def section(results: Sequence[RunResult], load: str, about: str = "") -> str:
    """The Markdown section of ``results``: how the runs were made, the table and every inexact run."""
    seeds = sorted({r.seed for r in results})
    counts = collections.Counter(r.scenario for r in results)
    spread = f"{min(counts.values())}" if len(set(counts.values())) == 1 else "varying (see the table)"
    details = _details(results)
    return (
        "## Chaos suite (member processes on loopback)\n\n"
        f"{len(results)} runs: seeds {seeds[0]}..{seeds[-1]}, interleaved by round (round *r* runs every "
        f"scenario with seed *r*), {spread} runs per scenario; {load}. Each run: a fresh cluster "
        f"(`{' '.join(BASE_ARGS)}`), one EXACTLY_ONCE job ({COUNT:,} items at {RATE:,}/s, {LONG_COUNT:,} "
        "where a member comes back, so that it joins while the job runs; snapshots every "
        f"{SNAPSHOT_INTERVAL_MS} ms) with windowed, keyed-stateful and map-sink state, the fault at a seeded "
        "moment after its first snapshot, its output compared with plain Python. *Lost*/*duplicated*: "
        "output records (and per-key map counts) missing or in excess, summed over the runs. *Recovery*: "
        "the fault to the job's next RUNNING in any member's log (median / max over the runs that "
        "restarted; after a pause it includes the 1.5 s failure timeout). Replay a run with "
        f"`python bench/chaos.py --scenario NAME --seed N`.{' ' + about if about else ''}\n\n"
        + table(results)
        + _snapshot_hits(results)
        + (f"\nRuns that were not exact:\n\n{details}\n" if details else "\nEvery run was exact.\n")
    )


def main(argv: Sequence[str] = ()) -> str:
    args = _parse(argv)
    if args.list:
        return "\n".join(f"{s.name}: {s.what}" for s in SCENARIOS.values())
    if args.table_from is not None:
        markdown = section(_read_record(args.table_from), "results read from the run record", args.about)
    else:
        first = args.first_seed
        seeds = [args.seed] if args.seed is not None else list(range(first, first + args.repeats))
        load_before = os.getloadavg()
        results = run_suite(args.scenarios, seeds, _deadline(args.deadline), args.record)
        load = f"one-minute load average {load_before[0]:.1f} before and {os.getloadavg()[0]:.1f} after"
        markdown = section(results, load, args.about)
    if args.results is not None:
        import run_all  # beside this script: the same section markers and provenance line

        command = " ".join(["python", "bench/chaos.py", *argv])
        existing = args.results.read_text(encoding="utf-8") if args.results.exists() else ""
        fresh = {"chaos": run_all.wrap_section("chaos", markdown, command)}
        args.results.write_text(run_all.merge_sections(existing, fresh), encoding="utf-8")
    return markdown


if __name__ == "__main__":
    print(main(sys.argv[1:]))
