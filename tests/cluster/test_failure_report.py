"""A job that fails on a cluster is reported once, in the user's own terms (issue 16, item 4).

The message names the job by its id string (the CLI's format), the stage and
the user's exception, once; the traceback holds the user's frames and none of
jetlet's, once; and the user's exception, which unpickles in the submitting
process, is chained as ``__cause__`` as in the embedded instance.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import jetlet
from jetlet import Pipeline, Sinks, Sources, errors
from jetlet.local_cluster import local_cluster

pytestmark = pytest.mark.timeout(120)


class BadItemError(ValueError):
    """The user's own exception type (defined here: it must come back as itself)."""


def _boom(item: int) -> int:
    if item == 3:
        raise BadItemError(f"bad item {item}")
    return item


def _failing() -> Pipeline:
    p = Pipeline()
    p.read_from(Sources.items(1, 2, 3, 4)).map(_boom).write_to(Sinks.list("failed-out"))
    return p


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with local_cluster(2) as client:
        yield client


def test_a_failure_on_a_cluster_says_it_once_with_the_users_frames_and_cause(cluster: Any) -> None:
    job = cluster.new_job(_failing())
    with pytest.raises(errors.JobFailedError) as caught:
        job.join(60)
    failure = caught.value
    text = str(failure)
    # the message: once, naming the job by its id string and the stage, then the user's error
    assert text.count("bad item 3") == 2  # the message line and the traceback's last line
    assert job.id_string in text and str(job.id) not in text
    assert "map" in text.splitlines()[0] and "BadItemError: bad item 3" in text.splitlines()[0]
    # the traceback: the user's frame, none of jetlet's, once
    trace = failure.remote_traceback
    assert "in _boom" in trace and "test_failure_report.py" in trace
    assert "jetlet/" not in trace, trace
    assert trace.count("Traceback (most recent call last)") == 1
    # the user's own exception, as __cause__
    assert isinstance(failure.__cause__, BadItemError) and str(failure.__cause__) == "bad item 3"


def test_the_embedded_instance_reports_the_same_way() -> None:
    with jetlet.embedded() as jet, pytest.raises(errors.JobFailedError) as caught:
        jet.new_job(_failing()).join()
    assert isinstance(caught.value.__cause__, BadItemError)
    assert "jetlet/" not in caught.value.remote_traceback
    assert "in _boom" in caught.value.remote_traceback
