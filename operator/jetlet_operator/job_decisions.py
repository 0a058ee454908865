"""What to do about a JetJob, given its spec, its status and what the cluster says (pure).

Theory of operation
-------------------
The operator goes observe → validate → reconcile, as the Flink Kubernetes
Operator does. Observing gives a :class:`ClusterState` (is the cluster
there and ready?) and a :class:`JobObservation` (the newest job of the
JetJob's name in that cluster, or None). :func:`decide` then picks one
:class:`Action`, in this order of precedence:

1. ``state: Canceled`` → ``CANCEL`` an active job, else nothing.
2. The cluster is not ready → ``WAIT_CLUSTER`` (a temporary error, retried).
3. No job yet → ``SUBMIT`` (unless ``Suspended``: nothing is submitted then;
   nor when the status records a job of this spec that ended, which the
   cluster no longer reports: :func:`ended_unseen`).
4. An active job whose code or settings changed (``spec.fingerprint()``
   differs from the one last submitted) → ``UPGRADE`` as ``upgradeMode`` says.
5. A new ``restartNonce`` → ``RESTART`` (a suspended job is resumed).
6. ``Suspended`` wanted and the job runs → ``SUSPEND``; ``Running`` wanted
   and the job is suspended because the operator suspended it → ``RESUME``.
7. A terminal job: a changed spec is resubmitted (the user fixed the code);
   a failure (not a cancellation) under ``OnFailure``/``Always``, or a
   completion under ``Always``, is resubmitted after the backoff
   (``WAIT_RETRY`` until then) while retries are left, then ``GIVE_UP``:
   the terminal ``Failed`` condition.

:func:`job_status` writes the status from the observation, and
:func:`status_events` names the Events a change of status deserves (each
once: an Event is tied to a transition of the status, not to a retry).
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from typing import Any

from jetlet_operator import conditions, specs

ACTIVE_SUSPENDED = ("SUSPENDED", "SUSPENDED_EXPORTING_SNAPSHOT")
TERMINAL = ("FAILED", "COMPLETED")


class Action(enum.StrEnum):
    """One step of reconciliation."""

    NOTHING = "Nothing"
    WAIT_CLUSTER = "WaitCluster"
    SUBMIT = "Submit"
    CANCEL = "Cancel"
    SUSPEND = "Suspend"
    RESUME = "Resume"
    RESTART = "Restart"
    UPGRADE = "Upgrade"
    RETRY = "Retry"
    WAIT_RETRY = "WaitRetry"
    GIVE_UP = "GiveUp"


@dataclasses.dataclass(frozen=True)
class ClusterState:
    """Whether the JetJob's cluster can take requests, and if not, why."""

    ready: bool
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class JobObservation:
    """The job as the cluster reports it (a ``RemoteJob`` record)."""

    id: str
    status: str
    submission_time: int | None = None
    completion_time: int | None = None
    failure: str = ""
    failure_traceback: str = ""
    cancelled: bool = False
    suspension_cause: str = ""
    restarts: int = 0
    snapshot: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def suspended(self) -> bool:
        return self.status in ACTIVE_SUSPENDED

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> JobObservation:
        """From a job record as the REST API returns it."""
        return cls(
            id=str(record.get("id_string") or record["id"]),
            status=str(record["status"]),
            submission_time=record.get("submission_time"),
            completion_time=record.get("completion_time"),
            failure=str(record.get("failure", "")),
            failure_traceback=str(record.get("failure_traceback", "")),
            cancelled=bool(record.get("cancelled", False)),
            suspension_cause=str(record.get("suspension_cause", "")),
            restarts=int(record.get("restarts", 0)),
            snapshot=dict(record.get("snapshot") or {}),
        )


@dataclasses.dataclass(frozen=True)
class Decision:
    """The action and why; ``delay`` is when to look again (seconds) for the waiting actions."""

    action: Action
    reason: str
    message: str = ""
    delay: float = 0.0


