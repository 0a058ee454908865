"""The job service: what the REST API asks of a member, and a one-member implementation.

Theory of operation
-------------------
The REST layer (``rest.py``) never touches the engine. It calls a
:class:`JobService`: submit a job definition (a cloudpickled, already
planned ``DAG``) with ``JobConfig`` fields, list and get jobs, wait for one
(``join``), cancel, suspend, resume, restart, read metrics, follow the job
event feed, and read the member's named lists, maps and observables.
Everything it returns is a plain value: :class:`~jetlet.records.JobRecord`
dataclasses, dictionaries of metrics, and Python data that the REST layer
serializes for the authenticated client. Refusals are the typed errors of
:mod:`jetlet.errors`. The cluster's job service (``cluster_service.py``)
implements the same protocol.

:class:`EmbeddedJobService` runs every job on one ``jetlet.embedded()``
instance, so a single member (or a member before the distributed
coordinator is wired) is fully functional. A job keeps its definition bytes;
each *execution* is a fresh ``new_job`` on the instance from a fresh
unpickling, so ``suspend`` cancels the execution and remembers the job as
``SUSPENDED``, ``resume`` starts a new execution, and ``restart`` does both.
An embedded member keeps no snapshots, so the job runs again from the
beginning. Job names are unique among active jobs; a cancelled job ends
``FAILED``, as in Jet. Job transitions are appended to an event log of its
own, so the event feed works on one member too.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import os
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

import cloudpickle

from jetlet import _embedded, config, errors, job, records
from jetlet._cluster import events as events_mod
from jetlet.core import dag as dag_mod

TERMINAL = records.TERMINAL_STATUSES
JobRecord = records.JobRecord
InvalidJobRequestError = errors.InvalidJobError
"""The name the REST layer's submission code uses for :class:`jetlet.errors.InvalidJobError`."""


@dataclasses.dataclass(frozen=True)
class ObservableSlice:
    """Items of an observable from a position on, and whether it has ended."""

    items: list[Any]
    next_position: int
    done: bool
    error: str


class JobService(Protocol):
    """The operations a member offers over REST. ``key`` is a job's id, id string or name."""

    def submit(self, definition: bytes, job_config: Mapping[str, Any]) -> JobRecord: ...

    def list_jobs(self) -> list[JobRecord]: ...

    def get(self, key: str) -> JobRecord: ...

    def join(self, key: str, timeout: float) -> JobRecord:
        """Wait up to ``timeout`` seconds for the job to end; return its record either way."""
        ...

    def cancel(self, key: str) -> JobRecord: ...

    def suspend(self, key: str) -> JobRecord: ...

    def resume(self, key: str) -> JobRecord: ...

    def restart(self, key: str) -> JobRecord: ...

    def metrics(self, key: str) -> dict[str, Any]:
        """``{"metrics": {"member/tasklet": {name: value}}, "samples": [{"name", "labels", "value"}]}``
        (:class:`jetlet.metrics.JobMetrics` on the wire)."""
        ...

    def export_snapshot(self, key: str, name: str, cancel: bool) -> dict[str, Any]:
        """Save the job's state as the named snapshot (then cancel it, with ``cancel``)."""
        ...

    def list_snapshots(self) -> list[dict[str, Any]]: ...

    def delete_snapshot(self, name: str) -> None: ...

    def get_list(self, name: str) -> list[Any]: ...

    def get_map(self, name: str) -> dict[Any, Any]: ...

    def destroy(self, kind: str, name: str) -> None:
        """Delete the named ``list`` or ``map`` (a later read finds it empty)."""
        ...

    def observable_items(self, name: str, from_position: int, timeout: float) -> ObservableSlice:
        """Items from ``from_position``; waits up to ``timeout`` s for one when there is none yet."""
        ...

    def events(self, since: int, timeout: float) -> concurrent.futures.Future[events_mod.EventsPage]:
        """The job events after ``since``, once there is one (the caller bounds the wait by ``timeout``)."""
        ...

    def close(self) -> None: ...


_CONFIG_FIELDS = {f.name for f in dataclasses.fields(config.JobConfig)}
_RETIRED_CONFIG_FIELDS: dict[str, object] = {"max_processor_accumulated_records": -1}
"""Fields JobConfig no longer has, with the value that asked for nothing: records written before
(a snapshot directory, an older client) still load; any other value is refused, not ignored."""


def job_config_from_dict(data: Mapping[str, Any]) -> config.JobConfig:
    """A ``JobConfig`` from JSON fields; raises :class:`InvalidJobRequestError` naming a bad field."""
    if not isinstance(data, Mapping):
        raise errors.InvalidJobError("config", "must be an object of JobConfig fields")
    values = {k: v for k, v in data.items() if _RETIRED_CONFIG_FIELDS.get(k, ...) != v}
    for key in values:
        if key not in _CONFIG_FIELDS:
            raise errors.InvalidJobError(f"config.{key}", "is not a JobConfig field")
    guarantee = values.get("processing_guarantee")
    if guarantee is not None:
        try:
            values["processing_guarantee"] = config.ProcessingGuarantee(guarantee)
        except ValueError:
            raise errors.InvalidJobError(
                "config.processing_guarantee",
                f"must be one of NONE, AT_LEAST_ONCE, EXACTLY_ONCE: {guarantee!r}",
            ) from None
    try:
        return config.JobConfig(**values)
    except (ValueError, TypeError) as exc:
        field = next((k for k in values if k in str(exc)), "")
        raise errors.InvalidJobError(f"config.{field}" if field else "config", str(exc)) from None


