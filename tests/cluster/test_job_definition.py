"""Job definitions from a POST /jobs body: a pickled DAG or Pipeline, an entrypoint, or source (no processes).

The entrypoint module ``reference_jobs`` lives in ``tests/cluster/entrypoints``
(it stands for the worker image); the REST tests run a real server on
loopback over the one-member service and check that a refused request
registers nothing.
"""

from __future__ import annotations

import base64
import doctest
import json
import linecache
import re
import sys
import textwrap
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

import jetlet
from jetlet import AggregateOperations, Pipeline, Sinks, Sources, client, word_count
from jetlet._cluster import job_definition, job_service, rest
from jetlet.core import dag as dag_mod

ENTRYPOINTS = Path(__file__).resolve().parent / "entrypoints"
TOKEN = "test-token"
CLUSTER = {
    "version": 1,
    "coordinator": "m1",
    "members": [],
    "partition_table": {"partition_count": 1, "members": {}},
}

GOOD_SOURCE = textwrap.dedent(
    """
    import dataclasses

    from jetlet import AggregateOperations, Pipeline, Sinks, Sources


    @dataclasses.dataclass(frozen=True)
    class Word:
        text: str


    def shout(word):
        return Word(word.upper())


    def build(words, map_name):
        p = Pipeline()
        p.read_from(Sources.from_iterable(words)).map(shout).grouping_key(lambda w: w.text).aggregate(
            AggregateOperations.counting()
        ).write_to(Sinks.map(map_name))
        return p
    """
)


