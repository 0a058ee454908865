"""The embedded instance: a whole jetlet member inside the calling process.

``jetlet.embedded()`` starts a tasklet execution service (the cooperative
worker threads) and runs every submitted job's DAG on it, as a one-member
cluster. Nothing leaves the process, so it is also what tests and notebooks
use. ``shutdown()`` (or leaving the ``with`` block) cancels running jobs and
stops every thread it started.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import logging
import os
import threading
import time
from typing import Any

from jetlet import _store, config, errors, observable
from jetlet import job as job_mod
from jetlet._execution import execution_plan, execution_service
from jetlet._metrics import samples
from jetlet.core import dag as dag_mod
from jetlet.metrics import job_metrics

_log = logging.getLogger(__name__)

EMBEDDED_MEMBER = "embedded"
"""The ``member`` label of an embedded instance's measurements."""


def _as_dag(definition: Any) -> dag_mod.DAG:
    if isinstance(definition, dag_mod.DAG):
        return definition
    to_dag = getattr(definition, "to_dag", None)
    if callable(to_dag):
        dag = to_dag()
        if isinstance(dag, dag_mod.DAG):
            return dag
    raise TypeError(f"new_job() needs a DAG or a Pipeline, got {type(definition).__qualname__}")


class EmbeddedJob(job_mod.Job):
    """A job running in an :class:`EmbeddedInstance`."""

    def __init__(self, job_id: int, name: str, dag: dag_mod.DAG, job_config: config.JobConfig) -> None:
        self._id = job_id
        self._name = name
        self.dag = dag
        self.config = job_config
        self._status = job_mod.JobStatus.NOT_RUNNING
        self._submission_time = int(time.time() * 1000)
        self.completion_time: int | None = None
        self.start_time = 0
        self.tracker = execution_service.ExecutionTracker(name, self._on_done)
        self.plan: execution_plan.ExecutionPlan | None = None
        """The running execution; None before it starts and once it ended (its final metrics are kept)."""
        self._final_metrics: job_metrics.JobMetrics | None = None
        self._timer: threading.Timer | None = None

    @property
    def id(self) -> int:
        return self._id

    @property
    def name(self) -> str:
        return self._name

    @property
    def status(self) -> job_mod.JobStatus:
        return self._status

    @property
    def submission_time(self) -> int:
        return self._submission_time

    @property
    def future(self) -> concurrent.futures.Future[None]:
        return self.tracker.future

    def cancel(self) -> None:
        if not self._status.is_terminal:
            self.tracker.cancel()

    def _start(self, instance: EmbeddedInstance) -> None:
        self._status = job_mod.JobStatus.STARTING
        try:
            self.plan = execution_plan.build(
                self.dag,
                self._id,
                self._name,
                self.config,
                instance.config,
                member_index=0,
                member_count=1,
                data_store=instance.store,
            )
        except BaseException as exc:
            self.tracker.fail(exc, "planning")
            self.tracker.expect(1)
            self.tracker.tasklet_finished()
            return
        if self.config.timeout_millis:
            self._timer = threading.Timer(self.config.timeout_millis / 1000, self._time_out)
            self._timer.daemon = True
            self._timer.start()
        self._status = job_mod.JobStatus.RUNNING
        self.start_time = int(time.time() * 1000)
        instance.service.submit(self.plan.all_tasklets(), self.tracker)

    def _time_out(self) -> None:
        self.tracker.cancel(f"ran past its timeout of {self.config.timeout_millis} ms")

    def _on_done(self, error: BaseException | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            if self._timer is not threading.current_thread():
                self._timer.join()
        plan = self.plan
        if plan is not None:
            plan.close_suppliers(error)
        self.completion_time = int(time.time() * 1000)
        self._status = job_mod.JobStatus.FAILED if error is not None else job_mod.JobStatus.COMPLETED
        if plan is not None:
            # The instance keeps its jobs (their status, their metrics); not their executions: the
            # tasklets, queues and processors' state of every finished job stayed reachable before.
            self._final_metrics = self._measure(plan)
            self.plan = None

    def metrics(self) -> job_metrics.JobMetrics:
        """The job's measurements (:mod:`jetlet._metrics.samples`, ``member="embedded"``); it also reads as
        the mapping of tasklet name to its counters (:meth:`ProcessorTasklet.metrics`)."""
        plan = self.plan
        if plan is None:
            return self._final_metrics if self._final_metrics is not None else job_metrics.JobMetrics(())
        return self._measure(plan)

    def _measure(self, plan: execution_plan.ExecutionPlan) -> job_metrics.JobMetrics:
        labels = {
            "job_id": self.id_string,
            "job_name": self._name,
            "execution": self.id_string,
            "member": EMBEDDED_MEMBER,
        }
        view = samples.ExecutionView(
            labels, plan, start_time_ms=self.start_time, completion_time_ms=self.completion_time or 0
        )
        legacy = {t.name: t.metrics() for t in plan.tasklets}
        return job_metrics.JobMetrics(samples.execution_measurements(view), legacy)


class EmbeddedInstance:
    """A one-member jetlet cluster inside this process.

    >>> import jetlet
    >>> from jetlet.core import DAG, Edge, processors
    >>> out = []
    >>> dag = DAG()
    >>> src = dag.new_vertex("src", processors.source_from_iterable(range(5)))
    >>> sink = dag.new_vertex("sink", processors.list_sink_p(out))
    >>> _ = dag.edge(Edge.between(src, sink))
    >>> with jetlet.embedded() as jet:
    ...     jet.new_job(dag).join()
    >>> sorted(out)
    [0, 1, 2, 3, 4]
    """

    def __init__(self, instance_config: config.InstanceConfig | None = None) -> None:
        self.config = instance_config or config.InstanceConfig()
        self.service = execution_service.TaskletExecutionService(self.config.cooperative_thread_count)
        self._jobs: dict[int, EmbeddedJob] = {}
        self._ids = itertools.count(int.from_bytes(os.urandom(6), "big") << 16)
        self._lock = threading.Lock()
        self._closed = False
        self.store = _store.DataStore()

    def new_job(self, definition: Any, job_config: config.JobConfig | None = None) -> EmbeddedJob:
        """Submit a DAG (or a Pipeline) and start it; returns at once with the job handle."""
        if self._closed:
            raise errors.JetletError("this instance is shut down")
        job_config = job_config or config.JobConfig()
        snapshot = job_config.initial_snapshot_name
        if snapshot:
            raise errors.JetletError(
                f"JobConfig.initial_snapshot_name: no snapshot named {snapshot!r} exists"
            )
        dag = _as_dag(definition)
        dag.validate()
        with self._lock:
            job_id = next(self._ids)
            name = job_config.name or job_mod.id_to_string(job_id)
            if job_config.name is not None and any(
                j.name == name and not j.status.is_terminal for j in self._jobs.values()
            ):
                raise errors.JetletError(f"a job named {name!r} is already active")
            job = EmbeddedJob(job_id, name, dag, job_config)
            self._jobs[job_id] = job
        job._start(self)
        return job

    def get_job(self, key: int | str) -> EmbeddedJob | None:
        """The job with this id or name (the newest, for a reused name), or None."""
        with self._lock:
            if isinstance(key, int):
                return self._jobs.get(key)
            named = [j for j in self._jobs.values() if j.name == key or j.id_string == key]
        return max(named, key=lambda j: j.submission_time) if named else None

    def get_list(self, name: str) -> list[Any]:
        """A copy of the named list that ``Sinks.list(name)`` writes and ``Sources.list(name)`` reads.

        A copy, as a cluster client's: call again to see what was added since.
        """
        return self.store.read_list(name)

    def get_map(self, name: str) -> dict[Any, Any]:
        """A copy of the named map that ``Sinks.map(name)`` writes (call again to see later writes)."""
        return self.store.read_map(name)

    def destroy_list(self, name: str) -> None:
        """Delete the named list (a later ``get_list`` is empty), e.g. before running a job again."""
        self.store.destroy_list(name)

    def destroy_map(self, name: str) -> None:
        """Delete the named map (a later ``get_map`` is empty)."""
        self.store.destroy_map(name)

    def get_observable(self, name: str) -> observable.Observable[Any]:
        """The named observable that ``Sinks.observable(name)`` publishes to."""
        return self.store.get_observable(name)

    def get_jobs(self) -> list[EmbeddedJob]:
        with self._lock:
            return list(self._jobs.values())

    def shutdown(self) -> None:
        """Cancel running jobs and stop every thread this instance started."""
        if self._closed:
            return
        self._closed = True
        for job in self.get_jobs():
            job.cancel()
        for job in self.get_jobs():
            with contextlib.suppress(errors.JetletError, concurrent.futures.TimeoutError):
                job.join(timeout=10)
        self.service.shutdown()

    def __enter__(self) -> EmbeddedInstance:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()


def embedded(instance_config: config.InstanceConfig | None = None, **settings: Any) -> EmbeddedInstance:
    """Start an in-process instance; ``settings`` are ``InstanceConfig`` fields.

    >>> with embedded(cooperative_thread_count=2) as jet:
    ...     jet.config.cooperative_thread_count
    2
    """
    if instance_config is not None and settings:
        raise TypeError("pass either an InstanceConfig or keyword settings, not both")
    return EmbeddedInstance(instance_config or config.InstanceConfig(**settings))
