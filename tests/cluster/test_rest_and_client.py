"""The REST API and the client, against a real server on loopback backed by the one-member service."""

from __future__ import annotations

import collections
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

import jetlet
from jetlet import AggregateOperations, Pipeline, Sinks, Sources, client
from jetlet._cluster import job_service, rest, rest_requests
from jetlet.core import processors
from jetlet.testing import wait_until

TOKEN = "test-token"
WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "the", "end"]
CLUSTER = {
    "version": 1,
    "coordinator": "m1",
    "members": [
        {"name": "m1", "data_address": "127.0.0.1:1", "rest_address": "127.0.0.1:2", "is_coordinator": True}
    ],
    "partition_table": {"partition_count": 3, "members": {"m1": [0, 1, 2]}},
}


class Member:
    """A REST server over an embedded job service, and a client of it."""

    def __init__(self, max_body: int = 1 << 20) -> None:
        self.service = job_service.EmbeddedJobService(jetlet.embedded())
        self.app = rest.create_app(self.service, lambda: CLUSTER, TOKEN, max_body)
        self.server = rest.RestServer(self.app)
        host, port = self.server.start("127.0.0.1", 0)
        self.address = f"{host}:{port}"
        self.client = client.connect(self.address, TOKEN)

    def raw(
        self, method: str, path: str, data: bytes | None, token: str = TOKEN
    ) -> tuple[int, dict[str, Any]]:
        req = urllib.request.Request(f"http://{self.address}{path}", data=data, method=method)
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=10) as response:
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


def _word_count(sink: str) -> Pipeline:
    p = Pipeline()
    p.read_from(Sources.items(*WORDS)).grouping_key(str).aggregate(AggregateOperations.counting()).write_to(
        Sinks.map(sink)
    )
    return p


def _endless(sink: str) -> Pipeline:
    p = Pipeline()
    p.read_from(Sources.test_stream(1000, lambda i: i)).with_ingestion_timestamps().write_to(Sinks.list(sink))
    return p


def _explode(word: str) -> str:
    if word == "fox":
        raise RuntimeError("the fox escaped")
    return word


def test_given_a_pipeline_when_submitted_by_the_client_then_results_match_the_reference(
    member: Member,
) -> None:
    job = member.client.new_job(_word_count("counts"), jetlet.JobConfig(name="wc"))
    job.join(timeout=10)
    assert member.client.get_map("counts") == dict(collections.Counter(WORDS))
    assert job.status is jetlet.JobStatus.COMPLETED and job.completion_time is not None
    found = member.client.get_job("wc")
    assert found is not None and found.id == job.id and "digraph" in found.dag_dot
    assert [j.id for j in member.client.get_jobs()] == [job.id]
    assert job.metrics() and job.config["name"] == "wc"
    assert member.client.get_job("no-such-job") is None


def test_given_a_failing_function_when_joined_then_job_failed_error_carries_the_remote_traceback(
    member: Member,
) -> None:
    p = Pipeline()
    p.read_from(Sources.items(*WORDS)).map(_explode).write_to(Sinks.list("out"))
    job = member.client.new_job(p)
    with pytest.raises(jetlet.JobFailedError, match="the fox escaped") as caught:
        job.join(timeout=10)
    assert "_explode" in caught.value.remote_traceback


def test_given_a_running_job_when_steered_then_states_follow_and_cancel_ends_it(member: Member) -> None:
    job = member.client.new_job(_endless("ticks"), jetlet.JobConfig(name="endless"))
    wait_until(lambda: len(member.client.get_list("ticks")) > 0, "first items")
    with pytest.raises(TimeoutError):
        job.join(timeout=0.05)
    job.suspend()
    assert job.status is jetlet.JobStatus.SUSPENDED
    job.resume()
    assert job.status in (jetlet.JobStatus.STARTING, jetlet.JobStatus.RUNNING)
    same = member.client.new_job_if_absent(_endless("ticks"), jetlet.JobConfig(name="endless"))
    assert same.id == job.id
    job.cancel()
    with pytest.raises(jetlet.JobCancelledError):
        job.join(timeout=10)
    with pytest.raises(client.RequestRefusedError, match="already ended") as refused:
        job.cancel()
    assert refused.value.status == 409


def test_given_an_observable_sink_when_iterated_remotely_then_every_item_arrives(member: Member) -> None:
    p = Pipeline()
    p.read_from(Sources.items(*range(20))).write_to(Sinks.observable("numbers"))
    job = member.client.new_job(p)
    assert sorted(member.client.get_observable("numbers").iterate(timeout=10)) == list(range(20))
    job.join(timeout=10)
    assert sorted(member.client.get_observable("numbers").items()) == list(range(20))


