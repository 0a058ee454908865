"""Following a cluster's job-event feed: which Events its entries become, and which JetJobs they concern.

The feed (``Client.events(since=..., timeout=...)``) reports every job
transition, snapshot, restart and member change once, with growing ids, so
the Events made from it are posted once. :func:`events_for` maps one feed
entry to the Events it deserves: on the JetCluster (``MemberLost``,
``MemberJoined``, ``CoordinatorChanged``) and on the JetJob of the job
(``JobRestarted``, ``JobRescaled``, ``SnapshotFailed``). Status changes of
jobs are reported by reconciling the JetJob, which the daemon does at once.
"""

from __future__ import annotations

from jetlet.records import EventKind, JobEvent

Event = tuple[str, str, str]


def events_for(event: JobEvent) -> tuple[list[Event], list[Event]]:
    """The Events for the JetCluster and for the event's JetJob (type, reason, message)."""
    on_cluster: list[Event] = []
    on_job: list[Event] = []
    if event.kind is EventKind.MEMBER_LEFT:
        on_cluster.append(("Warning", "MemberLost", f"member {event.member} left the cluster"))
    elif event.kind is EventKind.MEMBER_JOINED:
        on_cluster.append(("Normal", "MemberJoined", f"member {event.member} joined the cluster"))
    elif event.kind is EventKind.COORDINATOR_CHANGED:
        on_cluster.append(("Normal", "CoordinatorChanged", f"{event.member} coordinates the cluster"))
    elif event.kind is EventKind.JOB_RESTARTED:
        reason = event.reason or "restart"
        kind = "JobRescaled" if "scal" in reason.lower() or "join" in reason.lower() else "JobRestarted"
        members = event.details.get("members")
        on_job.append(
            ("Normal", kind, f"new execution ({reason})" + (f" on {members} members" if members else ""))
        )
    elif event.kind is EventKind.SNAPSHOT_FAILED:
        on_job.append(("Warning", "SnapshotFailed", event.reason or "a snapshot failed"))
    return on_cluster, on_job


def concerns_jobs(event: JobEvent) -> bool:
    """Whether the entry may change a JetJob's status (so the JetJobs are reconciled)."""
    return event.job_name != "" or event.kind in (EventKind.MEMBER_LEFT, EventKind.GAP)