def job_config_to_dict(job_config: config.JobConfig) -> dict[str, Any]:
    data = {f.name: getattr(job_config, f.name) for f in dataclasses.fields(job_config)}
    data["processing_guarantee"] = job_config.processing_guarantee.value
    data["arguments"] = dict(job_config.arguments)
    return data


def load_dag(definition: bytes) -> dag_mod.DAG:
    """The planned DAG of a job definition (a member unpickles DAGs only: planning happened once, before)."""
    try:
        loaded = cloudpickle.loads(definition)
    except Exception as exc:
        raise errors.InvalidJobError(
            "definition", f"cannot be unpickled: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(loaded, dag_mod.DAG):
        raise errors.InvalidJobError("definition", f"must be a planned DAG, got {type(loaded).__qualname__}")
    return loaded


class _ServiceJob:
    """One submitted job and its current execution on the embedded instance."""

    def __init__(self, job_id: int, name: str, definition: bytes, job_config: config.JobConfig) -> None:
        self.id = job_id
        self.name = name
        self.definition = definition
        self.config = job_config
        self.submission_time = int(time.time() * 1000)
        self.execution: _embedded.EmbeddedJob | None = None
        self.suspended = False
        self.dag_dot = ""

    def status(self) -> job.JobStatus:
        if self.suspended:
            return job.JobStatus.SUSPENDED
        if self.execution is None:
            return job.JobStatus.NOT_RUNNING
        if self.execution.status.is_terminal and not self.execution.future.done():
            return job.JobStatus.COMPLETING
        return self.execution.status

    def record(self) -> JobRecord:
        failure, trace, cancelled = "", "", False
        execution = self.execution
        status = self.status()
        if execution is not None and status is job.JobStatus.FAILED:
            error = execution.future.exception(0)
            cancelled = isinstance(error, errors.JobCancelledError)
            failure = str(error.args[0]) if error is not None and error.args else repr(error)
            trace = getattr(error, "remote_traceback", "")
        return JobRecord(
            id=self.id,
            name=self.name,
            status=status,
            submission_time=self.submission_time,
            completion_time=execution.completion_time
            if execution is not None and not self.suspended
            else None,
            failure=failure,
            failure_traceback=trace,
            cancelled=cancelled,
            config=job_config_to_dict(self.config),
            dag_dot=self.dag_dot,
        )


class EmbeddedJobService:
    """A :class:`JobService` that runs every job on one embedded instance (a one-member cluster)."""

    def __init__(self, instance: _embedded.EmbeddedInstance) -> None:
        self.instance = instance
        self._jobs: dict[int, _ServiceJob] = {}
        self._ids = itertools.count(int.from_bytes(os.urandom(6), "big") << 16)
        self._changed = threading.Condition()
        self.event_log = events_mod.EventLog()

    def _announce(self, entry: _ServiceJob, reason: str = "") -> None:
        status = entry.status()
        self.event_log.append(
            records.EventKind.JOB_STATUS,
            job_id=entry.id,
            job_name=entry.name,
            status=status.value,
            reason=reason,
        )

    def submit(self, definition: bytes, job_config: Mapping[str, Any]) -> JobRecord:
        parsed = job_config_from_dict(job_config)
        if parsed.initial_snapshot_name:  # an embedded member keeps no snapshots
            raise errors.InvalidJobError(
                "config.initial_snapshot_name",
                f"no snapshot named {parsed.initial_snapshot_name!r} exists in this cluster",
            )
        dag = load_dag(definition)
        dag.validate()
        with self._changed:
            if parsed.name is not None and any(
                j.name == parsed.name and j.status() not in TERMINAL for j in self._jobs.values()
            ):
                raise errors.JobStateConflictError(f"a job named {parsed.name!r} is already active")
            job_id = next(self._ids)
            entry = _ServiceJob(job_id, parsed.name or job.id_to_string(job_id), definition, parsed)
            entry.dag_dot = dag.to_dot()
            self._jobs[job_id] = entry
            self._start(entry, dag)
        self._announce(entry, "submitted")
        return entry.record()

    def _start(self, entry: _ServiceJob, dag: dag_mod.DAG) -> None:
        execution_config = dataclasses.replace(entry.config, name=None)
        execution = self.instance.new_job(dag, execution_config)
        entry.execution = execution
        entry.suspended = False
        execution.future.add_done_callback(lambda _: self._ended(entry, execution))

    def _ended(self, entry: _ServiceJob, execution: _embedded.EmbeddedJob) -> None:
        if entry.execution is execution and not entry.suspended:
            self._announce(entry, "the execution ended")
        self._notify()

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _find(self, key: str) -> _ServiceJob:
        with self._changed:
            if key.isdigit() and int(key) in self._jobs:
                return self._jobs[int(key)]
            named = [j for j in self._jobs.values() if key in (j.name, job.id_to_string(j.id))]
        if not named:
            raise errors.JobNotFoundError(f"no job with id or name {key!r}")
        return max(named, key=lambda j: j.submission_time)

    def list_jobs(self) -> list[JobRecord]:
        with self._changed:
            entries = sorted(self._jobs.values(), key=lambda j: j.submission_time)
        return [e.record() for e in entries]

    def get(self, key: str) -> JobRecord:
        return self._find(key).record()

    def join(self, key: str, timeout: float) -> JobRecord:
        entry = self._find(key)
        with self._changed:
            self._changed.wait_for(lambda: entry.status() in TERMINAL, timeout)
        return entry.record()

    def cancel(self, key: str) -> JobRecord:
        entry = self._find(key)
        with self._changed:
            if entry.status() in TERMINAL:
                raise errors.JobStateConflictError(f"job {entry.name!r} has already ended ({entry.status()})")
            if entry.suspended:
                entry.suspended = False
                self._changed.notify_all()
            elif entry.execution is not None:
                entry.execution.cancel()
        return self.join(key, 10.0)

    def _stop_execution(self, entry: _ServiceJob) -> None:
        execution = entry.execution
        if execution is None:
            return
        execution.cancel()
        with self._changed:
            self._changed.wait_for(lambda: execution.status.is_terminal, 10.0)

    def suspend(self, key: str) -> JobRecord:
        entry = self._find(key)
        if entry.status() is not job.JobStatus.RUNNING:
            raise errors.JobStateConflictError(
                f"job {entry.name!r} is not running ({entry.status()}), cannot suspend"
            )
        entry.suspended = True
        self._stop_execution(entry)
        self._announce(entry, "suspended by the user")
        self._notify()
        return entry.record()

    def resume(self, key: str) -> JobRecord:
        entry = self._find(key)
        with self._changed:
            if not entry.suspended:
                raise errors.JobStateConflictError(f"job {entry.name!r} is not suspended ({entry.status()})")
            self._start(entry, load_dag(entry.definition))
        self._announce(entry, "resumed")
        return entry.record()

    def restart(self, key: str) -> JobRecord:
        entry = self._find(key)
        if entry.status() is not job.JobStatus.RUNNING:
            raise errors.JobStateConflictError(
                f"job {entry.name!r} is not running ({entry.status()}), cannot restart"
            )
        entry.suspended = True
        self._stop_execution(entry)
        with self._changed:
            self._start(entry, load_dag(entry.definition))
            return entry.record()

    def export_snapshot(self, key: str, name: str, cancel: bool) -> dict[str, Any]:
        self._find(key)
        raise errors.JetletError(
            "an embedded member keeps no snapshots: run jobs on a cluster to export them"
        )

    def list_snapshots(self) -> list[dict[str, Any]]:
        return []

    def delete_snapshot(self, name: str) -> None:
        raise errors.JobNotFoundError(f"no snapshot named {name!r}")

    def metrics(self, key: str) -> dict[str, Any]:
        execution = self._find(key).execution
        return execution.metrics().to_wire() if execution is not None else {"metrics": {}, "samples": []}

    def get_list(self, name: str) -> list[Any]:
        with self.instance.store.lock:
            return list(self.instance.get_list(name))

    def get_map(self, name: str) -> dict[Any, Any]:
        with self.instance.store.lock:
            return dict(self.instance.get_map(name))

    def destroy(self, kind: str, name: str) -> None:
        if kind == "list":
            self.instance.destroy_list(name)
        else:
            self.instance.destroy_map(name)

    def observable_items(self, name: str, from_position: int, timeout: float) -> ObservableSlice:
        return read_observable(self.instance, name, from_position, timeout)

    def events(self, since: int, timeout: float) -> concurrent.futures.Future[events_mod.EventsPage]:
        return self.event_log.read_async(since)

    def close(self) -> None:
        self.event_log.close()
        self.instance.shutdown()


def read_observable(
    instance: _embedded.EmbeddedInstance, name: str, from_position: int, timeout: float
) -> ObservableSlice:
    """The items of ``instance``'s observable from a position on, waiting up to ``timeout`` s for news."""
    observable = instance.get_observable(name)
    news = threading.Event()
    failure: list[BaseException] = []

    def on_error(error: BaseException) -> None:
        failure.append(error)
        news.set()

    observer = observable.add_observer(lambda _: news.set(), on_error, news.set)
    try:
        if len(observable.items()) <= from_position and not observable.is_done:
            news.wait(timeout)
    finally:
        observable.remove_observer(observer)
    items = observable.items()[from_position:]
    done = observable.is_done
    return ObservableSlice(items, from_position + len(items), done, str(failure[0]) if failure else "")
