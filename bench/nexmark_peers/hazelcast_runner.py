"""The Hazelcast Jet peer: build the Maven project in ``hazelcast/``, run one query in 1 or 2 JVMs.

Theory of operation. ``bench/nexmark_peers/hazelcast`` is a small Maven project pinning
``com.hazelcast:hazelcast`` 5.x from Maven Central; its runner (``NexmarkPeer``) starts an embedded
Jet member (for two members it starts a second JVM that joins by TCP-IP on 127.0.0.1, multicast
off), reports that start-up apart, and times one job from submission to completion.

Events: the Java side *generates* them, with Beam's generator ported to Java (``Generator.java``)
inside a Core API source (``GeneratorP``), one slice of the event numbers per parallel processor,
instead of reading the neutral JSON-lines events file. That is what Jet's own NEXMark benchmark
does and the fair way to measure the engine: parsing JSON is not the engine's work, and jetlet's
own runs generate their events in a source too. The generator is a pure function of the event
number seeded with ``java.util.Random``, which jetlet's Python generator reproduces bit for bit, so
the port's events are Beam's; the digest check (the test that runs Q1 against
:func:`bench.nexmark_peers.reference_rows`) is what proves the port. Only Beam's generator with its
defaults is ported, so a run asked for another generator is reported as not run, with the reason.
Its cost is part of the timed job (as jetlet's source is part of jetlet's runs): about 1.1 µs per
event in a warm loop on the 2-core VM (2.5-6 µs while the JIT warms up), padding strings and a
``Random`` per event included; jetlet's harness rounds use the fast generator instead, which is not
ported (its tables come from Python's Mersenne Twister), so the two do not pay the same generator.

Warm-up: the runner first runs the query once, untimed, over the first :data:`WARMUP_EVENTS`
events (or all, if fewer), so the timed job runs on a warm JIT as jetlet's rounds run after a
warm-up: measured on Q2 here, a cold JVM spent 6.3 CPU µs/event over 500,000 events and 1.9 over
5,000,000.

Building: the jar is rebuilt only when a source or the POM is newer than it; ``mvn -q -o package``
(offline, from ``~/.m2``) first, then ``mvn -q package`` if the offline build fails (an empty
cache: it downloads Hazelcast and the plugins). A failed build becomes a :class:`PeerRun` with
``expressible=False`` and Maven's output as the note, as a failed pip install does for the other
peers. The Java runner writes its report (the :class:`PeerRun` fields, start-up, versions) and
the canonical rows (JSON lines, already reduced by the canonical rules: open windows dropped, last
value per key); this module digests the rows with :func:`bench.nexmark_peers.digest`.

Peers: ``hazelcast`` runs one member, ``hazelcast2`` two (:data:`bench.nexmark_peers.HAZELCAST_PEERS`).
Standard library only, like the rest of the package.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from . import HAZELCAST_PEERS, REPO_ROOT, SLIDE_MS, WINDOW_MS, PeerRun, digest

PROJECT_DIR = Path(__file__).resolve().parent / "hazelcast"
"""The Maven project (its ``target/`` is ignored by git)."""
JAR = PROJECT_DIR / "target" / "hazelcast-nexmark.jar"
LIB_DIR = PROJECT_DIR / "target" / "lib"
MAIN_CLASS = "jetlet.nexmark.hazelcast.NexmarkPeer"
BUILD_TIMEOUT_S = 1800.0
WARMUP_EVENTS = 500_000
"""At most this many events run once, untimed, before the timed job (fewer if the run has fewer)."""
JVM_OPTIONS: tuple[str, ...] = (
    "-Xms1g",
    "-Xmx2g",
    # the accesses Hazelcast asks for on Java 9+ ("to get the best performance results")
    "--add-modules",
    "java.se",
    "--add-exports",
    "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.management/sun.management=ALL-UNNAMED",
    "--add-opens",
    "jdk.management/com.sun.management.internal=ALL-UNNAMED",
)


class PeerBuildError(RuntimeError):
    """The Maven build failed; the message holds Maven's output."""


def _sources() -> list[Path]:
    return [PROJECT_DIR / "pom.xml", *sorted((PROJECT_DIR / "src").rglob("*.java"))]


def jar_is_fresh() -> bool:
    """Whether the jar and its libraries exist and are newer than the POM and every source."""
    if not JAR.exists() or not any(LIB_DIR.glob("hazelcast-*.jar")):
        return False
    built = JAR.stat().st_mtime
    return all(source.stat().st_mtime <= built for source in _sources())


def maven_command(offline: bool) -> list[str]:
    """``mvn -q -B [-o] package`` (the tests are none: the project has only the runner)."""
    return ["mvn", "-q", "-B", *(["-o"] if offline else []), "package"]


