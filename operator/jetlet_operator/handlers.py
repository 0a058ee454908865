"""The kopf handlers: thin adapters from kopf's calls to :mod:`jetlet_operator.reconcile`.

Importing this module registers the handlers with kopf (``kopf run -m
jetlet_operator.handlers``, or ``python -m jetlet_operator``). Each handler
passes the resource to one reconcile function, writes the status it returns
into kopf's ``patch``, posts its Events with ``kopf.event``, and turns
"look again later" into ``kopf.TemporaryError(delay=...)`` and an invalid
spec into ``kopf.PermanentError`` (kopf stops retrying that generation).

* JetCluster: create/update/resume apply the owned objects and observe the
  members; a timer observes again as a safety net; a daemon per cluster
  follows its job-event feed and reconciles the JetJobs a feed entry
  concerns at once, posting ``MemberLost``, ``JobRestarted``... Events.
* JetJob: create/update/resume and a timer reconcile; deletion runs the
  finalizer ``jetlet.io/finalizer``, which cancels the job (bounded).
* JetJobSnapshot: create/resume and a timer export once.

Every reconciliation is counted and timed, and the statuses written are
noted, for the operator's own metrics (:mod:`jetlet_operator.metrics`),
served with ``/healthz`` on the ``metrics_port`` when ``python -m
jetlet_operator`` runs the operator (:attr:`_State.serve_port`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

import kopf

from jetlet import client as client_mod
from jetlet import errors
from jetlet.records import EventKind, JobEvent
from jetlet_operator import builders, feed, jobs, kube, metrics, reconcile
from jetlet_operator import settings as settings_mod

_log = logging.getLogger("jetlet_operator")
GROUP, VERSION = builders.GROUP, builders.VERSION
FINALIZER = "jetlet.io/finalizer"
FEED_WAIT_S = 8.0
"""Longest wait for news from a cluster's feed before the daemon checks that it should go on."""
SETTINGS = settings_mod.from_environ(os.environ)
"""The operator's settings (``JETLET_OPERATOR_*``), read when the handlers are imported."""


class _State:
    api: kube.KubeAccess | None = None
    serve_port: int | None = None
    """Serve ``/metrics`` and ``/healthz`` on this port (0: any) from start-up; None: not at all."""
    served: contextlib.AsyncExitStack | None = None


STATE = _State()


def _api() -> kube.KubeAccess:
    if STATE.api is None:
        raise kopf.TemporaryError("the Kubernetes API client is not set up yet", delay=1)
    return STATE.api


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """kopf's settings: our finalizer, progress in annotations under jetlet.io, quiet retries."""
    settings.persistence.finalizer = FINALIZER
    # No dynamic scanning of CRDs and namespaces: it needs cluster-wide list/watch on both, which
    # the operator's RBAC (operator/deploy/rbac.yaml) does not grant; without the permission
    # kopf retries for about a minute before it starts. The CRDs exist before the operator does.
    settings.scanning.disabled = True
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="jetlet.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="jetlet.io")
    settings.posting.level = logging.WARNING  # Events are ours: kopf posts only its warnings
    settings.watching.server_timeout = 60
    settings.networking.request_timeout = 30
    if STATE.api is None:
        STATE.api = await kube.KubeApi.connect(os.environ.get("JETLET_OPERATOR_TEST_API", ""))
    if STATE.serve_port is not None and STATE.served is None:
        STATE.served = contextlib.AsyncExitStack()
        port = await STATE.served.enter_async_context(
            metrics.serve(STATE.serve_port, lambda: STATE.api is not None)
        )
        _log.info("serving /metrics and /healthz on port %d", port)


@kopf.on.cleanup()
async def close(**_: Any) -> None:
    if STATE.served is not None:
        await STATE.served.aclose()
        STATE.served = None
    if isinstance(STATE.api, kube.KubeApi):
        await STATE.api.close()
    STATE.api = None


def _post(body: Mapping[str, Any], events: list[reconcile.Event]) -> None:
    for kind, reason, message in events:
        kopf.event(body, type=kind, reason=reason, message=message[:1024])  # type: ignore[arg-type]


