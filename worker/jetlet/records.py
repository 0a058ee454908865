"""The records a cluster hands out: jobs, snapshots, the cluster view and job events.

One module holds every typed record that crosses the REST API, so that the
member that writes it, the client that reads it and the Kubernetes operator
that acts on it share one definition. Each record is a frozen dataclass with
``to_dict()`` (JSON-friendly: job ids as decimal strings, because JSON
numbers lose 64-bit integers) and ``from_dict()`` (which ignores fields it
does not know, so an older client reads a newer member's answer).

>>> from jetlet.records import JobEvent, EventKind
>>> event = JobEvent(7, 1_700_000_000_000, EventKind.JOB_STATUS, job_id=42, job_name="wc", status="RUNNING")
>>> JobEvent.from_dict(event.to_dict()) == event
True
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from jetlet import job

TERMINAL_STATUSES = frozenset({job.JobStatus.COMPLETED, job.JobStatus.FAILED})
"""The statuses a job never leaves (the one notion of "ended" every part of jetlet uses)."""


@dataclasses.dataclass(frozen=True)
class SnapshotInfo:
    """One complete snapshot of a job: what was stored and how long it took."""

    id: int
    time: int
    """When it started, milliseconds since the epoch."""
    bytes: int
    entries: int
    """Key/value entries stored, over every vertex."""
    duration_ms: int
    name: str = ""
    """The name of an exported (named) snapshot; empty for a job's own periodic one."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SnapshotInfo:
        return cls(**_known(cls, data))


@dataclasses.dataclass(frozen=True)
class JobRecord:
    """What is known about one job, as plain values."""

    id: int
    name: str
    status: job.JobStatus
    submission_time: int
    """Milliseconds since the epoch."""
    completion_time: int | None
    failure: str
    """The failure message (empty unless ``FAILED``)."""
    failure_traceback: str
    """The failing user code's traceback, as text."""
    cancelled: bool
    """``FAILED`` because it was cancelled."""
    config: dict[str, Any]
    dag_dot: str
    suspension_cause: str = ""
    """Why a ``SUSPENDED`` job is suspended."""
    snapshot: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The last complete snapshot (``id``, ``time``, ``bytes``, ``entries``, ``duration_ms``), ``count``."""
    restarts: int = 0
    """Executions started after the first (member loss, rescale, restart, resume)."""
    execution_id: int = 0
    """The current (or last) execution; members know executions, not jobs."""
    failure_cause: str = ""
    """The user's own exception of a failure, as base64 of its cloudpickle ('' if it did not pickle):
    a client that can unpickle it chains it as ``JobFailedError.__cause__``."""

    @property
    def id_string(self) -> str:
        return job.id_to_string(self.id)

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def last_snapshot(self) -> SnapshotInfo | None:
        """The last complete snapshot, typed (None before the first)."""
        return SnapshotInfo.from_dict(self.snapshot) if "id" in self.snapshot else None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dictionary (``id`` as a decimal string: JSON loses big integers)."""
        data = dataclasses.asdict(self)
        data["id"] = str(self.id)
        data["status"] = self.status.value
        data["execution_id"] = str(self.execution_id)
        data["id_string"] = self.id_string
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobRecord:
        values = _known(cls, data)
        values["id"] = int(values["id"])
        values["status"] = job.JobStatus(values["status"])
        values["execution_id"] = int(values.get("execution_id", 0))
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class MemberView:
    """One member as the cluster describes it."""

    name: str
    data_address: str
    rest_address: str
    is_coordinator: bool


@dataclasses.dataclass(frozen=True)
class ClusterView:
    """The cluster: its member list (oldest first), its coordinator and its partition table."""

    version: int
    members: tuple[MemberView, ...]
    coordinator: str
    partition_count: int
    partitions: dict[str, list[int]]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClusterView:
        table = data.get("partition_table") or {}
        return cls(
            version=int(data.get("version", 0)),
            members=tuple(MemberView(**_known(MemberView, m)) for m in data.get("members", [])),
            coordinator=str(data.get("coordinator", "")),
            partition_count=int(table.get("partition_count", 0)),
            partitions={k: list(v) for k, v in table.get("members", {}).items()},
        )


class EventKind(enum.StrEnum):
    """What a :class:`JobEvent` reports."""

    JOB_STATUS = "job_status"
    """A job changed status (``status``, ``previous_status``, ``reason``)."""
    JOB_RESTARTED = "job_restarted"
    """A new execution of a running job started (``reason``; ``details.members``)."""
    SNAPSHOT_STARTED = "snapshot_started"
    SNAPSHOT_COMPLETED = "snapshot_completed"
    """``details``: ``snapshot_id``, ``bytes``, ``keys``, ``duration_ms`` (from start to completion),
    ``store_ms`` (the slowest member's store of its part), ``terminal``."""
    SNAPSHOT_FAILED = "snapshot_failed"
    MEMBER_JOINED = "member_joined"
    MEMBER_LEFT = "member_left"
    COORDINATOR_CHANGED = "coordinator_changed"
    """A member took over as coordinator (``member``)."""
    GAP = "gap"
    """The reader fell behind the log's bound: ``details.missed`` events are gone."""


@dataclasses.dataclass(frozen=True)
class JobEvent:
    """One entry of the cluster's job-event feed; ``id`` grows by one per event."""

    id: int
    time: int
    """Milliseconds since the epoch."""
    kind: EventKind
    job_id: int | None = None
    job_name: str = ""
    status: str = ""
    previous_status: str = ""
    reason: str = ""
    member: str = ""
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["kind"] = self.kind.value
        data["job_id"] = None if self.job_id is None else str(self.job_id)
        if self.job_id is not None:
            data["job_id_string"] = job.id_to_string(self.job_id)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobEvent:
        values = _known(cls, data)
        values["kind"] = EventKind(values["kind"])
        if values.get("job_id") is not None:
            values["job_id"] = int(values["job_id"])
        return cls(**values)


def _known(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}