def _retry_or_give_up(
    spec: specs.JobSpec, status: Mapping[str, Any], job: JobObservation, now: float
) -> Decision | None:
    policy = spec.restart_policy
    failed = job.status == "FAILED" and not job.cancelled
    wants = (failed and policy.type in ("OnFailure", "Always")) or (
        job.status == "COMPLETED" and policy.type == "Always"
    )
    if not wants:
        if failed and not conditions.is_true(status.get("conditions"), "Failed"):
            return Decision(Action.GIVE_UP, "Failed", f"the job failed: {job.failure}")
        return None
    retries = int(status.get("retries", 0))
    if retries >= policy.max_retries:
        if conditions.is_true(status.get("conditions"), "Failed"):
            return None
        return Decision(
            Action.GIVE_UP, "RetriesExhausted", f"the job failed {retries + 1} times: {job.failure}"
        )
    due = float(status.get("nextRetryAt", 0.0) or 0.0)
    if not due:
        due = now + policy.backoff(retries)
        return Decision(
            Action.WAIT_RETRY, "BackingOff", f"retry {retries + 1} in {due - now:.0f} s", due - now
        )
    if now < due:
        return Decision(
            Action.WAIT_RETRY, "BackingOff", f"retry {retries + 1} in {due - now:.0f} s", due - now
        )
    return Decision(Action.RETRY, "JobRestarted", f"retry {retries + 1} of {policy.max_retries}")


def decide(
    spec: specs.JobSpec,
    status: Mapping[str, Any],
    cluster: ClusterState,
    job: JobObservation | None,
    now: float,
) -> Decision:
    """The next action for a JetJob (see the module's docstring for the order)."""
    active = job is not None and not job.terminal
    if spec.state == "Canceled":
        if active:
            return Decision(Action.CANCEL, "Canceling", "spec.state is Canceled")
        return Decision(Action.NOTHING, "Canceled")
    if not cluster.ready:
        return Decision(Action.WAIT_CLUSTER, "ClusterNotReady", cluster.reason, 5.0)
    changed = bool(status.get("fingerprint")) and status.get("fingerprint") != spec.fingerprint()
    if job is None:
        if spec.state == "Suspended":
            return Decision(Action.NOTHING, "NotSubmitted", "spec.state is Suspended: nothing is submitted")
        renewed = spec.restart_nonce != int(status.get("restartNonce", spec.restart_nonce))
        if ended_unseen(status) and not changed and not renewed:
            return Decision(
                Action.NOTHING,
                "Ended",
                f"job {status['id']} ended {status['phase']} and the cluster no longer reports it: "
                "nothing is submitted again (change the spec or spec.restartNonce to run it again)",
            )
        return Decision(Action.SUBMIT, "Submitted")
    if active:
        if changed:
            return Decision(Action.UPGRADE, "Upgrading", f"upgradeMode {spec.upgrade_mode}")
        if spec.restart_nonce != int(status.get("restartNonce", spec.restart_nonce)):
            return Decision(Action.RESTART, "JobRestarted", f"restartNonce is {spec.restart_nonce}")
        if spec.state == "Suspended" and not job.suspended:
            return Decision(Action.SUSPEND, "Suspended", "spec.state is Suspended")
        if spec.state == "Running" and job.status == "SUSPENDED" and status.get("suspendedByOperator"):
            return Decision(Action.RESUME, "Resumed", "spec.state is Running")
        return Decision(Action.NOTHING, "InSync")
    if changed and spec.state == "Running":
        return Decision(Action.SUBMIT, "Submitted", "the spec changed after the job ended")
    if spec.state == "Running":
        found = _retry_or_give_up(spec, status, job, now)
        if found is not None:
            return found
    return Decision(Action.NOTHING, "Ended")


def _phase_conditions(
    spec: specs.JobSpec,
    job: JobObservation | None,
    status: Mapping[str, Any],
    generation: int,
    waiting: str,
    waiting_reason: str,
) -> list[dict[str, Any]]:
    found = list(status.get("conditions") or [])
    if job is None and not waiting and ended_unseen(status):  # its conditions stay as it ended
        message = f"job {status['id']} ended {status['phase']} and the cluster no longer reports it"
        return conditions.set_condition(found, "Progressing", False, "Ended", message, generation)
    if job is None:
        message = waiting or "not submitted yet"
        found = conditions.set_condition(found, "Ready", False, "NotSubmitted", message, generation)
        found = conditions.set_condition(found, "Progressing", True, waiting_reason, message, generation)
        return conditions.set_condition(found, "Suspended", False, "NotSuspended", "", generation)
    running = job.status == "RUNNING"
    ended = job.terminal
    found = conditions.set_condition(
        found,
        "Ready",
        running or job.status == "COMPLETED",
        job.status,
        f"the job is {job.status}",
        generation,
    )
    found = conditions.set_condition(
        found,
        "Progressing",
        not running and not ended and not job.suspended,
        job.status,
        waiting or f"the job is {job.status}",
        generation,
    )
    found = conditions.set_condition(
        found,
        "Suspended",
        job.suspended,
        "Suspended" if job.suspended else "NotSuspended",
        job.suspension_cause,
        generation,
    )
    degraded = job.status == "FAILED" and not job.cancelled
    found = conditions.set_condition(
        found,
        "Degraded",
        degraded,
        "JobFailed" if degraded else "Healthy",
        job.failure if degraded else "",
        generation,
    )
    return found


