"""Reconciliation of the three resources: observe → validate → act, as plain async functions.

Theory of operation
-------------------
kopf's handlers (``jetlet_operator.handlers``) are thin: each calls one
function here with the resource's name, namespace, spec, status and
generation, a :class:`~jetlet_operator.kube.KubeAccess` and the settings,
and gets an :class:`Outcome` back: the status to write, the Events to post,
and whether to look again later (``retry_after``, a kopf ``TemporaryError``)
or never for this generation (``invalid``, a ``PermanentError``: the spec
names a bad field). Tests call these functions directly, with a fake
KubeAccess and a real local jetlet cluster.

A JetJob's cluster is reached through ``jetlet.client`` at the ready member
pods' addresses (``podIP:rest``) with the REST token from the cluster's
Secret (:func:`cluster_access`). Blocking client calls run in a worker
thread (``asyncio.to_thread``) so the operator's event loop keeps serving
other resources. Reconciliations of one JetJob never overlap (a lock per
JetJob): the event-feed daemon and kopf's handlers share them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import time
from collections.abc import Mapping
from typing import Any

from jetlet import client as client_mod
from jetlet import errors
from jetlet_operator import builders, cluster_status, conditions, jobs, kube, specs
from jetlet_operator import job_decisions as jd
from jetlet_operator import settings as settings_mod

_log = logging.getLogger("jetlet_operator")
Event = tuple[str, str, str]
"""An Event to post: type (Normal or Warning), reason, message."""
_LOCKS: dict[tuple[str, str], asyncio.Lock] = {}
_SUBMIT_FIELDS = {
    "source": "spec.pipeline.inline",
    "entrypoint": "spec.pipeline.entrypoint",
    "arguments": "spec.pipeline.args",
    "config.initial_snapshot_name": "spec.initialSnapshotRef",
}


@dataclasses.dataclass
class Outcome:
    """What one reconciliation decided: the status fields to write and the Events to post."""

    status: dict[str, Any] = dataclasses.field(default_factory=dict)
    events: list[Event] = dataclasses.field(default_factory=list)
    retry_after: float | None = None
    """Look again after this many seconds (a kopf ``TemporaryError``)."""
    invalid: str = ""
    """Why the spec cannot be acted on, naming the field (a kopf ``PermanentError``)."""
    decision: jd.Decision | None = None
    waiting: str = ""
    """What a reconciliation that will look again waits for (the kopf retry's message)."""


def lock_for(namespace: str, name: str) -> asyncio.Lock:
    """The lock that serialises the reconciliations of one resource."""
    return _LOCKS.setdefault((namespace, name), asyncio.Lock())


def invalid_outcome(exc: specs.SpecError, status: Mapping[str, Any], generation: int) -> Outcome:
    """A permanent error: a Degraded condition and one Event naming the field."""
    already = conditions.get_condition(status.get("conditions"), "Degraded")
    found = conditions.set_condition(
        status.get("conditions"), "Degraded", True, "InvalidSpec", str(exc), generation
    )
    found = conditions.set_condition(found, "Ready", False, "InvalidSpec", str(exc), generation)
    repeated = already is not None and already.get("message") == str(exc) and already.get("status") == "True"
    events: list[Event] = [] if repeated else [("Warning", "InvalidSpec", str(exc))]
    return Outcome({"observedGeneration": generation, "conditions": found}, events, invalid=str(exc))


# ---------------------------------------------------------------------------------------- JetCluster


async def reconcile_cluster(
    body: Mapping[str, Any], api: kube.KubeAccess, config: settings_mod.OperatorSettings
) -> Outcome:
    """Create or update the cluster's objects, then observe its members into the status."""
    metadata, status = body["metadata"], body.get("status") or {}
    generation = int(metadata.get("generation", 1))
    try:
        spec = specs.cluster_spec(body.get("spec") or {})
    except specs.SpecError as exc:
        return invalid_outcome(exc, status, generation)
    owner = {"apiVersion": builders.API_VERSION, "kind": "JetCluster", **body}
    secret = builders.get_secret(owner, secrets.token_urlsafe(32), secrets.token_urlsafe(32))
    await api.create_if_absent(secret)
    for obj in builders.get_cluster_objects(
        owner, spec, config.default_image, config.rest_port, config.data_port
    ):
        await api.apply(obj)
    return await observe_cluster(body, api, config, spec)


async def observe_cluster(
    body: Mapping[str, Any],
    api: kube.KubeAccess,
    config: settings_mod.OperatorSettings,
    spec: specs.ClusterSpec | None = None,
) -> Outcome:
    """The cluster's status from its pods (and its coordinator, asked of a ready member)."""
    metadata, status = body["metadata"], body.get("status") or {}
    name, namespace = metadata["name"], metadata.get("namespace", "default")
    generation = int(metadata.get("generation", 1))
    if spec is None:
        try:
            spec = specs.cluster_spec(body.get("spec") or {})
        except specs.SpecError as exc:
            return invalid_outcome(exc, status, generation)
    pods = await api.list("Pod", namespace, builders.selector(name))
    observed = cluster_status.members(pods, name, config.rest_port)
    coordinator = str(status.get("coordinator", ""))
    ready = [m.address for m in observed if m.ready]
    secret_name = builders.names(name)["secret"]
    if ready:
        token = await _token(api, namespace, secret_name)
        try:
            client = await asyncio.to_thread(jobs.connect, ready, token, config.client_timeout_seconds)
            coordinator = (await asyncio.to_thread(client.cluster)).coordinator
        except errors.JetletError as exc:
            _log.info("JetCluster %s/%s: cannot ask for its coordinator: %s", namespace, name, exc)
    new = cluster_status.cluster_status(spec, observed, coordinator, generation, status, name, secret_name)
    events = cluster_status.transition_events(status, new)
    retry = None if new["phase"] == "Running" else 3.0
    return Outcome(
        new, events, retry_after=retry, waiting=f"{new['readyMembers']} of {spec.size} members ready"
    )


async def _token(api: kube.KubeAccess, namespace: str, secret_name: str) -> str:
    secret = await api.get("Secret", namespace, secret_name)
    return kube.decode_secret(secret).get("token", "") if secret else ""


@dataclasses.dataclass(frozen=True)
class Access:
    """How to reach a cluster: its state, its ready members' addresses and its REST token."""

    state: jd.ClusterState
    addresses: tuple[str, ...] = ()
    token: str = ""


async def cluster_access(api: kube.KubeAccess, namespace: str, cluster: str, rest_port: int) -> Access:
    """Whether the JetCluster ``cluster`` can take requests, and at which member addresses."""
    found = await api.get("JetCluster", namespace, cluster)
    if found is None:
        return Access(jd.ClusterState(False, f"JetCluster {cluster} does not exist in namespace {namespace}"))
    token = await _token(api, namespace, builders.names(cluster)["secret"])
    if not token:
        return Access(jd.ClusterState(False, f"JetCluster {cluster} has no Secret with a token yet"))
    pods = await api.list("Pod", namespace, builders.selector(cluster))
    members = cluster_status.members(pods, cluster, rest_port)
    ready = [m.address for m in members if m.ready]
    if not ready:
        unready = tuple(m.address for m in members)  # to observe jobs with, not to submit
        return Access(
            jd.ClusterState(False, f"no member of JetCluster {cluster} is ready yet"), unready, token
        )
    # the ready members first; the others after them, as a member that is not ready (say, one
    # that just replaced a lost pod) still answers for the cluster's jobs
    return Access(jd.ClusterState(True), tuple(ready + [m.address for m in members if not m.ready]), token)


# ---------------------------------------------------------------------------------------- JetJob


async def _source(api: kube.KubeAccess, namespace: str, spec: specs.JobSpec) -> str:
    if spec.pipeline.config_map is None:
        return ""
    name, key = spec.pipeline.config_map
    found = await api.get("ConfigMap", namespace, name)
    if found is None:
        raise _Wait(f"ConfigMap {name} (spec.pipeline.configMapRef) does not exist yet")
    text = (found.get("data") or {}).get(key)
    if not text:
        raise _Wait(f"ConfigMap {name} has no key {key!r} (spec.pipeline.configMapRef.key)")
    return str(text)


class _Wait(Exception):
    """Waiting for something outside the operator (a ConfigMap, the cluster); the message says what."""


async def reconcile_job(
    name: str,
    namespace: str,
    raw_spec: Mapping[str, Any],
    status: Mapping[str, Any],
    generation: int,
    api: kube.KubeAccess,
    config: settings_mod.OperatorSettings,
    now: float | None = None,
) -> Outcome:
    """Observe the JetJob's job, decide, act once, and report (the status, the Events).

    Under the JetJob's lock it reads the JetJob afresh (the caller's copy may
    be older than a reconciliation that just ran) and writes the new status
    itself, so two reconciliations never act on, or write, a stale status.
    """
    async with lock_for(namespace, f"JetJob/{name}"):
        fresh = await api.get("JetJob", namespace, name)
        if fresh is not None:
            if fresh["metadata"].get("deletionTimestamp"):
                return Outcome(dict(status))
            raw_spec, status = fresh.get("spec") or {}, fresh.get("status") or {}
            generation = int(fresh["metadata"].get("generation", generation))
        outcome = await _reconcile_job(name, namespace, raw_spec, status, generation, api, config, now)
        if fresh is not None and outcome.status != status:
            await api.patch_status("JetJob", namespace, name, outcome.status)
        return outcome


async def _reconcile_job(
    name: str,
    namespace: str,
    raw_spec: Mapping[str, Any],
    status: Mapping[str, Any],
    generation: int,
    api: kube.KubeAccess,
    config: settings_mod.OperatorSettings,
    now: float | None,
) -> Outcome:
    now = time.time() if now is None else now
    try:
        spec = specs.job_spec(raw_spec, name)
    except specs.SpecError as exc:
        return invalid_outcome(exc, status, generation)
    access = await cluster_access(api, namespace, spec.cluster_ref, config.rest_port)
    client: client_mod.Client | None = None
    record: dict[str, Any] | None = None
    state = access.state
    if access.addresses:  # a cluster without a ready member may still report its jobs
        try:
            client = await asyncio.to_thread(
                jobs.connect, access.addresses, access.token, config.client_timeout_seconds
            )
            record = await asyncio.to_thread(jobs.find_job, client, spec.name)
        except errors.JetletError as exc:
            client = None
            if state.ready:
                state = jd.ClusterState(False, f"the cluster does not answer: {exc}")
    observed = jd.JobObservation.from_record(record) if record else None
    decision = jd.decide(spec, status, state, observed, now)
    merged: dict[str, Any] = dict(status)
    events: list[Event] = []
    retry: float | None = None
    waiting = ""
    try:
        if client is not None or decision.action in (
            jd.Action.WAIT_CLUSTER,
            jd.Action.NOTHING,
            jd.Action.GIVE_UP,
        ):
            record, retry, waiting = await _act(
                decision, spec, merged, events, client, record, api, namespace, generation, config, now
            )
    except _Wait as exc:
        waiting, retry = str(exc), 5.0
        previous = conditions.get_condition(status.get("conditions"), "Progressing")
        if previous is None or previous.get("message") != waiting:
            events.append(("Normal", "Waiting", waiting))
    except errors.InvalidJobError as exc:
        field = _SUBMIT_FIELDS.get(getattr(exc, "field", ""), "spec.pipeline")
        if spec.pipeline.module and field in ("spec.pipeline.entrypoint", "spec.pipeline"):
            field = "spec.pipeline.module"
        problem = specs.SpecError(field, str(exc))
        return invalid_outcome(problem, status, generation)
    except errors.ClusterUnavailableError as exc:
        retry, waiting = max(exc.retry_after_s, 1.0), f"the cluster is unavailable: {exc}"
    except (errors.JobStateConflictError, errors.JobNotFoundError) as exc:
        retry, waiting = 2.0, f"{decision.action.value} must wait: {exc}"
    except errors.JetletError as exc:
        retry, waiting = 5.0, f"{decision.action.value} failed: {exc}"
    observed = jd.JobObservation.from_record(record) if record else None
    reason = "Waiting"
    if decision.action is jd.Action.WAIT_CLUSTER:
        waiting, reason = decision.message, "ClusterNotReady"
    new = jd.job_status(spec, observed, merged, generation, waiting, reason)
    if merged.get("failedForGood"):
        new["conditions"] = conditions.set_condition(
            new["conditions"],
            "Failed",
            True,
            str(merged.get("failedReason", "Failed")),
            str(merged.get("failedMessage", "")),
            generation,
        )
    elif conditions.get_condition(new["conditions"], "Failed") is not None or observed is not None:
        new["conditions"] = conditions.set_condition(
            new["conditions"], "Failed", False, "NotFailed", "", generation
        )
    events += jd.status_events(status, {**merged, **new})
    merged.update(new)
    return Outcome(merged, events, retry_after=retry, decision=decision, waiting=waiting)


async def _act(
    decision: jd.Decision,
    spec: specs.JobSpec,
    merged: dict[str, Any],
    events: list[Event],
    client: client_mod.Client | None,
    record: dict[str, Any] | None,
    api: kube.KubeAccess,
    namespace: str,
    generation: int,
    config: settings_mod.OperatorSettings,
    now: float,
) -> tuple[dict[str, Any] | None, float | None, str]:
    """Perform ``decision``; the job's record afterwards, when to look again, and what it waits for."""
    action = decision.action
    timeout = config.cancel_timeout_seconds
    if action is jd.Action.WAIT_CLUSTER:
        previous = conditions.get_condition(merged.get("conditions"), "Progressing")
        if previous is None or previous.get("reason") != "ClusterNotReady":
            events.append(("Normal", "WaitingForCluster", decision.message))
        merged["conditions"] = conditions.set_condition(
            merged.get("conditions"), "Progressing", True, "ClusterNotReady", decision.message, generation
        )
        return record, decision.delay, decision.message
    if action is jd.Action.GIVE_UP:
        merged.update(failedForGood=True, failedReason=decision.reason, failedMessage=decision.message)
        events.append(("Warning", "Failed", decision.message[:1000]))
        return record, None, ""
    if action is jd.Action.WAIT_RETRY:
        merged.setdefault("nextRetryAt", now + decision.delay)
        if not merged.get("nextRetryAt"):
            merged["nextRetryAt"] = now + decision.delay
        merged["nextRetryTime"] = conditions.iso_from_millis(int(float(merged["nextRetryAt"]) * 1000))
        return record, max(decision.delay, 0.5), decision.message
    if action is jd.Action.NOTHING or client is None:
        return record, None, ""
    assert client is not None
    if action in (jd.Action.SUBMIT, jd.Action.RETRY):
        source = await _source(api, namespace, spec)
        if action is jd.Action.SUBMIT and decision.message:  # a changed spec after the job ended
            merged["retries"] = 0
        record = await asyncio.to_thread(jobs.submit, client, spec, source)
        merged.update(jd.reconciled(spec), nextRetryAt=0, nextRetryTime=None, suspendedByOperator=False)
        merged.pop("failedForGood", None)
        if action is jd.Action.RETRY:
            merged["retries"] = int(merged.get("retries", 0)) + 1
            events.append(("Normal", "JobRestarted", f"resubmitted by restartPolicy: {decision.message}"))
        else:
            how = (
                "inline code"
                if spec.pipeline.inline
                else (
                    f"ConfigMap {spec.pipeline.config_map[0]}"
                    if spec.pipeline.config_map
                    else spec.pipeline.module
                )
            )
            events.append(
                ("Normal", "Submitted", f"job {spec.name} submitted ({how}), id {record.get('id_string')}")
            )
        return record, None, ""
    assert record is not None
    if action is jd.Action.CANCEL:
        record = await asyncio.to_thread(jobs.cancel, client, record, timeout)
        events.append(("Normal", "Canceled", f"job {spec.name} canceled"))
    elif action is jd.Action.SUSPEND:
        await asyncio.to_thread(jobs.suspend, client, record)
        merged["suspendedByOperator"] = True
        events.append(("Normal", "Suspended", f"job {spec.name} suspended (spec.state)"))
    elif action is jd.Action.RESUME:
        await asyncio.to_thread(jobs.resume, client, record)
        merged["suspendedByOperator"] = False
        events.append(("Normal", "Resumed", f"job {spec.name} resumed (spec.state)"))
    elif action is jd.Action.RESTART:
        await asyncio.to_thread(jobs.restart, client, record)
        merged["restartNonce"] = spec.restart_nonce
        merged["suspendedByOperator"] = False
        events.append(("Normal", "JobRestarted", f"restartNonce is {spec.restart_nonce}"))
    elif action is jd.Action.UPGRADE:
        source = await _source(api, namespace, spec)
        snapshot = f"{spec.name}-upgrade-g{generation}"
        last = str((merged.get("lastSnapshot") or {}).get("name", ""))
        record, used = await asyncio.to_thread(
            jobs.upgrade, client, record, spec, snapshot, last, source, timeout
        )
        merged.update(jd.reconciled(spec), retries=0, suspendedByOperator=False)
        if used:
            merged["lastSnapshot"] = {"name": used, "time": conditions.now_iso(), "size": 0}
            if used == snapshot:
                events.append(("Normal", "SnapshotTaken", f"snapshot {snapshot} exported for the upgrade"))
        events.append(
            ("Normal", "Upgraded", f"upgradeMode {spec.upgrade_mode}" + (f", from {used}" if used else ""))
        )
    fresh = await asyncio.to_thread(jobs.find_job, client, spec.name)
    return fresh or record, None, ""


async def finalize_job(
    name: str,
    namespace: str,
    raw_spec: Mapping[str, Any],
    api: kube.KubeAccess,
    config: settings_mod.OperatorSettings,
) -> list[Event]:
    """Cancel the JetJob's job before the JetJob goes; bounded, and never stuck on a cluster that is gone.

    The cancel is asked with escalating waits (2 s, 4 s, 8 s... up to
    ``cancel_timeout_seconds`` in all); when the cluster does not exist, has no
    ready member or does not answer, or the time is up, the JetJob is let go with
    a Warning Event saying so.
    """
    try:
        spec = specs.job_spec(raw_spec, name)
    except specs.SpecError:
        return []  # it never ran
    access = await cluster_access(api, namespace, spec.cluster_ref, config.rest_port)
    if not access.addresses:  # no member pod at all: nothing can be canceled, nothing waits
        return [("Warning", "CancelSkipped", f"the job is not canceled: {access.state.reason}")]
    deadline = time.monotonic() + config.cancel_timeout_seconds
    wait = 2.0
    while True:
        left = deadline - time.monotonic()
        try:
            client = await asyncio.to_thread(jobs.connect, access.addresses, access.token, min(left, 10.0))
            record = await asyncio.to_thread(jobs.find_job, client, spec.name)
            if record is None or record["status"] in jd.TERMINAL:
                return [("Normal", "Canceled", f"job {spec.name} is not running")]
            record = await asyncio.to_thread(jobs.cancel, client, record, min(wait, max(left, 0.1)))
            if record["status"] in jd.TERMINAL:
                return [("Normal", "Canceled", f"job {spec.name} canceled before the JetJob was deleted")]
        except (errors.JetletError, TimeoutError) as exc:
            _log.info("JetJob %s/%s: cancel not done yet: %s", namespace, name, exc)
        if time.monotonic() + wait > deadline:
            return [
                (
                    "Warning",
                    "CancelTimedOut",
                    f"job {spec.name} not confirmed canceled after "
                    f"{config.cancel_timeout_seconds:.0f} s; the JetJob is deleted anyway",
                )
            ]
        await asyncio.sleep(
            min(wait, max(deadline - time.monotonic(), 0))
        )  # escalate: the next wait is longer
        wait *= 2


# ---------------------------------------------------------------------------------------- JetJobSnapshot


async def reconcile_snapshot(
    name: str,
    namespace: str,
    raw_spec: Mapping[str, Any],
    status: Mapping[str, Any],
    generation: int,
    api: kube.KubeAccess,
    config: settings_mod.OperatorSettings,
) -> Outcome:
    """Export the snapshot once the JetJob's job runs; Exported or Failed are final."""
    if status.get("state") in ("Exported", "Failed"):
        return Outcome()
    try:
        spec = specs.snapshot_spec(raw_spec, name)
    except specs.SpecError as exc:
        return Outcome(
            {"state": "Failed", "message": str(exc)}, [("Warning", "InvalidSpec", str(exc))], invalid=str(exc)
        )

    def waiting(message: str) -> Outcome:
        events: list[Event] = [] if status.get("message") == message else [("Normal", "Waiting", message)]
        return Outcome(
            {"state": "Waiting", "message": message, "observedGeneration": generation},
            events,
            retry_after=5.0,
            waiting=message,
        )

    jetjob = await api.get("JetJob", namespace, spec.jet_job_ref)
    if jetjob is None:
        return waiting(f"JetJob {spec.jet_job_ref} does not exist")
    try:
        job_spec = specs.job_spec(jetjob.get("spec") or {}, spec.jet_job_ref)
    except specs.SpecError as exc:
        return waiting(f"JetJob {spec.jet_job_ref} is invalid: {exc}")
    if job_spec.processing_guarantee == "NONE":
        message = f"JetJob {spec.jet_job_ref} takes no snapshots (its spec.processingGuarantee is NONE)"
        return Outcome({"state": "Failed", "message": message}, [("Warning", "Failed", message)])
    access = await cluster_access(api, namespace, job_spec.cluster_ref, config.rest_port)
    if not access.state.ready:
        return waiting(access.state.reason)
    try:
        client = await asyncio.to_thread(
            jobs.connect, access.addresses, access.token, config.client_timeout_seconds
        )
        record = await asyncio.to_thread(jobs.find_job, client, job_spec.name)
        if record is None or record["status"] not in ("RUNNING", "SUSPENDED"):
            return waiting(f"job {job_spec.name} is {record['status'] if record else 'not submitted'}")
        found = await asyncio.to_thread(jobs.export_snapshot, client, record, spec.name, spec.cancel_job)
    except errors.InvalidJobError as exc:
        message = f"the export was refused: {exc}"
        return Outcome({"state": "Failed", "message": message}, [("Warning", "Failed", message)])
    except errors.JetletError as exc:
        return waiting(f"the export must wait: {exc}")
    size = int(found.get("bytes", 0))
    new = {
        "state": "Exported",
        "snapshotName": spec.name,
        "creationTime": conditions.iso_from_millis(int(found.get("time", 0)) or None) or conditions.now_iso(),
        "size": size,
        "message": f"exported from job {job_spec.name}"
        + (" and the job canceled" if spec.cancel_job else ""),
        "observedGeneration": generation,
    }
    return Outcome(new, [("Normal", "SnapshotTaken", f"snapshot {spec.name} exported ({size} bytes)")])
