"""The Hazelcast Jet peer (``bench/nexmark_peers/hazelcast_runner.py``): its commands, its reading of
the Java runner's report, a failed build, and one real build and run of Q1 checked against the
plain-Python reference.

The real run (marker ``peers``: ``make test-peers``, not ``make test``) needs Java 17 and Maven with
Maven Central (or a filled ``~/.m2``): without them it fails, it does not skip. It builds the jar
only when the sources are newer than it (the first build on an empty ``~/.m2`` downloads Hazelcast
and Maven's plugins: minutes, once).
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

peers: ModuleType = importlib.import_module("bench.nexmark_peers")
runner: ModuleType = importlib.import_module("bench.nexmark_peers.hazelcast_runner")
events_file: ModuleType = importlib.import_module("bench.nexmark_peers.events_file")


def _report(rows: int) -> dict[str, Any]:
    return {
        "peer": "hazelcast2",
        "query": "q2",
        "events": 5000,
        "members": 2,
        "seconds": 0.5,
        "events_per_s": 10000.0,
        "startup_s": 4.25,
        "cpu_s": 0.75,
        "warmup_events": 5000,
        "warmup_s": 0.625,
        "emitted": rows,
        "results": rows,
        "versions": {"hazelcast": "5.6.0", "java": "17.0.15+6"},
    }


def test_java_command_names_the_query_members_and_files(tmp_path: Path) -> None:
    # when the command of a two-member Q5 run is built
    command = runner.java_command("q5", 5000, 2, tmp_path / "r.json", tmp_path / "rows", 2000, 500, 700)
    # then it runs the runner's main class from the jar and its libraries, with every setting
    assert command[0] == "java"
    classpath = command[command.index("-cp") + 1]
    assert classpath.split(":") == [str(runner.JAR), str(runner.LIB_DIR / "*")]
    assert command[command.index("-cp") + 2] == runner.MAIN_CLASS
    arguments = command[command.index(runner.MAIN_CLASS) + 1 :]
    assert dict(zip(arguments[::2], arguments[1::2], strict=True)) == {
        "--query": "q5",
        "--events": "5000",
        "--members": "2",
        "--window-ms": "2000",
        "--slide-ms": "500",
        "--warmup-events": "700",
        "--out-json": str(tmp_path / "r.json"),
        "--rows-file": str(tmp_path / "rows"),
    }


def test_maven_command_is_quiet_and_offline_only_when_asked() -> None:
    assert runner.maven_command(True) == ["mvn", "-q", "-B", "-o", "package"]
    assert runner.maven_command(False) == ["mvn", "-q", "-B", "package"]


def test_peer_run_digests_the_rows_and_notes_the_versions() -> None:
    # given a report and its rows
    rows = [[1230, 700], [1107, 500]]
    # when they are read into a PeerRun
    run = runner.peer_run("hazelcast2", _report(2), rows, "map/filter")
    # then the digest is the canonical one and the note has the versions and the member count
    assert (run.results, run.digest) == peers.digest([(1107, 500), (1230, 700)])
    assert (run.peer, run.query, run.events, run.seconds, run.events_per_s) == (
        "hazelcast2",
        "q2",
        5000,
        0.5,
        10000.0,
    )
    assert run.expressible
    assert "Hazelcast 5.6.0 on Java 17.0.15+6, 2 member(s)" in run.note
    assert "start-up 4.2 s" in run.note
    assert "warm-up job of 5,000 events (0.6 s)" in run.note
    assert "150.00 CPU µs/event" in run.note


def test_peer_run_refuses_rows_that_disagree_with_the_report() -> None:
    with pytest.raises(ValueError, match="3 rows"):
        runner.peer_run("hazelcast", _report(3), [[1, 2]], "map/filter")


def test_read_rows_reads_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('[1,"a\\\\b",null]\n[2,1.5,"x"]\n', encoding="utf-8")
    assert runner.read_rows(path) == [[1, "a\\b", None], [2, 1.5, "x"]]


def test_a_failed_build_is_a_run_that_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a stale jar and a Maven that fails both offline and online
    monkeypatch.setattr(runner, "jar_is_fresh", lambda: False)
    failing = ["sh", "-c", "echo 'Could not resolve com.hazelcast:hazelcast' >&2; exit 1"]
    monkeypatch.setattr(runner, "maven_command", lambda offline: failing)
    # when the peer is run
    run = peers.run_peer("hazelcast", "q1", 1000)
    # then nothing ran, and the note carries Maven's error
    assert (run.expressible, run.seconds, run.digest) == (False, None, None)
    assert run.note.startswith("not built: ")
    assert run.note.count("failed (exit 1):\nCould not resolve com.hazelcast:hazelcast") == 2


def test_only_the_beam_generator_is_ported() -> None:
    run = peers.run_peer("hazelcast", "q1", 1000, generator="fast")
    assert (run.expressible, run.seconds) == (False, None)
    assert "only Beam's generator" in run.note


@pytest.mark.parametrize("peer", ["hazelcast", "hazelcast2"])
@pytest.mark.parametrize("query", ["q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q13"])
def test_hazelcast_expresses_every_query(peer: str, query: str) -> None:
    able, how = peers.expressible(peer, query)
    assert able
    assert how


@pytest.mark.peers
def test_real_q1_run_matches_the_reference(tmp_path: Path) -> None:
    # given the jar, built unless fresh (a build failure fails the test)
    runner.build()
    # when Q1 runs on one member over the first 3,000 events of Beam's generator
    run = runner.run("hazelcast", "q1", 3000, "map/filter", timeout_s=180)
    # then its rows are the reference's, so the Java generator reproduces Beam's events
    reference = peers.reference_digest("q1", events_file.ensure_events_file("beam", 3000, tmp_path))
    assert run.expressible, run.note
    assert (run.results, run.digest) == reference
    assert run.seconds is not None and run.seconds > 0
    assert json.dumps(run.note).count("Hazelcast 5.") == 1


def test_runtime_line_names_the_jvm_and_the_pinned_hazelcast() -> None:
    # when the header line of the Java peers is asked for
    line = runner.runtime_line()
    # then it has the JVM's version line and the POM's Hazelcast 5.x
    assert runner.hazelcast_version().startswith("5.")
    pinned = runner.hazelcast_version()
    assert line.endswith(f"Hazelcast {pinned} (Maven project bench/nexmark_peers/hazelcast)")
    assert "version" in line.split(";")[0]
