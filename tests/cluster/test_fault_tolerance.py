"""Fault tolerance on a real 3-member local cluster: member deaths, a member joining, the job lifecycle.

Every job reads a replayable, paced source and writes with the two-phase
file sink, so what is committed is exactly what the job produced once. The
failure is injected at a moment drawn from a seeded random generator (the
seed is in the test's name), and the committed output is compared with a
plain-Python computation over the same input: for EXACTLY_ONCE equal as a
multiset (nothing lost, nothing duplicated); for AT_LEAST_ONCE every
expected item present, duplicates counted and reported.
"""

from __future__ import annotations

import ast
import collections
import os
import pathlib
import random
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

import jetlet
from jetlet import AggregateOperations, JobConfig, ProcessingGuarantee
from jetlet.client import Client, RequestRefusedError
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sinks, Sources, WindowDefinition
from jetlet.testing import wait_until

FAST_FAILURE = ["--heartbeat-interval-millis", "100", "--failure-timeout-millis", "1500"]
KEYS = 7
RATE = 4000
COUNT = 16000  # four seconds of input
WINDOW_MS = 500


def _event(seq: int) -> tuple[int, int]:
    return (seq % KEYS, seq)


def _windowed_count(out: str, rate: int = RATE) -> Pipeline:
    p = Pipeline()
    (
        p.read_from(Sources.test_stream(rate, _event, COUNT))
        .with_timestamps(lambda event: event[1], 0)
        .grouping_key(lambda event: event[0])
        .window(WindowDefinition.tumbling(WINDOW_MS))
        .aggregate(AggregateOperations.counting())
        .map(lambda result: (result.key, result.end, result.result))
        .write_to(Sinks.files(out))
    )
    return p


