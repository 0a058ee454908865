"""The cluster commands of the ``jetlet`` CLI against a real 2-member local cluster.

Commands run in-process through ``cli.main`` (output captured), and some end
to end as subprocesses, as a user's script would run them. Exit codes: 0 ok,
1 failed, 2 bad usage or input, 3 unreachable. One cluster serves the whole
module; an autouse fixture checks that no test leaves a child process behind
(the root conftest checks jetlet threads).
"""

from __future__ import annotations

import collections
import contextlib
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from jetlet import cli
from jetlet.local_cluster import local_cluster
from jetlet.testing import wait_until

ENDLESS_JOB = """
    import itertools
    from jetlet import Pipeline, Sinks, Sources

    pipeline = Pipeline()
    pipeline.read_from(
        Sources.stream_from_generator(lambda context: itertools.count())
    ).without_timestamps().write_to(Sinks.noop())
"""

WORDS_JOB = """
    import sys
    from jetlet import AggregateOperations, Pipeline, Sinks, Sources

    WORDS, COUNTS = sys.argv[1].split(","), sys.argv[2]

    def build_pipeline():
        p = Pipeline()
        p.read_from(Sources.from_iterable(WORDS)).grouping_key(lambda w: w).aggregate(
            AggregateOperations.counting()
        ).write_to(Sinks.map(COUNTS))
        return p
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with local_cluster(2) as client:
        yield client


@pytest.fixture(autouse=True)
def no_leaked_processes(cluster: Any) -> Iterator[None]:
    """Given the child processes before a test (the cluster's members, other fixtures' servers), then the
    test leaves no new one running."""
    before = {p.pid for p in psutil.Process().children(recursive=True)} | set(cluster.pids)
    yield
    others = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    _, alive = psutil.wait_procs(others, timeout=10)
    assert not alive, f"the test left processes running: {alive}"


def flags(cluster: Any) -> list[str]:
    return ["-a", ",".join(cluster.addresses), f"--token={cluster.token}"]


def write(tmp_path: Path, name: str, code: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(code), encoding="utf-8")
    return str(path)


def wait_for_status(cluster: Any, name: str, status: str) -> None:
    wait_until(lambda: cluster.get_job(name).record_status() == status, f"job {name} is {status}", 30)


def listed(out: str) -> dict[str, str]:
    """list-jobs output as name -> status (header checked)."""
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "STATUS", "SUBMISSION", "TIME", "NAME"]
    return {line.split()[-1]: line.split()[1] for line in lines[1:]}


def test_submit_and_wait_runs_the_files_pipeline_on_the_cluster(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a file that builds a pipeline from its arguments
    job_file = write(tmp_path, "words.py", WORDS_JOB)
    words = "a,b,a,c,a,b"
    # when submitted with --wait
    status = cli.main(["submit", *flags(cluster), "-n", "cli-words", "--wait", job_file, words, "cli-counts"])
    # then it completed and computed the counts
    assert status == 0
    out = capsys.readouterr().out
    assert "submitted job cli-words (id " in out and "completed" in out
    assert cluster.get_map("cli-counts") == collections.Counter(words.split(","))
    # and list-jobs --all shows it, completed, while list-jobs (active only) does not
    assert cli.main(["list-jobs", *flags(cluster), "--all"]) == 0
    assert listed(capsys.readouterr().out)["cli-words"] == "COMPLETED"
    assert cli.main(["list-jobs", *flags(cluster)]) == 0
    assert "cli-words" not in listed(capsys.readouterr().out)


def test_a_module_variable_p_and_a_sibling_module_with_jet_style_flags_before_the_command(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a file that imports a helper module next to it and leaves its pipeline in `p`
    write(tmp_path, "squares_helper.py", "def square(n):\n    return n * n\n")
    job_file = write(
        tmp_path,
        "squares.py",
        """
        from squares_helper import square
        from jetlet import Pipeline, Sinks, Sources

        p = Pipeline()
        p.read_from(Sources.items(*range(20))).map(square).write_to(Sinks.list("cli-squares"))
        """,
    )
    # when submitted with the connection flags before the command, as `jet -a ... submit` takes them
    assert cli.main([*flags(cluster), "submit", "--wait", job_file]) == 0
    # then the helper travelled with the job and the list holds the squares
    assert sorted(cluster.get_list("cli-squares")) == [n * n for n in range(20)]
    assert "completed" in capsys.readouterr().out


def test_the_environment_and_a_token_file_select_the_cluster(
    cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the addresses in JETLET_CLIENT_ADDRESSES (an unreachable one first) and the token in a file
    monkeypatch.setenv("JETLET_CLIENT_ADDRESSES", ",".join(["127.0.0.1:1", *cluster.addresses]))
    token_file = tmp_path / "token"
    token_file.write_text(cluster.token + "\n", encoding="utf-8")
    # when a command runs with no -a, then the first reachable member answers
    assert cli.main(["cluster", "--token-file", str(token_file)]) == 0
    assert cluster.addresses[0] in capsys.readouterr().out
    # and JETLET_CLIENT_TOKEN works as well as the file
    monkeypatch.setenv("JETLET_CLIENT_TOKEN", cluster.token)
    assert cli.main(["list-jobs"]) == 0


def test_starting_from_a_snapshot_that_does_not_exist_is_refused_naming_it(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_file = write(tmp_path, "words.py", WORDS_JOB)
    # when submitted with -s naming a snapshot the cluster does not have, then it is refused, not run
    status = cli.main(
        ["submit", *flags(cluster), "-s", "snap-1", "-n", "cli-snap", job_file, "x", "cli-snap"]
    )
    assert status == 1
    assert "initial_snapshot_name" in capsys.readouterr().err
    assert cluster.get_job("cli-snap") is None


def test_a_file_that_raises_exits_1_with_its_traceback(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_file = write(
        tmp_path, "broken.py", "def build_pipeline():\n    raise RuntimeError('no pipeline today')\n"
    )
    assert cli.main(["submit", *flags(cluster), job_file]) == 1
    err = capsys.readouterr().err
    assert "no pipeline today" in err and "broken.py" in err and "Traceback" in err


def test_a_file_that_builds_nothing_or_is_missing_is_bad_input(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_file = write(tmp_path, "nothing.py", "pipeline = 42\n")
    assert cli.main(["submit", *flags(cluster), job_file]) == 2
    assert "builds no job" in capsys.readouterr().err
    assert cli.main(["submit", *flags(cluster), str(tmp_path / "absent.py")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_a_job_that_fails_on_the_cluster_exits_1_with_the_remote_traceback(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_file = write(
        tmp_path,
        "failing.py",
        """
        from jetlet import Pipeline, Sinks, Sources

        def explode(n):
            raise ValueError(f"cannot take {n}")

        def pipeline():
            p = Pipeline()
            p.read_from(Sources.items(1, 2, 3)).map(explode).write_to(Sinks.noop())
            return p
        """,
    )
    assert cli.main(["submit", *flags(cluster), "--wait", job_file]) == 1
    err = capsys.readouterr().err
    assert "cannot take" in err and "failing.py" in err


def test_suspend_resume_restart_and_cancel_a_running_job(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a stream job that never ends, listed as running
    job_file = write(tmp_path, "endless.py", ENDLESS_JOB)
    assert cli.main(["submit", *flags(cluster), "-n", "cli-endless", job_file]) == 0
    capsys.readouterr()
    wait_for_status(cluster, "cli-endless", "RUNNING")
    assert cli.main(["list-jobs", *flags(cluster)]) == 0
    assert listed(capsys.readouterr().out)["cli-endless"] == "RUNNING"
    # when suspended, resumed and restarted, then each prints the new status
    for operation, status in (("suspend", "SUSPENDED"), ("resume", "RUNNING"), ("restart", "RUNNING")):
        assert cli.main([operation, *flags(cluster), "cli-endless"]) == 0
        assert capsys.readouterr().out.strip() == f"job cli-endless: {status}"
    # when cancelled by its id, then it ends FAILED (Jet's state for a cancelled job)
    job_id = next(line.split()[0] for line in _list_all(cluster, capsys) if line.endswith("cli-endless"))
    assert cli.main(["cancel", *flags(cluster), job_id]) == 0
    assert capsys.readouterr().out.strip() == "job cli-endless: FAILED"
    # and an operation the job's state refuses is a failure (1)
    assert cli.main(["resume", *flags(cluster), "cli-endless"]) == 1
    assert "is not suspended" in capsys.readouterr().err
    assert cli.main(["cancel", *flags(cluster), "cli-endless"]) == 1
    assert "has already ended" in capsys.readouterr().err


def _list_all(cluster: Any, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert cli.main(["list-jobs", *flags(cluster), "--all"]) == 0
    return capsys.readouterr().out.splitlines()[1:]


def test_an_unknown_job_is_bad_input(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    for operation in ("cancel", "suspend", "resume", "restart"):
        assert cli.main([operation, *flags(cluster), "no-such-job"]) == 2
        assert "no job with id or name 'no-such-job'" in capsys.readouterr().err


def test_cluster_describes_members_and_partitions(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["cluster", *flags(cluster)]) == 0
    out = capsys.readouterr().out
    view = cluster.cluster()
    rows = out.splitlines()[1 : 1 + len(view.members)]
    # then one row per member: its name, addresses and partition count; the coordinator is marked
    for row, member in zip(rows, view.members, strict=True):
        assert row.split()[:4] == [
            member.name,
            member.rest_address,
            member.data_address,
            str(len(view.partitions[member.name])),
        ]
        assert row.endswith("(coordinator)") == member.is_coordinator
    assert sum(int(row.split()[3]) for row in rows) == 271
    assert "2 members" in out and "271 partitions" in out


def test_unreachable_and_bad_usage_have_their_own_exit_codes(
    cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["list-jobs", "-a", "127.0.0.1:1", "--token", "t"]) == 3
    assert "cannot reach the cluster" in capsys.readouterr().err
    assert cli.main(["list-jobs", "--token", "t", "-a", ""]) == 2
    assert cli.main(["list-jobs", "-a", "no-port", "--token", "t"]) == 2
    assert cli.main(["list-jobs", "-a", ",".join(cluster.addresses), "--token", "wrong"]) == 2
    assert cli.main(["list-jobs", "-a", cluster.addresses[0]]) == 2
    assert "no REST token" in capsys.readouterr().err
    assert cli.main([]) == 2
    for bad in (["submit", "--no-such-flag"], ["list-jobs", "-x"], ["cancel"], ["cluster", "stop"]):
        with pytest.raises(SystemExit) as exited:
            cli.main(bad)
        assert exited.value.code == 2


def test_member_takes_every_flag_including_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["member", "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("usage: jetlet member")
    assert cli.main(["member", "--members", "not-an-address"]) == 2


def run_jetlet(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jetlet.cli", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_command_end_to_end_submits_lists_and_reports_failures(cluster: Any, tmp_path: Path) -> None:
    # given a words file, when submitted by the real command with --wait, then exit 0 and the counts
    job_file = write(tmp_path, "words.py", WORDS_JOB)
    done = run_jetlet("submit", *flags(cluster), "-n", "cli-e2e", "--wait", job_file, "x,y,x", "cli-e2e")
    assert done.returncode == 0, done.stderr
    assert cluster.get_map("cli-e2e") == collections.Counter(["x", "y", "x"])
    listing = run_jetlet("list-jobs", "--all", *flags(cluster))
    assert listing.returncode == 0 and listed(listing.stdout)["cli-e2e"] == "COMPLETED"
    # and a file that raises exits 1 with the user's traceback on stderr, nothing on stdout
    broken = write(tmp_path, "broken.py", "raise KeyError('missing setting')\n")
    failed = run_jetlet("submit", *flags(cluster), broken)
    assert failed.returncode == 1 and "KeyError: 'missing setting'" in failed.stderr and not failed.stdout
    assert run_jetlet("cluster", "-a", "127.0.0.1:1", "--token", "t").returncode == 3


def test_cluster_start_runs_a_usable_local_cluster_until_interrupted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # given `jetlet cluster start --members 2` in the foreground
    process = subprocess.Popen(
        [sys.executable, "-m", "jetlet.cli", "cluster", "start", "--members", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            lines.append(line)
            if line.startswith("stop it with") or not line:
                break
        use = next(line for line in lines if line.startswith("use it with:")).split(":", 1)[1].split()
        members = psutil.Process(process.pid).children(recursive=True)
        assert len(members) == 2 and all(f"pid {m.pid} " in "".join(lines) for m in members)
        # when a client command uses the flags it printed, then it sees both members
        assert cli.main(["cluster", *use]) == 0
        assert "2 members" in capsys.readouterr().out
        # and SIGTERM stops it and every member, exit status 0
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        _, alive = psutil.wait_procs(members, timeout=10)
        assert not alive
    finally:
        stop_with_children(process)


def stop_with_children(process: subprocess.Popen[str]) -> None:
    """Kill a command still running, and its members: SIGKILL would leave them orphaned."""
    if process.poll() is not None:
        return
    children = psutil.Process(process.pid).children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    psutil.wait_procs(children, timeout=10)
    process.kill()
    process.wait()


STATEFUL_JOB = """
    from jetlet import Pipeline, Sinks, Sources

    def count(state, key, item):
        state[0] += 1
        return (key, state[0])

    pipeline = Pipeline()
    pipeline.read_from(Sources.test_stream(2000, lambda seq: seq % 5)).without_timestamps().grouping_key(
        lambda item: item
    ).map_stateful(lambda: [0], count).write_to(Sinks.noop())
