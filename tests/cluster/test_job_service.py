"""The one-member job service: submit, observe and steer jobs from serialized definitions."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import cloudpickle
import pytest

import jetlet
from jetlet import AggregateOperations, Pipeline, Sinks, Sources, errors, records
from jetlet._cluster import job_service
from jetlet.testing import wait_until

WORDS = ["a", "b", "a", "c", "b", "a"]


@pytest.fixture
def service() -> Iterator[job_service.EmbeddedJobService]:
    svc = job_service.EmbeddedJobService(jetlet.embedded())
    yield svc
    svc.close()


def _word_count(words: list[str], sink: str) -> bytes:
    p = Pipeline()
    p.read_from(Sources.items(*words)).grouping_key(str).aggregate(AggregateOperations.counting()).write_to(
        Sinks.map(sink)
    )
    return bytes(cloudpickle.dumps(p.to_dag()))  # the submitter plans: the service takes DAGs


def _endless(sink: str) -> bytes:
    p = Pipeline()
    p.read_from(Sources.test_stream(1000, lambda i: i)).with_ingestion_timestamps().write_to(Sinks.list(sink))
    return bytes(cloudpickle.dumps(p.to_dag()))  # the submitter plans: the service takes DAGs


def _fail_on_c(word: str) -> str:
    if word == "c":
        raise ValueError("no c allowed")
    return word


def test_given_a_pickled_pipeline_when_submitted_then_it_completes_with_the_reference_counts(
    service: job_service.EmbeddedJobService,
) -> None:
    record = service.submit(_word_count(WORDS, "counts"), {"name": "wc"})
    done = service.join(record.id_string, 10)
    assert done.status == "COMPLETED" and done.completion_time is not None
    assert service.get_map("counts") == dict(collections.Counter(WORDS))
    assert "digraph" in done.dag_dot and done.name == "wc"
    assert [r.id for r in service.list_jobs()] == [record.id]
    assert service.get("wc").id == record.id == service.get(str(record.id)).id
    assert service.metrics("wc")


def test_given_a_failing_user_function_then_the_record_carries_its_traceback(
    service: job_service.EmbeddedJobService,
) -> None:
    p = Pipeline()
    p.read_from(Sources.items(*WORDS)).map(_fail_on_c).write_to(Sinks.list("out"))
    record = service.join(service.submit(cloudpickle.dumps(p.to_dag()), {}).id_string, 10)
    assert record.status == "FAILED" and not record.cancelled
    assert "no c allowed" in record.failure
    assert "_fail_on_c" in record.failure_traceback


def test_given_a_running_job_when_suspended_resumed_and_cancelled_then_states_follow_jet(
    service: job_service.EmbeddedJobService,
) -> None:
    record = service.submit(_endless("ticks"), {"name": "endless"})
    wait_until(lambda: len(service.get_list("ticks")) > 0, "first items")
    assert service.suspend("endless").status == "SUSPENDED"
    with pytest.raises(jetlet.JetletError, match="not running"):
        service.suspend("endless")
    assert service.resume("endless").status in ("STARTING", "RUNNING")
    assert service.restart("endless").status in ("STARTING", "RUNNING")
    cancelled = service.cancel(record.id_string)
    assert cancelled.status == "FAILED" and cancelled.cancelled
    with pytest.raises(jetlet.JetletError, match="already ended"):
        service.cancel("endless")


def test_given_a_suspended_job_when_cancelled_then_it_fails(service: job_service.EmbeddedJobService) -> None:
    service.submit(_endless("ticks2"), {"name": "s"})
    wait_until(lambda: service.get("s").status == "RUNNING", "running")
    service.suspend("s")
    record = service.cancel("s")
    assert record.status == "FAILED" and record.cancelled


def test_given_an_active_name_when_submitted_again_then_refused(
    service: job_service.EmbeddedJobService,
) -> None:
    service.submit(_endless("t3"), {"name": "dup"})
    with pytest.raises(jetlet.JetletError, match="already active"):
        service.submit(_endless("t3"), {"name": "dup"})
    service.cancel("dup")


@pytest.mark.parametrize(
    ("definition", "config", "field"),
    [
        (b"not a pickle", {}, "definition"),
        (cloudpickle.dumps(42), {}, "definition"),
        (_word_count(WORDS, "x"), {"nmae": "x"}, "config.nmae"),
        (_word_count(WORDS, "x"), {"timeout_millis": -1}, "config.timeout_millis"),
        (_word_count(WORDS, "x"), {"processing_guarantee": "SOMETIMES"}, "config.processing_guarantee"),
    ],
)
def test_given_a_bad_request_when_submitted_then_the_field_is_named(
    service: job_service.EmbeddedJobService, definition: bytes, config: dict[str, Any], field: str
) -> None:
    with pytest.raises(errors.InvalidJobError) as caught:
        service.submit(definition, config)
    assert caught.value.field == field


def test_given_an_unknown_job_then_unknown_job_error(service: job_service.EmbeddedJobService) -> None:
    with pytest.raises(errors.JobNotFoundError, match="nope"):
        service.get("nope")


def test_given_an_observable_when_read_from_positions_then_slices_follow(
    service: job_service.EmbeddedJobService,
) -> None:
    p = Pipeline()
    p.read_from(Sources.items(1, 2, 3)).write_to(Sinks.observable("obs"))
    service.join(service.submit(cloudpickle.dumps(p.to_dag()), {}).id_string, 10)
    first = service.observable_items("obs", 0, 1.0)
    assert sorted(first.items) == [1, 2, 3] and first.done and first.next_position == 3
    rest = service.observable_items("obs", 3, 1.0)
    assert rest.items == [] and rest.done
    empty = service.observable_items("never", 0, 0.01)
    assert empty.items == [] and not empty.done


def test_given_a_record_when_round_tripped_through_a_dict_then_equal(
    service: job_service.EmbeddedJobService,
) -> None:
    record = service.join(service.submit(_word_count(WORDS, "y"), {"arguments": {"k": 1}}).id_string, 10)
    assert records.JobRecord.from_dict(record.to_dict()) == record
    assert record.config["arguments"] == {"k": 1}