def _windowed_reference() -> collections.Counter[tuple[int, int, int]]:
    counts = collections.Counter((seq % KEYS, (seq // WINDOW_MS + 1) * WINDOW_MS) for seq in range(COUNT))
    return collections.Counter((key, end, count) for (key, end), count in counts.items())


def _running_count(state: list[int], key: int, event: tuple[int, int]) -> tuple[int, int, int]:
    state[0] += 1
    return (key, event[1], state[0])


def _stateful_map(out: str) -> Pipeline:
    p = Pipeline()
    (
        p.read_from(Sources.test_stream(RATE, _event, COUNT))
        .without_timestamps()
        .grouping_key(lambda event: event[0])
        .map_stateful(lambda: [0], _running_count)
        .write_to(Sinks.files(out))
    )
    return p


def _check_stateful(found: collections.Counter[Any]) -> None:
    """Exactly once: every item once, and per key the running counts are exactly 1..n (in any order).

    Items of one key come from source processors on several members, so their
    order is not fixed; a lost or repeated state update shows as a missing or
    repeated count, a lost or repeated item as a missing or repeated sequence.
    """
    assert sum(found.values()) == COUNT, f"{sum(found.values())} outputs for {COUNT} items"
    items = collections.Counter((key, seq) for key, seq, _ in found.elements())
    assert items == collections.Counter(_event(seq) for seq in range(COUNT))
    for key in range(KEYS):
        counts = sorted(n for k, _, n in found.elements() if k == key)
        assert counts == list(range(1, len(counts) + 1)), f"key {key}: the running counts are not 1..n"


def _committed(directory: pathlib.Path) -> collections.Counter[Any]:
    """The committed output: every line of every visible file (temporary files start with a dot)."""
    found: collections.Counter[Any] = collections.Counter()
    for path in directory.iterdir():
        if path.is_file() and not path.name.startswith("."):
            for line in path.read_text().splitlines():
                found[ast.literal_eval(line)] += 1
    return found


def _config(guarantee: ProcessingGuarantee, **more: Any) -> JobConfig:
    return JobConfig(processing_guarantee=guarantee, snapshot_interval_millis=200, **more)


def _wait_for_snapshot(client: Client, job: Any, at_least: int = 1) -> None:
    wait_until(lambda: job.snapshot.get("count", 0) >= at_least, "a complete snapshot", 30)


def _run_with_kill(
    tmp_path: pathlib.Path,
    build: Callable[[str], Pipeline],
    guarantee: ProcessingGuarantee,
    seed: int,
    victim: int,
    during_snapshot: bool = False,
    failure: signal.Signals = signal.SIGKILL,
) -> collections.Counter[Any]:
    out = tmp_path / "out"
    rng = random.Random(seed)
    with local_cluster(3, FAST_FAILURE) as client:
        survivor = Client(client.addresses[1 if victim == 0 else 0], client.token)
        job = client.new_job(build(str(out)), _config(guarantee))
        _wait_for_snapshot(client, job)
        if during_snapshot:  # kill while the next snapshot is being taken
            taken = job.snapshot["count"]
            wait_until(lambda: job.snapshot.get("count", 0) > taken, "the next snapshot", 30)
            time.sleep(rng.uniform(0.0, 0.2))
        else:
            time.sleep(rng.uniform(0.2, 2.0))
        os.kill(client.pids[victim], failure)
        try:
            wait_until(
                lambda: survivor.get_job(job.id) is not None, "the job to be known after the failure", 30
            )
            handle = survivor.get_job(job.id)
            assert handle is not None
            handle.join(120)
            assert handle.status is jetlet.JobStatus.COMPLETED
        finally:  # a stopped process holds its connections open until it is killed
            os.kill(client.pids[victim], signal.SIGKILL)
    return _committed(out)


@pytest.mark.parametrize("seed", [11, 23])
def test_exactly_once_windowed_count_survives_a_member_killed_mid_job(
    tmp_path: pathlib.Path, seed: int
) -> None:
    found = _run_with_kill(tmp_path, _windowed_count, ProcessingGuarantee.EXACTLY_ONCE, seed, victim=2)
    assert found == _windowed_reference()


def test_exactly_once_stateful_map_survives_a_member_killed_mid_job(tmp_path: pathlib.Path) -> None:
    _check_stateful(_run_with_kill(tmp_path, _stateful_map, ProcessingGuarantee.EXACTLY_ONCE, 5, victim=1))


def _stateful_map_with_copies(out: str) -> Pipeline:
    """:func:`_stateful_map` whose states are copied for snapshots (``copy_fn``), not pickled."""
    p = Pipeline()
    (
        p.read_from(Sources.test_stream(RATE, _event, COUNT))
        .without_timestamps()
        .grouping_key(lambda event: event[0])
        .map_stateful(lambda: [0], _running_count, copy_fn=list.copy)
        .write_to(Sinks.files(out))
    )
    return p


def test_exactly_once_stateful_map_with_a_copy_fn_survives_a_member_killed_mid_job(
    tmp_path: pathlib.Path,
) -> None:
    found = _run_with_kill(
        tmp_path, _stateful_map_with_copies, ProcessingGuarantee.EXACTLY_ONCE, 17, victim=1
    )
    _check_stateful(found)


def _failing_copy(acc: list[Any]) -> list[Any]:
    raise ValueError("this accumulator cannot be copied")


def test_a_copy_fn_that_fails_at_a_snapshot_fails_the_job_naming_the_stage(tmp_path: pathlib.Path) -> None:
    p = Pipeline()
    (
        p.read_from(Sources.test_stream(RATE, _event, COUNT))
        .with_timestamps(lambda event: event[1], 0)
        .grouping_key(lambda event: event[0])
        .window(WindowDefinition.tumbling(WINDOW_MS))
        .aggregate(AggregateOperations.to_list().and_copy(_failing_copy))
        .set_name("frame-lists")
        .write_to(Sinks.files(str(tmp_path / "out")))
    )
    with local_cluster(1, FAST_FAILURE) as client:
        job = client.new_job(p, _config(ProcessingGuarantee.EXACTLY_ONCE))
        with pytest.raises(jetlet.JobFailedError) as failure:
            job.join(120)
    assert "stage 'frame-lists" in str(failure.value)
    assert "ValueError: this accumulator cannot be copied" in str(failure.value)


def test_exactly_once_survives_a_member_killed_during_a_snapshot(tmp_path: pathlib.Path) -> None:
    found = _run_with_kill(
        tmp_path, _windowed_count, ProcessingGuarantee.EXACTLY_ONCE, 7, victim=2, during_snapshot=True
    )
    assert found == _windowed_reference()


def test_exactly_once_survives_the_coordinator_killed(tmp_path: pathlib.Path) -> None:
    _check_stateful(_run_with_kill(tmp_path, _stateful_map, ProcessingGuarantee.EXACTLY_ONCE, 13, victim=0))


def test_exactly_once_survives_a_member_that_hangs_with_its_connections_open(tmp_path: pathlib.Path) -> None:
    # SIGSTOP: no connection drops; the member misses its heartbeats and the membership drops it
    found = _run_with_kill(
        tmp_path, _windowed_count, ProcessingGuarantee.EXACTLY_ONCE, 29, victim=2, failure=signal.SIGSTOP
    )
    assert found == _windowed_reference()


def test_at_least_once_loses_nothing_and_reports_its_duplicates(tmp_path: pathlib.Path) -> None:
    # replayed items count twice in a running total, so compare the items seen, (key, sequence)
    found = collections.Counter(
        (key, seq)
        for (key, seq, _), n in _run_with_kill(
            tmp_path, _stateful_map, ProcessingGuarantee.AT_LEAST_ONCE, 17, victim=2
        ).items()
        for _ in range(n)
    )
    expected = collections.Counter(_event(seq) for seq in range(COUNT))
    duplicates = sum((found - expected).values())
    print(f"at-least-once after a member's death: {duplicates} duplicates of {sum(expected.values())} items")
    assert not expected - found, "items were lost"
    assert set(found) == set(expected)


def test_a_member_that_joins_takes_part_and_the_results_stay_exact(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    args = [*FAST_FAILURE, "--scale-up-delay-millis", "300"]
    with local_cluster(2, args) as client:
        # sixteen seconds of input: a member process starting on a loaded machine joins well within it
        job = client.new_job(_windowed_count(str(out), RATE // 4), _config(ProcessingGuarantee.EXACTLY_ONCE))
        _wait_for_snapshot(client, job)
        assert client.add_member is not None
        client.add_member()
        wait_until(lambda: len(client.cluster().members) == 3, "the third member to join", 30)
        job.join(120)
        metrics = job.metrics()
        assert any(name.startswith("m3/") for name in metrics), "the job never ran on the member that joined"
    assert _committed(out) == _windowed_reference()


def test_suspend_resume_restart_and_export_keep_the_state(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    with local_cluster(3, FAST_FAILURE) as client:
        job = client.new_job(_stateful_map(str(out)), _config(ProcessingGuarantee.EXACTLY_ONCE))
        _wait_for_snapshot(client, job)
        job.suspend()
        assert job.status is jetlet.JobStatus.SUSPENDED
        assert job.suspension_cause == "suspended by the user"
        exported = job.export_snapshot("while-suspended")
        assert exported["name"] == "while-suspended" and sum(exported["counts"].values()) > 0
        job.resume()
        _wait_for_snapshot(client, job, job.snapshot["count"] + 1)
        job.restart()
        job.join(120)
        names = [s["name"] for s in client.list_snapshots()]
        assert names == ["while-suspended"]
        client.delete_snapshot("while-suspended")
        assert client.list_snapshots() == []
    _check_stateful(_committed(out))


def _upgraded_stateful_map(out: str) -> Pipeline:
    """New code for the same job: the stateful stage keeps its name, the output gains a marker."""
    p = Pipeline()
    (
        p.read_from(Sources.test_stream(RATE, _event, COUNT))
        .without_timestamps()
        .grouping_key(lambda event: event[0])
        .map_stateful(lambda: [0], _running_count)
        .map(lambda triple: (*triple, "v2"))
        .write_to(Sinks.files(out))
    )
    return p


def test_a_job_upgraded_to_new_code_starts_from_the_exported_state(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    with local_cluster(3, FAST_FAILURE) as client:
        job = client.new_job(_stateful_map(str(out)), _config(ProcessingGuarantee.EXACTLY_ONCE))
        _wait_for_snapshot(client, job)
        job.cancel_and_export_snapshot("upgrade")  # returns once exported, maybe before the end (as Jet)
        wait_until(lambda: job.status is jetlet.JobStatus.FAILED, "the cancelled job to end", 30)
        upgraded = client.new_job(
            _upgraded_stateful_map(str(out)),
            _config(ProcessingGuarantee.EXACTLY_ONCE, initial_snapshot_name="upgrade"),
        )
        upgraded.join(120)
    found = _committed(out)
    old = collections.Counter({item: n for item, n in found.items() if len(item) == 3})
    new = collections.Counter({item[:3]: n for item, n in found.items() if len(item) == 4})
    assert old and new, "both versions of the code produced output"
    _check_stateful(old + new)  # the new code went on counting from the old code's state


def test_a_snapshot_of_another_job_is_refused_naming_the_stage(tmp_path: pathlib.Path) -> None:
    with local_cluster(2, FAST_FAILURE) as client:
        job = client.new_job(_stateful_map(str(tmp_path / "a")), _config(ProcessingGuarantee.EXACTLY_ONCE))
        _wait_for_snapshot(client, job)
        job.cancel_and_export_snapshot("stateful")
        other = client.new_job(
            _windowed_count(str(tmp_path / "b")),
            _config(ProcessingGuarantee.EXACTLY_ONCE, initial_snapshot_name="stateful"),
        )
        with pytest.raises(jetlet.JobFailedError, match="holds state of stage 'map-stateful-keyed'"):
            other.join(60)
        with pytest.raises(RequestRefusedError, match="no snapshot named 'missing'"):
            client.new_job(
                _windowed_count(str(tmp_path / "c")),
                _config(ProcessingGuarantee.EXACTLY_ONCE, initial_snapshot_name="missing"),
            )


def test_with_a_snapshot_directory_a_job_survives_the_whole_cluster_and_damage_is_refused(
    tmp_path: pathlib.Path,
) -> None:
    import shutil

    snapshots = tmp_path / "snapshots"
    out = tmp_path / "out"
    args = [*FAST_FAILURE, "--snapshot-directory", str(snapshots), "--scale-up-delay-millis", "300"]
    with local_cluster(2, args) as client:
        job = client.new_job(_stateful_map(str(out)), _config(ProcessingGuarantee.EXACTLY_ONCE))
        _wait_for_snapshot(client, job, 2)
        job_id = job.id
        linked = snapshots / f"job-{job_id}"  # the job's complete offloaded snapshot, with keyed state
        wait_until(
            lambda: (linked / "job.jlmap").exists() and any("data" in p.name for p in linked.glob("*.jlmap")),
            "an offloaded snapshot holding keyed state",
            30,
        )
        for pid in client.pids:  # the whole cluster is lost
            os.kill(pid, signal.SIGKILL)
    damaged = tmp_path / "damaged"
    shutil.copytree(snapshots, damaged, symlinks=True)
    # the damage goes into the snapshot the link names (a write cut short by the kill is a leftover)
    data_file = next(p for p in (damaged / f"job-{job_id}").glob("*.jlmap") if "data" in p.name)
    content = bytearray(data_file.read_bytes())
    content[len(content) // 2] ^= 0x40
    data_file.write_bytes(bytes(content))
    unreadable = damaged / "job-999"  # a job whose own record is cut short
    shutil.copytree(data_file.parent, unreadable)
    record_file = next(
        p for p in unreadable.glob("*.jlmap") if "data" not in p.name and "broadcast" not in p.name
    )
    record_file.write_bytes(record_file.read_bytes()[:-5])
    # a new cluster with the same directory resumes the job from its last snapshot, exactly once
    with local_cluster(2, args) as client:
        wait_until(lambda: client.get_job(job_id) is not None, "the job to be resumed from the directory", 30)
        resumed = client.get_job(job_id)
        assert resumed is not None
        resumed.join(120)
        assert resumed.status is jetlet.JobStatus.COMPLETED
    _check_stateful(_committed(out))
    assert not list(snapshots.glob("job-*")), "a completed job's offloaded snapshot was kept"
    # a cluster whose copy is damaged does not run the job from it, and says which file is wrong
    damaged_args = [*FAST_FAILURE, "--snapshot-directory", str(damaged)]
    with local_cluster(1, damaged_args) as client:
        wait_until(lambda: client.get_job(job_id) is not None, "the damaged job's record", 30)
        record = client.request("GET", f"/jobs/{job_id}")
        assert record["status"] == "FAILED"
        assert "cannot be restored" in record["failure"] and data_file.name in record["failure"]
        # nor is a job whose record cannot be read lost without a word: it is listed, failed, by folder
        wait_until(lambda: client.get_job(999) is not None, "the unreadable job's record", 30)
        lost = client.request("GET", "/jobs/999")
        assert lost["status"] == "FAILED" and "job-999" in lost["failure"]


def _fail_while_flagged(flag: str) -> Callable[[list[int], int, tuple[int, int]], tuple[int, int, int]]:
    def count(state: list[int], key: int, event: tuple[int, int]) -> tuple[int, int, int]:
        if os.path.exists(flag):
            raise RuntimeError(f"the flag {flag} is set")
        return _running_count(state, key, event)

    return count


def test_suspend_on_failure_keeps_the_state_and_the_cause_until_resumed(tmp_path: pathlib.Path) -> None:
    out, flag = tmp_path / "out", tmp_path / "flag"
    p = Pipeline()
    (
        p.read_from(Sources.test_stream(RATE, _event, COUNT))
        .without_timestamps()
        .grouping_key(lambda event: event[0])
        .map_stateful(lambda: [0], _fail_while_flagged(str(flag)))
        .write_to(Sinks.files(str(out)))
    )
    with local_cluster(2, FAST_FAILURE) as client:
        job = client.new_job(p, _config(ProcessingGuarantee.EXACTLY_ONCE, suspend_on_failure=True))
        _wait_for_snapshot(client, job)
        flag.write_text("fail")
        wait_until(lambda: job.status is jetlet.JobStatus.SUSPENDED, "the failing job to be suspended", 30)
        assert f"the flag {flag} is set" in job.suspension_cause
        flag.unlink()  # the cause is fixed
        job.resume()
        job.join(120)
    _check_stateful(_committed(out))


def test_dropping_state_of_a_missing_stage_must_be_allowed(tmp_path: pathlib.Path) -> None:
    with local_cluster(2, FAST_FAILURE) as client:
        job = client.new_job(_stateful_map(str(tmp_path / "a")), _config(ProcessingGuarantee.EXACTLY_ONCE))
        _wait_for_snapshot(client, job)
        job.cancel_and_export_snapshot("old-state")
        allowed = client.new_job(
            _windowed_count(str(tmp_path / "b")),
            _config(
                ProcessingGuarantee.EXACTLY_ONCE, initial_snapshot_name="old-state", allow_dropping_state=True
            ),
        )
        allowed.join(120)
        assert allowed.status is jetlet.JobStatus.COMPLETED


def test_an_idempotent_map_sink_keeps_exact_results_in_the_grid_through_a_members_death() -> None:
    p = Pipeline()
    (
        p.read_from(Sources.test_stream(RATE, _event, COUNT))
        .with_timestamps(lambda event: event[1], 0)
        .grouping_key(lambda event: event[0])
        .window(WindowDefinition.tumbling(WINDOW_MS))
        .aggregate(AggregateOperations.counting())
        .write_to(Sinks.map("windows", lambda result: (result.key, result.end), lambda result: result.result))
    )
    rng = random.Random(29)
    with local_cluster(3, FAST_FAILURE) as client:
        job = client.new_job(p, _config(ProcessingGuarantee.EXACTLY_ONCE))
        _wait_for_snapshot(client, job)
        time.sleep(rng.uniform(0.2, 1.5))
        os.kill(client.pids[2], signal.SIGKILL)
        job.join(120)
        found = client.get_map("windows")
    expected = collections.Counter((seq % KEYS, (seq // WINDOW_MS + 1) * WINDOW_MS) for seq in range(COUNT))
    assert found == dict(expected)