def test_given_an_unpicklable_function_when_submitted_then_the_error_names_it(member: Member) -> None:
    lock = threading.Lock()

    def guarded(word: str) -> str:
        with lock:
            return word

    p = Pipeline()
    p.read_from(Sources.items(*WORDS)).map(guarded).write_to(Sinks.list("never"))
    with pytest.raises(jetlet.JetletError, match=r"stage 'map': function '.*guarded' cannot be pickled"):
        member.client.new_job(p)
    dag = jetlet.DAG()
    dag.new_vertex("guarded-source", processors.source_from_generator(lambda _: [guarded("x")]))
    with pytest.raises(jetlet.JetletError, match=r"vertex 'guarded-source' -> .*closure variable 'lock'"):
        member.client.new_job(dag)
    assert member.client.get_jobs() == []


def test_given_no_or_a_wrong_token_then_refused_and_counted(member: Member) -> None:
    status, body = member.raw("GET", "/jobs", None, token="")
    assert status == 401 and "bearer token" in body["error"]
    with pytest.raises(client.RequestRefusedError, match="401"):
        client.connect(member.address, "wrong")
    assert rest_requests.refused_counts(member.app)["refused_unauthorized"] == 2
    assert member.raw("GET", "/health", None, token="")[0] == 200


@pytest.mark.parametrize(
    ("path", "data", "status", "field"),
    [
        ("/jobs", b"{not json", 400, "body"),
        ("/jobs", b"[1, 2]", 400, "body"),
        ("/jobs", b"{}", 400, "definition"),
        ("/jobs", b'{"definition": 5}', 400, "definition"),
        ("/jobs", b'{"definition": "!!!"}', 400, "definition"),
        ("/jobs", b'{"definition": "aGVsbG8=", "config": []}', 400, "config"),
        ("/jobs", b'{"definition": "aGVsbG8="}', 400, "definition"),
        ("/jobs/endless/join", b'{"timeout": "soon"}', 400, "timeout"),
        ("/jobs/endless/join", b'{"timeout": true}', 400, "timeout"),
        ("/jobs/endless/join", b'{"timeout": -1}', 400, "timeout"),
        ("/jobs", b'{"definition": "' + b"A" * (1 << 20) + b'"}', 413, "body"),
    ],
)
def test_given_a_running_job_when_a_bad_body_arrives_then_4xx_names_the_field_and_the_job_runs_on(
    member: Member, path: str, data: bytes, status: int, field: str
) -> None:
    job = member.client.new_job(_endless("ticks"), jetlet.JobConfig(name="endless"))
    got_status, body = member.raw("POST", path, data)
    assert (got_status, body["field"]) == (status, field)
    assert rest_requests.refused_counts(member.app)["refused_bad_request"] == 1
    assert job.status in (jetlet.JobStatus.STARTING, jetlet.JobStatus.RUNNING)
    job.cancel()


def test_given_a_bad_query_when_reading_an_observable_then_400_names_it(member: Member) -> None:
    status, body = member.raw("GET", "/observables/x?from=abc", None)
    assert (status, body["field"]) == (400, "from")


def test_given_the_server_then_openapi_lists_every_route(member: Member) -> None:
    status, document = member.raw("GET", "/openapi.json", None, token="")
    assert status == 200 and document["openapi"].startswith("3.")
    routes = {(m.upper(), p) for p, ops in document["paths"].items() for m in ops}
    served = {
        (r.method, r.resource.canonical)
        for r in member.app.router.routes()
        if r.method != "HEAD" and r.resource is not None
    }
    assert routes == served
    assert len(routes) == 30
    assert member.raw("POST", "/membership", b"{}")[0] == 404


def test_given_the_cluster_route_then_the_client_describes_members_and_partitions(member: Member) -> None:
    view = member.client.cluster()
    assert [m.name for m in view.members] == ["m1"] and view.coordinator == "m1"
    assert view.members[0].is_coordinator and view.partitions == {"m1": [0, 1, 2]}
    assert view.partition_count == 3 and view.version == 1


def test_given_no_member_when_connecting_then_a_clear_error() -> None:
    with pytest.raises(jetlet.JetletError, match=r"cannot reach the member at 127\.0\.0\.1:1"):
        client.connect("127.0.0.1:1", TOKEN)