def build(log: bool = True) -> None:
    """Build the jar unless it is fresh: offline from ``~/.m2`` first, else from Maven Central."""
    if jar_is_fresh():
        return
    failures = []
    for offline in (True, False):
        if log:
            print(f"[peers] {' '.join(maven_command(offline))} in {PROJECT_DIR}", flush=True)
        try:
            done = subprocess.run(
                maven_command(offline),
                cwd=PROJECT_DIR,
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            failures.append(f"{' '.join(maven_command(offline))}: {error}")
            continue
        if done.returncode == 0 and jar_is_fresh():
            return
        tail = (done.stdout + done.stderr).strip()[-3000:]
        failures.append(f"{' '.join(maven_command(offline))} failed (exit {done.returncode}):\n{tail}")
    raise PeerBuildError("\n".join(failures))


def java_command(
    query: str,
    events: int,
    members: int,
    out_json: Path,
    rows_file: Path,
    window_ms: int = WINDOW_MS,
    slide_ms: int = SLIDE_MS,
    warmup_events: int = 0,
) -> list[str]:
    """The ``java`` command line that runs ``query`` over ``events`` events on ``members`` members
    (after an untimed run over ``warmup_events``)."""
    classpath = os.pathsep.join([str(JAR), str(LIB_DIR / "*")])
    return [
        "java",
        *JVM_OPTIONS,
        "-cp",
        classpath,
        MAIN_CLASS,
        "--query",
        query,
        "--events",
        str(events),
        "--members",
        str(members),
        "--window-ms",
        str(window_ms),
        "--slide-ms",
        str(slide_ms),
        "--warmup-events",
        str(warmup_events),
        "--out-json",
        str(out_json),
        "--rows-file",
        str(rows_file),
    ]


def hazelcast_version() -> str:
    """The Hazelcast version the POM pins."""
    pom = (PROJECT_DIR / "pom.xml").read_text(encoding="utf-8")
    found = re.search(r"<hazelcast\.version>([^<]+)</hazelcast\.version>", pom)
    if found is None:
        raise ValueError(f"no <hazelcast.version> in {PROJECT_DIR / 'pom.xml'}")
    return found.group(1)


def runtime_line() -> str:
    """The JVM (``java -version``'s first line) and the pinned Hazelcast, for the report's header."""
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60, check=False)
        java = (done.stderr + done.stdout).strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError) as error:
        java = f"java unknown ({error!r})"
    return f"{java}; Hazelcast {hazelcast_version()} (Maven project bench/nexmark_peers/hazelcast)"


def read_rows(rows_file: Path) -> list[list[Any]]:
    """The canonical rows the runner wrote, one JSON array a line."""
    with rows_file.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def peer_run(peer: str, report: dict[str, Any], rows: list[list[Any]], how: str) -> PeerRun:
    """The :class:`PeerRun` of a runner's report and rows (digested here)."""
    count, rows_digest = digest(rows)
    if count != report["results"]:
        raise ValueError(f"the report says {report['results']} rows, the rows file has {count}")
    versions = report["versions"]
    note = (
        f"{how}; Hazelcast {versions['hazelcast']} on Java {versions['java']}, {report['members']} "
        f"member(s); start-up {report['startup_s']:.1f} s (JVMs + members), then an untimed warm-up job "
        f"of {report['warmup_events']:,} events ({report['warmup_s']:.1f} s); "
        f"{report['cpu_s'] * 1e6 / max(report['events'], 1):.2f} CPU µs/event (the JVMs, during the timed "
        "job); events generated in a Jet source (Beam's generator in Java); sink: IList"
    )
    return PeerRun(
        peer=peer,
        query=str(report["query"]),
        events=int(report["events"]),
        seconds=float(report["seconds"]),
        events_per_s=report["events_per_s"],
        expressible=True,
        note=note,
        results=count,
        digest=rows_digest,
    )


def run(
    peer: str,
    query: str,
    events: int,
    how: str,
    timeout_s: float = 600.0,
    window_ms: int = WINDOW_MS,
    slide_ms: int = SLIDE_MS,
) -> PeerRun:
    """Build if needed, then run ``query`` on ``peer`` (1 or 2 members) over ``events`` events."""
    members = HAZELCAST_PEERS[peer]
    try:
        build()
    except PeerBuildError as error:
        return PeerRun(peer, query, events, None, None, False, f"not built: {error}")
    with tempfile.TemporaryDirectory(prefix="nexmark-hazelcast-") as scratch:
        out_json, rows_file = Path(scratch) / "report.json", Path(scratch) / "rows.jsonl"
        warmup = min(events, WARMUP_EVENTS)
        command = java_command(query, events, members, out_json, rows_file, window_ms, slide_ms, warmup)
        try:
            done = subprocess.run(
                command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except subprocess.TimeoutExpired:
            return PeerRun(peer, query, events, None, None, True, f"{how}; timed out after {timeout_s:.0f} s")
        if done.returncode != 0 or not out_json.exists():
            tail = (done.stdout + done.stderr).strip()[-2000:]
            return PeerRun(peer, query, events, None, None, True, f"{how}; runner failed: {tail}")
        report = json.loads(out_json.read_text(encoding="utf-8"))
        return peer_run(peer, report, read_rows(rows_file), how)
