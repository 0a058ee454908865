"""Jobs on a real 3-member local cluster: distributed edges over TCP, failures, cancel, suspend and restart.

Member processes on loopback form the cluster; every job runs on all three,
so the partitioned and distributed edges cross real connections. Results are
compared with plain-Python references; counters come from job metrics.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jetlet
from jetlet import word_count
from jetlet.aggregate import counting
from jetlet.core import DAG, Edge, processors
from jetlet.core import processor as proc
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sinks, Sources
from jetlet.testing import wait_until

DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with local_cluster(3) as client:
        yield client


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Wait for the cluster's state (read through the client: there is no notification to wait on)."""
    wait_until(condition, what, DEADLINE_S)


def _first(entry: tuple[str, int]) -> str:
    return entry[0]


def _identity(word: str) -> str:
    return word


def test_word_count_dag_on_three_members_equals_counter_and_crosses_the_network(cluster: Any) -> None:
    # given the word-count DAG whose combine stage is fed over a distributed partitioned edge
    lines = word_count.bundled_text().splitlines() * 10
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(lines))
    tokens = dag.new_vertex("tokenize", processors.flat_map_p(word_count.tokenize))
    accumulate = dag.new_vertex("accumulate", processors.accumulate_by_key_p(_identity, counting()))
    combine = dag.new_vertex("combine", processors.combine_by_key_p(counting()))
    sink = dag.new_vertex("sink", _store_sink("wc-dag"), 1)
    dag.edge(Edge.between(source, tokens))
    dag.edge(Edge.between(tokens, accumulate).partitioned(_identity))
    dag.edge(Edge.between(accumulate, combine).partitioned(_first).distributed())
    dag.edge(Edge.between(combine, sink))
    # when it runs on the cluster
    job = cluster.new_job(dag)
    job.join(60)
    # then the counts are Counter's, each word counted on exactly one member
    result = cluster.get_list("wc-dag")
    assert len(result) == len({word for word, _ in result})
    assert dict(result) == collections.Counter(w for line in lines for w in word_count.tokenize(line))
    # and the distributed edge's counters are non-zero on every member and add up
    metrics = job.metrics()
    sent = {k: v["distributedItemsOut"] for k, v in metrics.items() if "distributedItemsOut" in v}
    received = {k: v["distributedItemsIn"] for k, v in metrics.items() if "distributedItemsIn" in v}
    assert sum(sent.values()) == sum(received.values()) > 0
    assert {key.split("/")[0] for key, value in sent.items() if value} == {"m1", "m2", "m3"}
    # and every processor and link reports its call times; each member's tokenizers were busy
    assert all(v["longestCallMicros"] >= 0 and v["busyTimeMicros"] >= 0 for v in metrics.values())
    tokenizers = {key: value for key, value in metrics.items() if "/tokenize#" in key}
    busy_tokenizers = {key.split("/")[0] for key, value in tokenizers.items() if value["busyTimeMicros"] > 0}
    assert busy_tokenizers == {"m1", "m2", "m3"}


def _store_sink(name: str) -> Any:
    from jetlet.core.processors import store

    return store.list_sink_p(name)


class _SlowOnMember(proc.Processor):
    """A sink that is slow on one member only: its producers on every member must slow down, nothing else."""

    def __init__(self, name: str, slow_member: int) -> None:
        self._name = name
        self._slow_member = slow_member

    def is_cooperative(self) -> bool:
        return False

    def process(self, ordinal: int, inbox: Any) -> None:
        batch = inbox.take_all()
        self.context.data_store.append_list(self._name, batch)
        if self.context.member_index == self._slow_member:
            time.sleep(0.002)  # the slow consumer under test, not synchronisation