def _note(kind: str, body: Mapping[str, Any], status: Mapping[str, Any]) -> None:
    metadata = body["metadata"]
    metrics.note_status(kind, metadata.get("namespace", ""), metadata["name"], status)


def _finish(outcome: reconcile.Outcome, body: Mapping[str, Any], patch: kopf.Patch) -> None:
    """Write the status, post the Events, and turn the outcome into kopf's retry or stop."""
    patch.status.update(outcome.status)
    _post(body, outcome.events)
    if outcome.invalid:
        raise kopf.PermanentError(outcome.invalid)
    if outcome.retry_after is not None:
        raise kopf.TemporaryError(outcome.waiting or "waiting", delay=outcome.retry_after)


# ---------------------------------------------------------------------------------------- JetCluster


@kopf.on.create(GROUP, VERSION, "jetclusters")
@kopf.on.update(GROUP, VERSION, "jetclusters", field="spec")
@kopf.on.resume(GROUP, VERSION, "jetclusters")
async def cluster_changed(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    """Apply the cluster's objects; observe it until its members are ready."""
    with metrics.reconciling("JetCluster"):
        outcome = await reconcile.reconcile_cluster(body, _api(), SETTINGS)
        _note("JetCluster", body, outcome.status)
        _finish(outcome, body, patch)


@kopf.timer(GROUP, VERSION, "jetclusters", interval=SETTINGS.resync_seconds, idle=2)
async def cluster_resync(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    """Safety net: observe the members again."""
    with metrics.reconciling("JetCluster"):
        outcome = await reconcile.observe_cluster(body, _api(), SETTINGS)
        _note("JetCluster", body, outcome.status)
        patch.status.update(outcome.status)
        _post(body, outcome.events)


@kopf.on.delete(GROUP, VERSION, "jetclusters", optional=True)
async def cluster_deleted(body: kopf.Body, **_: Any) -> None:
    """The cluster goes (its objects with it, by owner references): it counts no more."""
    metrics.forget("JetCluster", body["metadata"].get("namespace", ""), body["metadata"]["name"])


@kopf.daemon(GROUP, VERSION, "jetclusters", cancellation_timeout=5)
async def follow_events(**kw: Any) -> None:
    """Follow the cluster's job-event feed; reconcile the JetJobs an entry concerns, post its Events."""
    name, namespace, body, stopped = kw["name"], kw["namespace"], kw["body"], kw["stopped"]
    since = -1
    feed_iter: Iterator[JobEvent] | None = None
    while not stopped:
        access = await reconcile.cluster_access(_api(), namespace, name, SETTINGS.rest_port)
        if not access.state.ready:
            await asyncio.sleep(2)
            continue
        try:
            client = await asyncio.to_thread(jobs.connect, access.addresses, access.token, 10)
            if since < 0:  # start at the feed's end: what happened before was reconciled on start-up
                since = await asyncio.to_thread(_last_id, client)
            feed_iter = client.events(since=since, timeout=FEED_WAIT_S)
            while not stopped:
                event = await asyncio.to_thread(next, feed_iter, None)
                if event is None:
                    break
                since = event.id
                await _on_feed_event(name, namespace, body, event)
        except errors.JetletError as exc:
            _log.info("JetCluster %s/%s: the event feed broke (%s); following again", namespace, name, exc)
            await asyncio.sleep(1)


def _last_id(client: client_mod.Client) -> int:
    last = 0
    for event in client.events(since=0, timeout=0.01):
        last = event.id
    return last


async def _on_feed_event(cluster: str, namespace: str, body: Mapping[str, Any], event: JobEvent) -> None:
    on_cluster, on_job = feed.events_for(event)
    _post(body, on_cluster)
    if not feed.concerns_jobs(event):
        return
    api = _api()
    for jetjob in await api.list("JetJob", namespace):
        spec, metadata = jetjob.get("spec") or {}, jetjob["metadata"]
        if spec.get("clusterRef") != cluster or metadata.get("deletionTimestamp"):
            continue
        job_name = spec.get("name") or metadata["name"]
        if event.kind is not EventKind.MEMBER_LEFT and event.job_name not in ("", job_name):
            continue
        _post(jetjob, on_job)
        outcome = await reconcile.reconcile_job(
            metadata["name"],
            namespace,
            spec,
            jetjob.get("status") or {},
            int(metadata.get("generation", 1)),
            api,
            SETTINGS,
        )
        _post(jetjob, outcome.events)  # reconcile_job wrote the status


# ---------------------------------------------------------------------------------------- JetJob


@kopf.on.create(GROUP, VERSION, "jetjobs")
@kopf.on.update(GROUP, VERSION, "jetjobs", field="spec")
@kopf.on.resume(GROUP, VERSION, "jetjobs")
async def job_changed(**kw: Any) -> None:
    """Reconcile the JetJob: submit, suspend, resume, cancel, restart or upgrade its job."""
    name, namespace, body, patch = kw["name"], kw["namespace"], kw["body"], kw["patch"]
    spec, status, meta = kw["spec"], kw["status"], kw["meta"]
    with metrics.reconciling("JetJob"):
        outcome = await reconcile.reconcile_job(
            name, namespace, dict(spec), dict(status), int(meta.get("generation", 1)), _api(), SETTINGS
        )
        metrics.note_status("JetJob", namespace, name, outcome.status)
        _finish(dataclasses.replace(outcome, status={}), body, patch)  # reconcile_job wrote the status


@kopf.timer(GROUP, VERSION, "jetjobs", interval=SETTINGS.resync_seconds, idle=2)
async def job_resync(**kw: Any) -> None:
    """Safety net (the feed is the main path): reconcile again."""
    name, namespace, body = kw["name"], kw["namespace"], kw["body"]
    spec, status, meta = kw["spec"], kw["status"], kw["meta"]
    with metrics.reconciling("JetJob"):
        outcome = await reconcile.reconcile_job(
            name, namespace, dict(spec), dict(status), int(meta.get("generation", 1)), _api(), SETTINGS
        )
        metrics.note_status("JetJob", namespace, name, outcome.status)
        _post(body, outcome.events)  # reconcile_job wrote the status


@kopf.on.delete(GROUP, VERSION, "jetjobs")
async def job_deleted(**kw: Any) -> None:
    """The finalizer: cancel the job, bounded; never holds the JetJob when the cluster is gone."""
    name, namespace, spec, body = kw["name"], kw["namespace"], kw["spec"], kw["body"]
    with metrics.reconciling("JetJob"):
        events = await reconcile.finalize_job(name, namespace, dict(spec), _api(), SETTINGS)
        metrics.forget("JetJob", namespace, name)
        _post(body, events)


# ---------------------------------------------------------------------------------------- JetJobSnapshot


@kopf.on.create(GROUP, VERSION, "jetjobsnapshots")
@kopf.on.resume(GROUP, VERSION, "jetjobsnapshots")
async def snapshot_created(**kw: Any) -> None:
    """Export the snapshot once its JetJob's job runs."""
    name, namespace, body, patch = kw["name"], kw["namespace"], kw["body"], kw["patch"]
    spec, status, meta = kw["spec"], kw["status"], kw["meta"]
    with metrics.reconciling("JetJobSnapshot"):
        outcome = await reconcile.reconcile_snapshot(
            name, namespace, dict(spec), dict(status), int(meta.get("generation", 1)), _api(), SETTINGS
        )
        metrics.note_status("JetJobSnapshot", namespace, name, outcome.status)
        _finish(outcome, body, patch)


@kopf.on.delete(GROUP, VERSION, "jetjobsnapshots", optional=True)
async def snapshot_deleted(body: kopf.Body, **_: Any) -> None:
    """The snapshot resource goes: it counts no more (the exported snapshot stays in its cluster)."""
    metrics.forget("JetJobSnapshot", body["metadata"].get("namespace", ""), body["metadata"]["name"])
