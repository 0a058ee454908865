"""The members' logs (issue 19): JSON lines naming the member and the job, a failure's traceback once.

Given a 3-member local cluster started with ``--log-format json``, when jobs fail (in a
user function on every member, or while every member builds the execution) or take
snapshots, then every line of every member's log parses alone as JSON with the member's
name, the lines about a job carry its id, and the user's traceback appears once across
all the logs, in the coordinator's line saying the job failed.
"""

from __future__ import annotations

import io
import json
import logging
import os
import pathlib
import re
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from jetlet import Pipeline, Sinks, Sources, errors, records
from jetlet._cluster import logs, settings
from jetlet.config import JobConfig, ProcessingGuarantee
from jetlet.local_cluster import LocalCluster
from jetlet.service import ServiceFactories
from jetlet.testing import wait_until

pytestmark = pytest.mark.timeout(120)


def _always_fails(item: int) -> int:
    raise ValueError(f"user code refuses item {item}")


def _no_service(context: Any) -> Any:
    raise RuntimeError("the user's service cannot open")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(3, ["--log-format", "json"], log_dir=tmp_path_factory.mktemp("member-logs"))
    local.start()
    try:
        yield local
    finally:
        local.stop()


def _lines(cluster: LocalCluster) -> dict[str, list[dict[str, Any]]]:
    """Every member's log, each whole line parsed alone (a line that does not parse fails the test).

    A member may be writing its last line as the file is read: only lines with their newline count.
    """
    return {
        name: [json.loads(line) for line in _whole_lines(path.read_text())]
        for name, path in zip(cluster.names, cluster.log_paths, strict=True)
    }


def _whole_lines(text: str) -> list[str]:
    return text[: text.rfind("\n") + 1].splitlines()


def _about(cluster: LocalCluster, job_id: str, words: str) -> list[dict[str, Any]]:
    return [
        line
        for lines in _lines(cluster).values()
        for line in lines
        if line["job"] == job_id and words in line["message"]
    ]


def _tracebacks(cluster: LocalCluster) -> list[dict[str, Any]]:
    """Every line of every member's log that holds a traceback."""
    return [
        line
        for lines in _lines(cluster).values()
        for line in lines
        if "Traceback (most recent call last)" in f"{line['message']} {line['exception']}"
    ]


def _new(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in after if line not in before]


def _fails(cluster: LocalCluster, pipeline: Pipeline) -> str:
    assert cluster.client is not None
    job = cluster.client.new_job(pipeline)
    with pytest.raises(errors.JobFailedError):
        job.join(60)
    wait_until(lambda: _about(cluster, job.id_string, "FAILED"), "the failure in the log", 30)
    return job.id_string


def test_every_line_is_json_with_its_member(cluster: LocalCluster) -> None:
    lines = _lines(cluster)
    assert all(lines.values())
    for name, parsed in lines.items():
        for line in parsed:
            assert set(line) == {
                "time",
                "level",
                "logger",
                "message",
                "member",
                "job",
                "job_name",
                "exception",
            }
            assert line["member"] == name and line["time"].endswith("Z")
    joined = [line for line in lines["m1"] if "joined; Members" in line["message"]]
    assert sorted(line["message"].split(";")[0] for line in joined) == [
        "member m2 joined",
        "member m3 joined",
    ]


def test_a_user_function_failing_on_every_member_logs_its_traceback_once(cluster: LocalCluster) -> None:
    p = Pipeline()
    p.read_from(Sources.items(*range(300))).rebalance().map(_always_fails).write_to(Sinks.list("never"))
    before = _tracebacks(cluster)
    job_id = _fails(cluster, p)
    (failed,) = _about(cluster, job_id, "FAILED")
    assert failed["member"] == "m1" and failed["level"] == "ERROR" and failed["job_name"] == job_id
    assert "ValueError: user code refuses item" in failed["message"]
    assert _new(before, _tracebacks(cluster)) == [failed]
    trace = failed["exception"]
    assert trace.count("Traceback (most recent call last)") == 1
    assert "in _always_fails" in trace and "jetlet/" not in trace
    states = [line["message"].split(" ", 2)[2] for line in _lines(cluster)["m1"] if line["job"] == job_id]
    assert states[0] == "submitted, starting" and states[1].startswith("RUNNING")


def test_a_failure_while_every_member_builds_the_execution_is_said_once(cluster: LocalCluster) -> None:
    p = Pipeline()
    factory = ServiceFactories.shared_service(_no_service)
    p.read_from(Sources.items(1, 2, 3)).map_using_service(factory, lambda s, x: x).write_to(Sinks.list("n"))
    before = _tracebacks(cluster)
    job_id = _fails(cluster, p)
    (failed,) = _about(cluster, job_id, "FAILED")
    assert failed["message"].endswith(
        "the job could not start: members m1, m2, m3: RuntimeError: the user's service cannot open"
    )
    assert _new(before, _tracebacks(cluster)) == [failed]
    assert failed["exception"].count("Traceback (most recent call last)") == 1
    assert "in _no_service" in failed["exception"] and "jetlet/" not in failed["exception"]