"""


def test_named_snapshots_are_saved_listed_started_from_and_deleted(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a stateful stream job submitted with exactly-once snapshots
    job_file = write(tmp_path, "stateful.py", STATEFUL_JOB)
    guarantee = ["-g", "EXACTLY_ONCE", "--snapshot-interval-millis", "200"]
    assert cli.main(["submit", *flags(cluster), *guarantee, "-n", "cli-state", job_file]) == 0
    wait_until(lambda: cluster.get_job("cli-state").snapshot.get("count", 0) > 0, "a snapshot", 30)
    capsys.readouterr()
    # when its state is saved under a name, then the snapshot is described and listed
    assert cli.main(["save-snapshot", *flags(cluster), "cli-state", "cli-kept"]) == 0
    assert re.match(r"snapshot cli-kept: \d+ entries, \d+ bytes of job cli-state", capsys.readouterr().out)
    # when saved with -C, then the job is cancelled after the snapshot
    assert cli.main(["save-snapshot", *flags(cluster), "-C", "cli-state", "cli-last"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "job cli-state: FAILED"
    assert cli.main(["list-snapshots", *flags(cluster)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "TIME", "SIZE", "ENTRIES", "JOB"]
    assert [line.split()[0] for line in lines[1:]] == ["cli-kept", "cli-last"]
    # when a job starts from a named snapshot, then it runs from it
    assert (
        cli.main(["submit", *flags(cluster), *guarantee, "-s", "cli-last", "-n", "cli-again", job_file]) == 0
    )
    wait_for_status(cluster, "cli-again", "RUNNING")
    assert cli.main(["cancel", *flags(cluster), "cli-again"]) == 0
    # when deleted, then they are gone, and deleting again is bad input (2)
    for name in ("cli-kept", "cli-last"):
        assert cli.main(["delete-snapshot", *flags(cluster), name]) == 0
    assert cli.main(["delete-snapshot", *flags(cluster), "cli-kept"]) == 2
    assert "no snapshot named 'cli-kept'" in capsys.readouterr().err
    assert cli.main(["list-snapshots", *flags(cluster)]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == []
    # and a job that has ended has no state to save: the cluster refuses (1)
    assert cli.main(["save-snapshot", *flags(cluster), "cli-again", "never"]) == 1
    assert "only a running or suspended job can export" in capsys.readouterr().err