def test_flow_control_bounds_in_flight_items_when_one_members_consumer_is_slow(cluster: Any) -> None:
    # given 300,000 numbers from every member, partitioned over all members; member 1's consumer is slow
    count = 300_000
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(range(count)))
    sink = dag.new_vertex("sink", lambda: _SlowOnMember("flow", 1), 1)
    dag.edge(Edge.between(source, sink).partitioned(_identity).distributed())
    # when the job runs
    job = cluster.new_job(dag)
    job.join(120)
    # then every number arrived exactly once
    assert sorted(cluster.get_list("flow")) == list(range(count))
    # and no sender ever had more items in flight than the largest window its receiver granted
    metrics = job.metrics()
    senders = {k: v for k, v in metrics.items() if "maxInFlight" in v}
    receivers = {k: v for k, v in metrics.items() if "maxReceiveWindow" in v}
    members = ["m1", "m2", "m3"]
    assert senders
    for key, values in senders.items():
        member, name = key.split("/", 1)
        edge, dest = name.removeprefix("sender(edge ").removesuffix(")").split(" -> member ")
        receiver = receivers[f"{members[int(dest)]}/receiver(edge {edge} <- member {members.index(member)})"]
        assert 0 < values["maxInFlight"] <= receiver["maxReceiveWindow"]


def test_an_edge_config_sets_that_distributed_edges_packet_size_on_every_member(cluster: Any) -> None:
    # given a distributed edge whose own EdgeConfig allows one item per packet (the members' default: 16384)
    count = 6_000
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(range(count)))
    sink = dag.new_vertex("sink", _store_sink("one-per-packet"), 1)
    one_per_packet = jetlet.EdgeConfig(packet_size_limit=1)
    dag.edge(Edge.between(source, sink).partitioned(_identity).distributed().set_config(one_per_packet))
    # when the job runs
    job = cluster.new_job(dag)
    job.join(120)
    # then every number arrived once, and each member's sender to each other member sent a packet per item
    assert sorted(cluster.get_list("one-per-packet")) == list(range(count))
    senders = {k: v for k, v in job.metrics().items() if "distributedPacketsOut" in v}
    assert len(senders) == 6 and all(v["distributedItemsOut"] > 100 for v in senders.values())
    assert all(v["distributedPacketsOut"] >= v["distributedItemsOut"] for v in senders.values()), senders


def test_a_user_function_that_raises_fails_the_job_on_all_members_with_its_traceback(cluster: Any) -> None:
    # given a map that raises on one item: only the member that reads it fails by itself
    def explode(n: int) -> int:
        if n == 4321:
            raise ValueError("item 4321 is cursed")
        return n

    p = Pipeline()
    p.read_from(Sources.from_iterable(range(10_000))).map(explode).rebalance().write_to(Sinks.noop())
    job = cluster.new_job(p)
    # when it runs, then join raises with the user's own traceback (this file, the raise line)
    with pytest.raises(jetlet.JobFailedError) as failure:
        job.join(60)
    assert "item 4321 is cursed" in str(failure.value)
    assert "test_distributed_jobs.py" in failure.value.remote_traceback
    assert 'raise ValueError("item 4321 is cursed")' in failure.value.remote_traceback
    assert job.status is jetlet.JobStatus.FAILED


def _endless(context: Any) -> Iterator[int]:
    n = 0
    while True:
        yield n
        n += 1


def test_cancel_stops_a_streaming_job_on_every_member(cluster: Any) -> None:
    # given a stream that never ends, running on all members
    p = Pipeline()
    p.read_from(Sources.stream_from_generator(_endless)).without_timestamps().rebalance().write_to(
        Sinks.list("endless")
    )
    job = cluster.new_job(p)
    wait_for(lambda: job.status is jetlet.JobStatus.RUNNING and len(cluster.get_list("endless")) > 0, "items")
    # when it is cancelled
    job.cancel()
    # then join says so and the job ended
    with pytest.raises(jetlet.JobCancelledError):
        job.join(30)
    assert job.status is jetlet.JobStatus.FAILED
    # and nothing keeps writing: the list stops growing
    size = len(cluster.get_list("endless"))
    assert len(cluster.get_list("endless")) == size


