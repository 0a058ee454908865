"""The job-event feed on real member processes: every event of a job's life, in order, resumable.

One EXACTLY_ONCE job is followed through submission, snapshots, a member
killed with SIGKILL, the restart and completion; the same stream is read
again from an event id (as a reconnecting reader does), as server-sent
events with ``Last-Event-ID``, and after the coordinator itself is killed.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import urllib.request

import pytest
from test_fault_tolerance import FAST_FAILURE, _committed, _config, _wait_for_snapshot, _windowed_count

from jetlet import ProcessingGuarantee
from jetlet.client import connect
from jetlet.local_cluster import local_cluster
from jetlet.records import EventKind, JobEvent
from jetlet.testing import wait_until

pytestmark = pytest.mark.timeout(240)


def _until_status(events: list[JobEvent], job_id: int, status: str) -> bool:
    return any(e.kind is EventKind.JOB_STATUS and e.job_id == job_id and e.status == status for e in events)


def _sse(
    address: str, token: str, last_event_id: int, count: int
) -> list[tuple[int, str, dict[str, object]]]:
    """Read ``count`` server-sent events after ``last_event_id`` (as a browser's EventSource resumes)."""
    request = urllib.request.Request(
        f"http://{address}/events",
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "text/event-stream",
            "Last-Event-ID": str(last_event_id),
        },
    )
    found: list[tuple[int, str, dict[str, object]]] = []
    with urllib.request.urlopen(request, timeout=30) as stream:
        fields: dict[str, str] = {}
        for raw in stream:
            line = raw.decode().rstrip("\n")
            if line.startswith(":"):
                continue
            if line:
                key, _, value = line.partition(": ")
                fields[key] = value
                continue
            if "id" in fields:
                found.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
                if len(found) == count:
                    return found
            fields = {}
    return found


def test_one_jobs_life_is_in_the_feed_in_order_and_resumes_from_an_id(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    with local_cluster(3, FAST_FAILURE) as client:
        # given a job with snapshots, followed from a member that will stay
        reader = connect(client.addresses[1], client.token)
        job = client.new_job(_windowed_count(str(out)), _config(ProcessingGuarantee.EXACTLY_ONCE))
        _wait_for_snapshot(client, job)
        # when a member is killed, and the job runs to completion
        os.kill(client.pids[2], signal.SIGKILL)
        seen: list[JobEvent] = []
        for event in reader.events(timeout=120):
            seen.append(event)
            if _until_status(seen, job.id, "COMPLETED"):
                break
        # then the feed holds, in this order: submitted, running, a snapshot, the member left,
        # the restart, running again, completed; ids grow by one
        assert [e.id for e in seen] == list(range(1, len(seen) + 1))
        mine = [e for e in seen if e.job_id in (None, job.id)]
        order = [
            next(i for i, e in enumerate(mine) if e.kind is EventKind.JOB_STATUS and e.status == "STARTING"),
            next(i for i, e in enumerate(mine) if e.kind is EventKind.JOB_STATUS and e.status == "RUNNING"),
            next(i for i, e in enumerate(mine) if e.kind is EventKind.SNAPSHOT_COMPLETED),
            next(i for i, e in enumerate(mine) if e.kind is EventKind.MEMBER_LEFT),
            next(i for i, e in enumerate(mine) if e.kind is EventKind.JOB_RESTARTED),
            max(i for i, e in enumerate(mine) if e.kind is EventKind.JOB_STATUS and e.status == "RUNNING"),
            next(i for i, e in enumerate(mine) if e.kind is EventKind.JOB_STATUS and e.status == "COMPLETED"),
        ]
        assert order == sorted(order), [(e.kind.value, e.status) for e in mine]
        completed = next(e for e in mine if e.kind is EventKind.SNAPSHOT_COMPLETED)
        assert completed.details["bytes"] > 0 and completed.details["keys"] > 0
        # and a reader that reconnects from an id gets exactly the rest, as JSON and as server-sent events
        middle = seen[len(seen) // 2].id
        again = list(reader.events(since=middle, timeout=2))
        assert [e.id for e in again][: len(seen) - middle] == [e.id for e in seen if e.id > middle]
        streamed = _sse(client.addresses[1], client.token, middle, 3)
        assert [i for i, _, _ in streamed] == [middle + 1, middle + 2, middle + 3]
        assert [kind for _, kind, _ in streamed] == [e.kind.value for e in seen if e.id > middle][:3]
        # when the coordinator itself is killed
        last = seen[-1].id
        os.kill(client.pids[0], signal.SIGKILL)
        # then the next coordinator's feed goes on from the same ids, the take-over in it
        after: list[JobEvent] = []
        wait_until(
            lambda: (
                bool(after.extend(reader.events(since=last, timeout=1)) or after)
                and any(e.kind is EventKind.COORDINATOR_CHANGED for e in after)
            ),
            "the take-over in the feed",
            60,
        )
        resumed = list(reader.events(since=0, timeout=1))
        assert [e.id for e in resumed][: len(seen)] == [e.id for e in seen]
        assert [e.kind for e in resumed][: len(seen)] == [e.kind for e in seen]
    assert sum(_committed(out).values()) > 0
