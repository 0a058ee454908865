"""A job is planned once, at submission, in the submitting process; restarts and rescales reuse the DAG.

The client plans a Pipeline before it sends anything (a planning error is
raised there, with the user's traceback), the cluster keeps the DAG in the
job record, and a member refuses anything but a planned DAG, so no member
can plan again. The planning is counted in the submitting process across a
member's death (a restart) and a member joining (a rescale).
"""

from __future__ import annotations

import os
import pathlib
import signal
from typing import Any

import cloudpickle
import pytest
from test_fault_tolerance import FAST_FAILURE, _config, _wait_for_snapshot, _windowed_count

from jetlet import ProcessingGuarantee, errors
from jetlet._cluster import job_service
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline
from jetlet.records import EventKind, JobEvent
from jetlet.testing import wait_until

pytestmark = pytest.mark.timeout(240)


def test_one_plan_per_submission_none_on_restart_or_rescale(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans: list[Pipeline] = []
    original = Pipeline.to_dag

    def counted(self: Pipeline) -> Any:
        plans.append(self)
        return original(self)

    monkeypatch.setattr(Pipeline, "to_dag", counted)
    args = [*FAST_FAILURE, "--scale-up-delay-millis", "300"]
    with local_cluster(3, args) as client:
        # given a job submitted as a Pipeline: planned once, here
        job = client.new_job(
            _windowed_count(str(tmp_path / "out"), 1000), _config(ProcessingGuarantee.EXACTLY_ONCE)
        )
        assert len(plans) == 1
        _wait_for_snapshot(client, job)
        # when a member dies (a restart) and another joins (a rescale)
        os.kill(client.pids[2], signal.SIGKILL)
        wait_until(lambda: client.get_job(job.id).record_status() == "RUNNING", "the restart", 60)  # type: ignore[union-attr]
        assert client.add_member is not None
        client.add_member()
        restarts: list[JobEvent] = []

        def rescaled() -> bool:
            since = restarts[-1].id if restarts else 0
            restarts.extend(e for e in client.events(since, 0.2) if e.kind is EventKind.JOB_RESTARTED)
            return any("joined" in e.reason for e in restarts)

        wait_until(rescaled, "the rescale onto the member that joined", 60)
        job.cancel()  # the job's output is not the point here: the plans are
        # then the job restarted and rescaled, and nothing was planned again
        assert len(restarts) >= 2, restarts
    assert len(plans) == 1


def test_a_member_refuses_anything_but_a_planned_dag() -> None:
    p = Pipeline()
    with pytest.raises(errors.InvalidJobError, match="must be a planned DAG, got Pipeline"):
        job_service.load_dag(cloudpickle.dumps(p))
    assert job_service.load_dag(cloudpickle.dumps(_windowed_count("unused").to_dag())).vertices()