def test_a_completed_snapshot_is_one_line_with_its_size_and_duration(cluster: LocalCluster) -> None:
    assert cluster.client is not None
    p = Pipeline()
    p.read_from(
        Sources.stream_from_generator(lambda context: iter(range(10**9)))
    ).without_timestamps().write_to(Sinks.noop())
    config = JobConfig(processing_guarantee=ProcessingGuarantee.AT_LEAST_ONCE, snapshot_interval_millis=200)
    job = cluster.client.new_job(p, config)
    try:
        wait_until(lambda: _about(cluster, job.id_string, "snapshot 1 completed"), "a snapshot's line", 60)
    finally:
        job.cancel()
    (line,) = _about(cluster, job.id_string, "snapshot 1 completed")
    assert line["member"] == "m1" and line["logger"] == "jetlet._cluster.snapshot_coordinator"
    # the same figures as the job-event feed's
    event = next(
        e
        for e in cluster.client.events(timeout=30)
        if e.kind is records.EventKind.SNAPSHOT_COMPLETED
        and e.job_id == job.id
        and e.details["snapshot_id"] == 1
    )
    figures = (
        f"{event.details['bytes']} bytes, {event.details['keys']} keys, in {event.details['duration_ms']} ms"
        f" (the slowest member's store {event.details['store_ms']} ms)"
    )
    assert 0 <= event.details["store_ms"] <= event.details["duration_ms"]
    assert line["message"] == f"job {job.id_string}: snapshot 1 completed: {figures}"


def _record(message: str, **extra: Any) -> logging.LogRecord:
    record = logging.LogRecord("jetlet.test", logging.ERROR, __file__, 1, message, (), None)
    record.__dict__.update(extra)
    logs.MemberFilter("m2").filter(record)
    return record


def test_the_text_format_names_the_member_and_puts_the_users_traceback_below() -> None:
    record = _record(
        "job wc (0a1b) FAILED: boom", **logs.job("0a1b", "wc", "Traceback ...\nValueError: boom")
    )
    text = logs.TextFormatter().format(record)
    first, *rest = text.splitlines()
    assert first.endswith(" ERROR [m2] jetlet.test: job wc (0a1b) FAILED: boom")
    assert rest == ["Traceback ...", "ValueError: boom"]
    assert logs.label("wc", "0a1b") == "job wc (0a1b)" and logs.label("0a1b", "0a1b") == "job 0a1b"


def test_the_json_format_carries_an_exception_and_stays_one_line() -> None:
    try:
        raise KeyError("missing")
    except KeyError:
        record = logging.LogRecord("jetlet.test", logging.ERROR, __file__, 1, "a\nb", (), None)
        record.exc_info = sys.exc_info()
    logs.MemberFilter("m3").filter(record)
    text = logs.JsonFormatter().format(record)
    assert "\n" not in text
    line = json.loads(text)
    assert (line["message"], line["member"], line["job"]) == ("a\nb", "m3", None)
    assert line["exception"].startswith("Traceback") and "KeyError: 'missing'" in line["exception"]


def test_configure_replaces_the_root_handlers_and_names_the_member_later(tmp_path: pathlib.Path) -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, threading.excepthook)
    try:
        logs.configure(logging.INFO, True)
        (handler,) = root.handlers
        assert isinstance(handler, logging.StreamHandler)
        out = io.StringIO()
        handler.setStream(out)
        logs.name_member("127.0.0.1:5701")
        logging.getLogger("jetlet.x").info("hello", extra=logs.job("0a1b", "wc"))
        line = json.loads(out.getvalue())
        assert (line["member"], line["job"], line["job_name"], line["message"]) == (
            "127.0.0.1:5701",
            "0a1b",
            "wc",
            "hello",
        )
        # a thread's uncaught exception is a JSON line too, not raw text on stderr
        out.truncate(0)
        out.seek(0)
        crashing = threading.Thread(target=_always_fails, args=(7,), name="crashing")
        crashing.start()
        crashing.join()
        line = json.loads(out.getvalue())
        assert line["message"] == "uncaught exception in thread crashing"
        assert line["exception"].endswith("ValueError: user code refuses item 7")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        threading.excepthook = saved[2]


def test_the_log_format_is_a_member_setting_checked_before_the_start() -> None:
    assert settings.load({}, environ={}).log_format == "text"
    assert settings.load({"log_format": "json"}, environ={}).log_format == "json"
    assert settings.load({}, environ={"JETLET_LOG_FORMAT": "json"}).log_format == "json"
    with pytest.raises(settings.SettingsError, match="'log_format' must be 'text' or 'json', got 'xml'"):
        settings.load({"log_format": "xml"}, environ={})


def test_a_lost_member_logs_recovery_started_and_finished(tmp_path: pathlib.Path) -> None:
    # given a 3-member cluster (JSON logs, quick failure detection) running a job that takes snapshots
    fast = ["--heartbeat-interval-millis", "100", "--failure-timeout-millis", "1000"]
    local = LocalCluster(3, ["--log-format", "json", *fast], log_dir=tmp_path)
    client = local.start()
    try:
        p = Pipeline()
        p.read_from(Sources.test_stream(2000, lambda n: n)).without_timestamps().write_to(Sinks.noop())
        config = JobConfig(
            processing_guarantee=ProcessingGuarantee.AT_LEAST_ONCE, snapshot_interval_millis=200
        )
        job = client.new_job(p, config)
        wait_until(lambda: _about(local, job.id_string, "snapshot 2 completed"), "two snapshots", 60)
        # when a member is killed
        os.kill(client.pids[2], signal.SIGKILL)
        # then the coordinator logs the recovery's start (from a snapshot) and its end, naming the job
        wait_until(lambda: _about(local, job.id_string, "recovered"), "the recovery's end in the log", 60)
        (started,) = _about(local, job.id_string, "recovering")
        (finished,) = _about(local, job.id_string, "recovered")
        assert started["level"] == "WARNING" and started["member"] == finished["member"] == "m1"
        assert "member m3 left the cluster while the job ran" in started["message"]
        assert re.search(r"restarting it on the members left from snapshot \d+$", started["message"])
        assert re.search(
            r"recovered: running again on m1, m2 from snapshot \d+, [\d.]+ s after", finished["message"]
        )
        assert started["time"] <= finished["time"]
        job.cancel()
    finally:
        local.stop()