def test_suspend_resume_and_restart_stop_and_start_the_execution(cluster: Any) -> None:
    # given a running stream job
    p = Pipeline()
    p.read_from(Sources.stream_from_generator(_endless)).without_timestamps().write_to(Sinks.noop())
    job = cluster.new_job(p)
    wait_for(lambda: job.status is jetlet.JobStatus.RUNNING, "running")
    # when suspended, then it is SUSPENDED; resumed, RUNNING; restarted, RUNNING again; cancelled, FAILED
    job.suspend()
    assert job.status is jetlet.JobStatus.SUSPENDED
    job.resume()
    wait_for(lambda: job.status is jetlet.JobStatus.RUNNING, "running after resume")
    job.restart()
    wait_for(lambda: job.status is jetlet.JobStatus.RUNNING, "running after restart")
    job.cancel()
    with pytest.raises(jetlet.JobCancelledError):
        job.join(30)


def test_a_member_that_dies_restarts_its_jobs_on_the_members_left_or_suspends_them() -> None:
    # given a separate cluster (this test kills a member) running two endless jobs
    import os
    import signal

    with local_cluster(
        3, ["--heartbeat-interval-millis", "100", "--failure-timeout-millis", "1500"]
    ) as client:
        p = Pipeline()
        p.read_from(Sources.stream_from_generator(_endless)).without_timestamps().rebalance().write_to(
            Sinks.noop()
        )
        scaling = client.new_job(p)
        fixed = client.new_job(p, jetlet.JobConfig(auto_scaling=False))
        wait_for(lambda: scaling.status is jetlet.JobStatus.RUNNING, "running")
        wait_for(lambda: fixed.status is jetlet.JobStatus.RUNNING, "running")
        # when the third member's process is killed
        os.kill(client.pids[2], signal.SIGKILL)
        # then the auto-scaling job runs again on the two members left
        wait_for(
            lambda: (
                scaling.status is jetlet.JobStatus.RUNNING
                and {name.split("/")[0] for name in scaling.metrics()} == {"m1", "m2"}
            ),
            "the job to run on m1 and m2 only",
        )
        # and the other is suspended, saying which member left
        wait_for(lambda: fixed.status is jetlet.JobStatus.SUSPENDED, "suspended")
        assert "member m3 left the cluster" in fixed.suspension_cause
        scaling.cancel()
        fixed.cancel()


def test_split_brain_protection_keeps_a_minority_from_running_the_job() -> None:
    import os
    import signal

    # given a 3-member cluster that loses two members: the survivor is a minority of the last known size
    args = ["--heartbeat-interval-millis", "100", "--failure-timeout-millis", "1000"]
    with local_cluster(3, args) as client:
        os.kill(client.pids[1], signal.SIGKILL)
        os.kill(client.pids[2], signal.SIGKILL)
        wait_for(lambda: len(client.cluster().members) == 1, "the dead members to be removed")
        p = Pipeline()
        p.read_from(Sources.items(1, 2, 3)).write_to(Sinks.list("quorum"))
        # when a job asks for split-brain protection, then it does not run: it waits, NOT_RUNNING
        # (as in Jet), for members to join, and says why
        protected = client.new_job(p, jetlet.JobConfig(split_brain_protection=True))
        wait_for(lambda: protected.status == jetlet.JobStatus.NOT_RUNNING, "the job to wait for a majority")
        feed = client.events(timeout=1)
        reasons = [e.reason for e in feed if e.job_id == protected.id and e.status == "NOT_RUNNING"]
        assert any("split-brain protection" in r for r in reasons), reasons
        assert client.get_list("quorum") == []
        protected.cancel()
        assert protected.status == jetlet.JobStatus.FAILED
        # and a job without it runs on the member that is left
        client.new_job(p).join(30)
        assert sorted(client.get_list("quorum")) == [1, 2, 3]