def ended_unseen(status: Mapping[str, Any]) -> bool:
    """Whether the status records a job that ended (``id`` and a terminal ``phase``).

    When the cluster then reports no job of the JetJob's name, the job is not submitted again, as
    the Flink operator does not redeploy a finished job whose cluster lost track of it: the cluster
    may have been replaced, or one reconciliation may have asked a member that had not yet learned
    of the job; running a completed job twice would write its results twice.
    """
    return bool(status.get("id")) and status.get("phase") in TERMINAL


def job_status(
    spec: specs.JobSpec,
    job: JobObservation | None,
    status: Mapping[str, Any],
    generation: int,
    waiting: str = "",
    waiting_reason: str = "Waiting",
) -> dict[str, Any]:
    """The JetJob's new status fields (merged into the old status) from the observed job.

    ``waiting`` says what the JetJob waits for (the ``Progressing`` condition's message) and
    ``waiting_reason`` is that condition's reason; a job that cannot be seen because its
    cluster is not ready keeps the phase it had.
    """
    new: dict[str, Any] = {"observedGeneration": generation}
    if job is None:
        unseen = (waiting_reason == "ClusterNotReady" and status.get("id")) or ended_unseen(status)
        new["phase"] = status.get("phase", "Pending") if spec.state == "Canceled" or unseen else "Pending"
    else:
        new.update(
            id=job.id,
            phase=job.status,
            submissionTime=conditions.iso_from_millis(job.submission_time),
            completionTime=conditions.iso_from_millis(job.completion_time),
            failureText=(job.failure + ("\n" + job.failure_traceback if job.failure_traceback else ""))
            if job.status == "FAILED"
            else "",
            suspensionCause=job.suspension_cause,
            restarts=job.restarts + int(status.get("retries", 0)),
        )
        if job.status == "RUNNING":
            new["lastStableSpec"] = status.get("lastReconciledSpec", "")
        snap = job.snapshot
        if "id" in snap and not (status.get("lastSnapshot") or {}).get("name"):
            new["lastSnapshot"] = {
                "name": "",
                "time": conditions.iso_from_millis(int(snap.get("time", 0))),
                "size": int(snap.get("bytes", 0)),
            }
    new["conditions"] = _phase_conditions(spec, job, status, generation, waiting, waiting_reason)
    return new


def reconciled(spec: specs.JobSpec) -> dict[str, Any]:
    """The status fields that record a submission of ``spec``."""
    return {
        "fingerprint": spec.fingerprint(),
        "lastReconciledSpec": spec.upgradable_json(),
        "restartNonce": spec.restart_nonce,
    }


def status_events(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """Events (type, reason, message) for a change of the observed job status (not for actions)."""
    found: list[tuple[str, str, str]] = []
    old_phase, new_phase = old.get("phase"), new.get("phase")
    if new_phase != old_phase and new_phase in ("FAILED", "COMPLETED", "RUNNING"):
        if new_phase == "FAILED" and not conditions.is_true(new.get("conditions"), "Degraded"):
            pass  # a cancellation is reported by the action that did it
        elif new_phase == "FAILED":
            found.append(("Warning", "JobFailed", (new.get("failureText") or "").splitlines()[0][:500]))
        elif new_phase == "COMPLETED":
            found.append(("Normal", "Completed", "the job completed"))
        elif new_phase == "RUNNING" and old_phase not in (None, "Pending", "RUNNING"):
            found.append(("Normal", "Running", f"the job runs (was {old_phase})"))
    return found


def spec_json(spec: Mapping[str, Any]) -> str:
    """A spec as canonical JSON (for ``lastReconciledSpec``)."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))
