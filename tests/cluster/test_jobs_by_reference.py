"""Jobs by reference end to end: a 2-member local cluster runs jobs submitted by entrypoint and by source.

The members get ``tests/cluster/entrypoints`` on their ``PYTHONPATH`` (it
stands for the worker image's code). Results are compared with plain Python;
refused requests are 400s naming the field, through either member, and leave
the job list as it was; the CLI's ``submit --entrypoint``/``--source`` go the
same way.
"""

from __future__ import annotations

import collections
import json
import os
import textwrap
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jetlet import cli, client, word_count
from jetlet.local_cluster import local_cluster

ENTRYPOINTS = Path(__file__).resolve().parent / "entrypoints"
WORDS = [f"w{'x' * (i % 7)}{i % 13}" for i in range(3000)]
JOB_TIMEOUT_S = 60.0

SOURCE = textwrap.dedent(
    """
    import dataclasses

    from jetlet import AggregateOperations, Pipeline, Sinks, Sources


    @dataclasses.dataclass(frozen=True)
    class Tagged:
        word: str
        even: bool


    def tag(word):
        return Tagged(word, len(word) % 2 == 0)


    def build(words, map_name):
        p = Pipeline()
        p.read_from(Sources.from_iterable(words)).map(tag).grouping_key(lambda t: t.even).aggregate(
            AggregateOperations.counting()
        ).write_to(Sinks.map(map_name))
        return p
    """
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[client.Client]:
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ENTRYPOINTS), saved) if p)
    try:
        with local_cluster(2) as c:
            yield c
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def _post_jobs(address: str, token: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(f"http://{address}/jobs", data=json.dumps(body).encode(), method="POST")
    req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=JOB_TIMEOUT_S) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _job_ids(c: client.Client) -> list[int]:
    return sorted(j.id for j in c.get_jobs())


def test_an_entrypoint_in_the_image_runs_on_every_member_with_plain_pythons_result(
    cluster: client.Client,
) -> None:
    # when a pipeline and a DAG are submitted by entrypoint
    cluster.submit_entrypoint(
        "reference_jobs:word_lengths", {"words": WORDS, "map_name": "lengths", "minimum": 3}
    ).join(timeout=JOB_TIMEOUT_S)
    cluster.submit_entrypoint("jetlet.word_count:word_count_job", {"map_name": "bundled"}).join(
        timeout=JOB_TIMEOUT_S
    )
    # then the results are plain Python's
    assert cluster.get_map("lengths") == collections.Counter(len(w) for w in WORDS if len(w) >= 3)
    assert cluster.get_map("bundled") == collections.Counter(word_count.tokenize(word_count.bundled_text()))


def test_source_runs_on_every_member_without_the_source_there(cluster: client.Client) -> None:
    # when a job is submitted as source text (a class and functions the members have never seen),
    # through the member that is not the coordinator
    other = client.connect(cluster.addresses[1], cluster.token)
    job = other.submit_source(SOURCE, "build", {"words": WORDS, "map_name": "parity"})
    job.join(timeout=JOB_TIMEOUT_S)
    # then both members ran it, and the result is plain Python's
    assert cluster.get_map("parity") == collections.Counter(len(w) % 2 == 0 for w in WORDS)
    assert job.metrics()  # the job ran on the cluster and reports its metrics


@pytest.mark.parametrize(
    ("body", "field", "expected"),
    [
        (
            {"entrypoint": "no_such_package.jobs:build"},
            "entrypoint",
            "module 'no_such_package.jobs' not found",
        ),
        ({"entrypoint": "reference_jobs:missing"}, "entrypoint", "has no function 'missing'"),
        ({"entrypoint": "reference_jobs:not_a_job"}, "entrypoint", "returned a builtins.dict"),
        (
            {"entrypoint": "reference_jobs:fails_to_build", "arguments": {"reason": "r"}},
            "entrypoint",
            "ValueError: cannot build the job: r",
        ),
        ({"entrypoint": "reference_jobs:numbers_dag", "arguments": {"n": 1}}, "arguments", "no argument 'n'"),
        ({"source": "def build(:\n", "entrypoint": "build"}, "source", "syntax error at line 1"),
        ({"definition": "AAAA", "entrypoint": "reference_jobs:numbers_dag"}, "definition", "not both"),
        ({}, "definition", "is required"),
    ],
)
def test_a_bad_reference_is_a_400_naming_the_field_through_either_member_and_registers_nothing(
    cluster: client.Client, body: dict[str, Any], field: str, expected: str
) -> None:
    before = _job_ids(cluster)
    for address in cluster.addresses:
        status, answer = _post_jobs(address, cluster.token, {**body, "config": {"name": "never"}})
        assert (status, answer["field"]) == (400, field), answer
        assert expected in answer["error"], answer
    assert _job_ids(cluster) == before
    assert cluster.get_job("never") is None


def _flags(c: client.Client) -> list[str]:
    return ["-a", ",".join(c.addresses), f"--token={c.token}"]


def test_the_cli_submits_by_entrypoint_and_by_source(
    cluster: client.Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # when: submit --entrypoint with JSON and string --arg values, and --wait
    words = ["a", "bb", "cc", "ddd"]
    status = cli.main(
        [
            "submit",
            *_flags(cluster),
            "-n",
            "cli-entrypoint",
            "--wait",
            "--entrypoint",
            "reference_jobs:word_lengths",
            "--arg",
            f"words={json.dumps(words)}",
            "--arg",
            "map_name=cli-lengths",
            "--arg",
            "minimum=2",
        ]
    )
    # then it completed with plain Python's result
    assert status == 0, capsys.readouterr().err
    assert "submitted job cli-entrypoint" in capsys.readouterr().out
    assert cluster.get_map("cli-lengths") == {2: 2, 3: 1}
    # when: submit --source FILE --entrypoint FUNCTION
    source_file = tmp_path / "parity_job.py"
    source_file.write_text(SOURCE, encoding="utf-8")
    status = cli.main(
        [
            "submit",
            *_flags(cluster),
            "--wait",
            "--source",
            str(source_file),
            "--entrypoint",
            "build",
            "--arg",
            f"words={json.dumps(words)}",
            "--arg",
            "map_name=cli-parity",
        ]
    )
    assert status == 0, capsys.readouterr().err
    assert cluster.get_map("cli-parity") == collections.Counter(len(w) % 2 == 0 for w in words)
    # when: the reference is bad, then exit 2 with the cluster's message, and no job
    before = _job_ids(cluster)
    status = cli.main(["submit", *_flags(cluster), "--entrypoint", "reference_jobs:missing"])
    assert status == 2
    assert "has no function 'missing'" in capsys.readouterr().err
    assert _job_ids(cluster) == before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--entrypoint", "m:f", "job.py"], "not both"),
        (["--source", "job.py"], "--source and --arg go with --entrypoint"),
        (["--arg", "a=1"], "--source and --arg go with --entrypoint"),
        (["--entrypoint", "m:f", "--arg", "novalue"], "--arg must be KEY=VALUE"),
        (["--entrypoint", "m:f", "--arg", "a=1", "--arg", "a=2"], "--arg a is given twice"),
        (["--entrypoint", "f", "--source", "/no/such/file.py"], "--source: "),
        ([], "give FILE.py, or --entrypoint"),
    ],
)
def test_the_cli_refuses_bad_usage_before_reaching_the_cluster(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # given no cluster at all (the address is never contacted): usage is checked first
    status = cli.main(["submit", "-a", "127.0.0.1:9", "--token=t", *argv])
    assert status == 2
    assert message in capsys.readouterr().err
