"""Steering jobs on a jetlet cluster through ``jetlet.client`` (blocking; the handlers run it in a thread).

The operator reaches a cluster only through the client, at its members'
pod addresses (never a ClusterIP: it does not route from outside the
cluster). :func:`connect` tries the ready members' addresses in turn and
keeps the first that answers. Every function here is one small step of
reconciliation and raises jetlet's typed errors (``InvalidJobError``:
permanent; ``JobNotFoundError``; ``JobStateConflictError``;
``ClusterUnavailableError`` with ``retry_after_s``) for the handler to sort.
"""

from __future__ import annotations

import contextlib
import time
import urllib.parse
from collections.abc import Sequence
from typing import Any

from jetlet import client as client_mod
from jetlet import errors
from jetlet_operator import job_decisions, specs

TERMINAL = job_decisions.TERMINAL


def connect(addresses: Sequence[str], token: str, timeout: float) -> client_mod.Client:
    """A client of the first member among ``addresses`` that answers; ``ClusterUnavailableError`` if none."""
    problems = []
    for address in addresses:
        try:
            return client_mod.connect(address, token, timeout=timeout)
        except errors.JetletError as exc:
            problems.append(f"{address}: {exc}")
    raise errors.ClusterUnavailableError(
        "no member answers: " + ("; ".join(problems) or "no member address"), retry_after_s=5.0
    )


def find_job(client: client_mod.Client, name: str) -> dict[str, Any] | None:
    """The record of the newest job named ``name``, or None."""
    try:
        record: dict[str, Any] = client.request("GET", f"/jobs/{urllib.parse.quote(name, safe='')}")
        return record
    except errors.JobNotFoundError:
        return None


def submit(
    client: client_mod.Client, spec: specs.JobSpec, source: str = "", initial_snapshot: str | None = None
) -> dict[str, Any]:
    """Submit the job of ``spec`` (``source``: the ConfigMap's text for a ``configMapRef``); its record."""
    job_config = spec.job_config(initial_snapshot)
    pipeline = spec.pipeline
    if pipeline.module:
        job = client.submit_entrypoint(pipeline.module, dict(pipeline.args), job_config)
    else:
        text = pipeline.inline or source
        job = client.submit_source(text, pipeline.entrypoint, dict(pipeline.args), job_config)
    return job.last_record.to_dict()


def _job(client: client_mod.Client, record: dict[str, Any]) -> client_mod.RemoteJob:
    return client_mod.RemoteJob(client, record)


def wait_terminal(client: client_mod.Client, record: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Wait until the job ended (at most ``timeout`` s); its last record. ``TimeoutError`` otherwise."""
    job = _job(client, record)
    with contextlib.suppress(errors.JobCancelledError, errors.JobFailedError):
        job.join(timeout=timeout)
    return job.last_record.to_dict()


def cancel(client: client_mod.Client, record: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Cancel the job and wait until it ended; a job that already ended is left as it is."""
    job = _job(client, record)
    with contextlib.suppress(errors.JobStateConflictError):  # it ended in the meantime
        job.cancel()
    return wait_terminal(client, job.last_record.to_dict(), timeout)


def suspend(client: client_mod.Client, record: dict[str, Any]) -> None:
    _job(client, record).suspend()


def resume(client: client_mod.Client, record: dict[str, Any]) -> None:
    _job(client, record).resume()


def restart(client: client_mod.Client, record: dict[str, Any]) -> None:
    """Restart the job's execution from its last snapshot; a suspended job is resumed instead."""
    job = _job(client, record)
    if record.get("status") in job_decisions.ACTIVE_SUSPENDED:
        job.resume()
    else:
        job.restart()


def export_snapshot(
    client: client_mod.Client, record: dict[str, Any], name: str, cancel_job: bool
) -> dict[str, Any]:
    """Export the job's state as the snapshot ``name`` (then cancel the job); the snapshot's record."""
    job = _job(client, record)
    return job.cancel_and_export_snapshot(name) if cancel_job else job.export_snapshot(name)


def upgrade(
    client: client_mod.Client,
    record: dict[str, Any],
    spec: specs.JobSpec,
    snapshot_name: str,
    last_snapshot: str,
    source: str,
    timeout: float,
) -> tuple[dict[str, Any], str]:
    """Replace the running job by one of ``spec`` as ``spec.upgrade_mode`` says; the new record and snapshot.

    ``stateless``: cancel, resubmit from nothing. ``snapshot``: export the
    state as ``snapshot_name`` and cancel in one step (nothing runs after the
    snapshot), resubmit from it. ``last-snapshot``: the same when the job can
    export now; otherwise (it is restarting or suspended by a failure) resubmit
    from ``last_snapshot``, the last snapshot exported for this JetJob, if any.
    """
    start_from: str | None = None
    if spec.upgrade_mode == "stateless":
        cancel(client, record, timeout)
    else:
        try:
            export_snapshot(client, record, snapshot_name, cancel_job=True)
            start_from = snapshot_name
        except errors.JobStateConflictError:
            if spec.upgrade_mode == "snapshot":
                raise
            start_from = last_snapshot or None
        wait_terminal(client, record, timeout)
        if start_from is None:
            cancel(client, record, timeout)
    deadline = time.monotonic() + timeout
    while True:  # the name is free once the old job ended
        try:
            return submit(client, spec, source, start_from), start_from or ""
        except errors.JobStateConflictError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