@pytest.fixture(autouse=True)
def entrypoints_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Given the entrypoints folder on sys.path (as the worker image's modules are on a member's)."""
    monkeypatch.syspath_prepend(str(ENTRYPOINTS))


def _pickle64(value: object) -> str:
    return base64.b64encode(cloudpickle.dumps(value)).decode("ascii")


def _dag(body: dict[str, Any]) -> dag_mod.DAG:
    loaded = cloudpickle.loads(job_definition.definition_from_request(body))
    assert isinstance(loaded, dag_mod.DAG)
    return loaded


def _words_pipeline(map_name: str) -> Pipeline:
    p = Pipeline()
    p.read_from(Sources.items("a", "b", "a")).grouping_key(str).aggregate(
        AggregateOperations.counting()
    ).write_to(Sinks.map(map_name))
    return p


def _refusal(body: dict[str, Any]) -> job_service.InvalidJobRequestError:
    with pytest.raises(job_service.InvalidJobRequestError) as caught:
        job_definition.definition_from_request(body)
    return caught.value


# -- the three forms, accepted --------------------------------------------------------------------


def test_a_pickled_dag_is_kept_as_it_is_and_a_pickled_pipeline_is_planned() -> None:
    # given a DAG and a Pipeline, each pickled as a client sends them
    dag = jetlet.DAG()
    dag.new_vertex("only", jetlet.core.processors.source_from_iterable([1, 2]))
    raw = cloudpickle.dumps(dag)
    # when submitted as definitions
    from_dag = job_definition.definition_from_request({"definition": base64.b64encode(raw).decode()})
    planned = _dag({"definition": _pickle64(_words_pipeline("m"))})
    # then the DAG's bytes pass unchanged, and the pipeline arrives as its planned DAG
    assert from_dag == raw
    assert [v.name for v in planned.vertices()] == [v.name for v in _words_pipeline("m").to_dag().vertices()]


def test_an_entrypoint_is_imported_and_called_with_the_arguments() -> None:
    # when the entrypoint returns a Pipeline, then its planned DAG comes back
    dag = _dag({"entrypoint": "reference_jobs:word_lengths", "arguments": {"words": ["ab"], "map_name": "m"}})
    assert len(list(dag.vertices())) >= 2
    # when it returns a DAG, then that DAG comes back
    numbers = _dag({"entrypoint": "reference_jobs:numbers_dag", "arguments": {"count": 3}})
    assert [v.name for v in numbers.vertices()] == ["numbers"]
    # and the shipped word count serves as an entrypoint too
    counted = _dag({"entrypoint": "jetlet.word_count:word_count_job", "arguments": {"text": "a b"}})
    assert [v.name for v in counted.vertices()][-1] == "sink"


def test_source_runs_as_a_fresh_module_whose_functions_and_classes_travel_by_value() -> None:
    # given source defining a class and functions, and the modules before
    before = set(sys.modules)
    # when it is submitted
    raw = job_definition.definition_from_request(
        {"source": GOOD_SOURCE, "entrypoint": "build", "arguments": {"words": ["x"], "map_name": "m"}}
    )
    # then its module is gone again (no source module remains importable) ...
    assert not [name for name in set(sys.modules) - before if name.startswith("jetlet_source_")]
    assert not [name for name in linecache.cache if "jetlet_source_" in name]
    # ... yet the DAG unpickles and runs: its functions and class were pickled by value
    with jetlet.embedded() as jet:
        jet.new_job(cloudpickle.loads(raw)).join(timeout=30)
        assert jet.get_map("m") == {"X": 1}


def test_two_sources_with_the_same_names_do_not_meet() -> None:
    # given two sources that both define build() returning different jobs
    first = (
        "from jetlet.core import DAG, processors\n"
        "def build():\n"
        "    d = DAG()\n"
        "    d.new_vertex('one', processors.source_from_iterable([1]))\n"
        "    return d\n"
    )
    second = first.replace("'one'", "'two'")
    # then each is planned from its own namespace
    assert [v.name for v in _dag({"source": first, "entrypoint": "build"}).vertices()] == ["one"]
    assert [v.name for v in _dag({"source": second, "entrypoint": "build"}).vertices()] == ["two"]


# -- every bad case names its field and its problem -----------------------------------------------

BAD_CASES = [
    pytest.param({}, "definition", r"is required: give definition .* entrypoint", id="neither"),
    pytest.param(
        {"definition": "AAAA", "entrypoint": "reference_jobs:numbers_dag"},
        "definition",
        r"either definition or entrypoint, not both",
        id="both",
    ),
    pytest.param({"source": "x = 1"}, "entrypoint", r"is required with source", id="source-alone"),
    pytest.param({"definition": "not base64!"}, "definition", r"must be base64", id="not-base64"),
    pytest.param(
        {"definition": base64.b64encode(b"junk").decode()}, "definition", r"cannot be unpickled", id="junk"
    ),
    pytest.param(
        {"definition": _pickle64([1, 2])},
        "definition",
        r"holds a builtins\.list \(\[1, 2\]\), not a DAG or a Pipeline",
        id="pickled-list",
    ),
    pytest.param({"entrypoint": 5}, "entrypoint", r"must be a string, got int", id="entrypoint-type"),
    pytest.param(
        {"entrypoint": "reference_jobs"}, "entrypoint", r'must be "package\.module:function"', id="no-colon"
    ),
    pytest.param(
        {"entrypoint": "no_such_package.jobs:build"},
        "entrypoint",
        r"module 'no_such_package\.jobs' not found \(no module named 'no_such_package'",
        id="module-not-found",
    ),
    pytest.param(
        {"entrypoint": "reference_jobs:missing"},
        "entrypoint",
        r"module 'reference_jobs' has no function 'missing'",
        id="function-missing",
    ),
    pytest.param(
        {"entrypoint": "reference_jobs:NOT_A_FUNCTION"},
        "entrypoint",
        r"NOT_A_FUNCTION is not a function: it is a builtins\.int \(7\)",
        id="not-callable",
    ),
    pytest.param(
        {"entrypoint": "reference_jobs:not_a_job"},
        "entrypoint",
        r"not_a_job returned a builtins\.dict \(\{'answer': 42\}\), not a Pipeline or a DAG",
        id="wrong-return-type",
    ),
    pytest.param(
        {"entrypoint": "reference_jobs:numbers_dag", "arguments": {"count": 1, "colour": "red"}},
        "arguments",
        r"numbers_dag\(count: 'int'\) -> 'DAG' takes no argument 'colour'",
        id="unknown-argument",
    ),
    pytest.param(
        {"entrypoint": "reference_jobs:numbers_dag"},
        "arguments",
        r"missing a required argument: 'count'",
        id="missing-argument",
    ),
    pytest.param(
        {"entrypoint": "reference_jobs:numbers_dag", "arguments": [1]},
        "arguments",
        r"must be an object",
        id="arguments-not-object",
    ),
    pytest.param(
        {"definition": _pickle64(jetlet.DAG()), "arguments": {}},
        "arguments",
        r"go with entrypoint only",
        id="arguments-with-definition",
    ),
    pytest.param(
        {"entrypoint": "reference_jobs:empty_pipeline"},
        "entrypoint",
        r"planning the pipeline of reference_jobs:empty_pipeline raised:.*"
        r"PlanningError: the pipeline is empty",
        id="planning-fails",
    ),
    pytest.param(
        {"definition": _pickle64(jetlet.DAG())},
        "definition",
        r"the DAG is not valid: .*no vertices",
        id="invalid",
    ),
    pytest.param(
        {"source": "def build(:\n    pass\n", "entrypoint": "build"},
        "source",
        r"syntax error at line 1: .*\n    def build\(:\n +\^",
        id="syntax-error",
    ),
    pytest.param(
        {"source": "x = 1\n\nraise RuntimeError('top level')\n", "entrypoint": "build"},
        "source",
        r"raised while it ran:\n.*line 3, in <module>\n"
        r"    raise RuntimeError\('top level'\)\nRuntimeError: top level",
        id="source-raises",
    ),
    pytest.param(
        {"source": "def other():\n    pass\n", "entrypoint": "build"},
        "entrypoint",
        r"the source defines no function 'build' \(it defines: \['other'\]\)",
        id="source-function-missing",
    ),
    pytest.param(
        {"source": "x = 1\n", "entrypoint": "pkg.mod:build"},
        "entrypoint",
        r"with source must be the name of a function in it",
        id="source-entrypoint-form",
    ),
    pytest.param(
        {"source": "def build():\n    return 'a job?'\n", "entrypoint": "build"},
        "entrypoint",
        r"build returned a builtins\.str \('a job\?'\), not a Pipeline or a DAG",
        id="source-wrong-return-type",
    ),
]


@pytest.mark.parametrize(("body", "field", "message"), BAD_CASES)
def test_each_bad_request_is_refused_naming_its_field_and_problem(
    body: dict[str, Any], field: str, message: str
) -> None:
    refusal = _refusal(body)
    assert refusal.field == field
    assert str(refusal).startswith(f"{field}: ")
    assert refusal.args and re.search(message, str(refusal), re.DOTALL), str(refusal)


def test_a_raising_entrypoint_is_refused_with_its_user_traceback_once() -> None:
    refusal = _refusal({"entrypoint": "reference_jobs:fails_to_build", "arguments": {"reason": "no data"}})
    text = str(refusal)
    assert refusal.field == "entrypoint"
    assert text.count("Traceback (most recent call last)") == 1
    assert "reference_jobs.py" in text and "in fails_to_build" in text and "in _check" in text
    assert text.rstrip().endswith("ValueError: cannot build the job: no data")
    assert "job_definition.py" not in text  # jetlet's own frames are left out


def test_a_raising_source_function_shows_the_sources_own_lines() -> None:
    source = "def helper(n):\n    return 10 // n\n\ndef build(n):\n    return helper(n)\n"
    text = str(_refusal({"source": source, "entrypoint": "build", "arguments": {"n": 0}}))
    assert "line 5, in build\n    return helper(n)" in text
    assert "line 2, in helper\n    return 10 // n" in text
    assert text.rstrip().endswith("ZeroDivisionError: integer division or modulo by zero")
    assert text.count("Traceback") == 1 and "job_definition.py" not in text


def test_a_module_that_fails_to_import_is_told_apart_from_a_missing_one(tmp_path: Path) -> None:
    # given a module in the image that imports something the image lacks
    (tmp_path / "needs_missing_dependency.py").write_text("import no_such_dependency_anywhere\n")
    sys.path.insert(0, str(tmp_path))
    try:
        text = str(_refusal({"entrypoint": "needs_missing_dependency:build"}))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("needs_missing_dependency", None)
    # then the message says the import raised, with the missing dependency's name
    assert "importing module 'needs_missing_dependency' raised" in text
    assert "No module named 'no_such_dependency_anywhere'" in text


def test_a_failed_source_leaves_no_module_behind() -> None:
    before = set(sys.modules)
    _refusal({"source": "def build():\n    raise KeyError('k')\n", "entrypoint": "build"})
    assert set(sys.modules) - before == set()


def test_the_docstring_examples_run() -> None:
    for module in (job_definition, word_count):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0


# -- over REST: 400 with the field, nothing registered ---------------------------------------------


class Member:
    """A REST server over the one-member service, and a client of it."""

    def __init__(self) -> None:
        self.service = job_service.EmbeddedJobService(jetlet.embedded())
        self.app = rest.create_app(self.service, lambda: CLUSTER, TOKEN, 1 << 20)
        self.server = rest.RestServer(self.app)
        host, port = self.server.start("127.0.0.1", 0)
        self.address = f"{host}:{port}"
        self.client = client.connect(self.address, TOKEN)

    def post_jobs(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        req = urllib.request.Request(
            f"http://{self.address}/jobs", data=json.dumps(body).encode(), method="POST"
        )
        req.add_header("Authorization", f"Bearer {TOKEN}")
        try:
            with urllib.request.urlopen(req, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def close(self) -> None:
        self.server.stop()
        self.service.close()


@pytest.fixture
def member() -> Iterator[Member]:
    m = Member()
    yield m
    m.close()


def test_over_rest_each_bad_case_is_a_400_naming_the_field_and_nothing_is_registered(member: Member) -> None:
    # given a cluster with one job
    member.client.submit_entrypoint("reference_jobs:numbers_dag", {"count": 2}).join(timeout=30)
    jobs_before = [j.id for j in member.client.get_jobs()]
    for case in BAD_CASES:
        body, field, message = case.values
        # when the bad body is posted
        status, answer = member.post_jobs({**body, "config": {"name": "never"}})  # type: ignore[dict-item]
        # then it is a 400 naming the field and the problem
        assert status == 400, (case.id, answer)
        assert answer["field"] == field, (case.id, answer)
        assert re.search(message, answer["error"], re.DOTALL), (case.id, answer)
    # and no job was registered by any of them
    assert [j.id for j in member.client.get_jobs()] == jobs_before
    assert member.client.get_job("never") is None


def test_the_client_submits_by_entrypoint_and_by_source_and_refusals_name_the_field(member: Member) -> None:
    words = ["a", "bb", "cc", "ddd", "e"]
    # when submitted by entrypoint and by source
    member.client.submit_entrypoint(
        "reference_jobs:word_lengths", {"words": words, "map_name": "lengths", "minimum": 2}
    ).join(timeout=30)
    member.client.submit_source(GOOD_SOURCE, "build", {"words": words, "map_name": "shouted"}).join(
        timeout=30
    )
    # then the results are plain Python's
    assert member.client.get_map("lengths") == {2: 2, 3: 1}
    assert member.client.get_map("shouted") == {w.upper(): 1 for w in words}
    # and a refusal is a RequestRefusedError naming the field
    with pytest.raises(client.RequestRefusedError, match="has no function 'nope'") as refused:
        member.client.submit_entrypoint("reference_jobs:nope")
    assert refused.value.status == 400 and refused.value.field == "entrypoint"


def test_new_job_plans_in_the_users_process_and_sends_the_dag(
    member: Member, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a client whose requests are observed
    sent: list[dict[str, Any]] = []
    original = member.client.request

    def observed(method: str, path: str, body: dict[str, Any] | None = None, wait: float = 0.0) -> Any:
        if method == "POST" and path == "/jobs":
            sent.append(dict(body or {}))
        return original(method, path, body, wait)

    monkeypatch.setattr(member.client, "request", observed)
    # when a Pipeline is submitted, then the body carries its DAG
    member.client.new_job(_words_pipeline("planned")).join(timeout=30)
    assert isinstance(cloudpickle.loads(base64.b64decode(sent[0]["definition"])), dag_mod.DAG)
    assert member.client.get_map("planned") == {"a": 2, "b": 1}
    # when a pipeline cannot be planned, then the error is raised here, chained to the
    # planner's, and nothing is sent
    with pytest.raises(jetlet.JetletError, match="the job cannot be planned: PlanningError") as caught:
        member.client.new_job(Pipeline())
    assert type(caught.value.__cause__).__name__ == "PlanningError"
    assert len(sent) == 1
