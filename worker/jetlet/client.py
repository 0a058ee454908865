"""The client: submit and steer jobs on a jetlet cluster over its REST API.

``connect("host:port", token=...)`` returns a :class:`Client` with the same
``new_job`` / ``get_job`` / ``get_list`` / ``get_map`` / ``get_observable``
interface as the embedded instance, plus ``cluster()``, and submits jobs by
reference: ``submit_entrypoint("package.module:function", arguments)`` for
code in the members' image, ``submit_source(source, "function", arguments)``
for code carried as text.

Theory of operation
-------------------
Every call is one HTTP request (``urllib.request``, a fresh connection each
time, so a client is safe to share between threads) to the member's REST
API with ``Authorization: Bearer <token>``. A job definition — a
``Pipeline`` or a ``DAG``, user functions included — is planned here into
its DAG (planning errors surface in the user's process, with their
traceback), and the DAG is pickled with cloudpickle; when that fails the
client searches the DAG for the first object that cannot be pickled and
names it, with the path that leads to it (vertex, function, closure
variable...). Data read back (lists, maps, observable items) arrives as
cloudpickles from the member the client chose to trust with its token.
Waiting (``join``, iterating an observable) is a loop of long-polls of at
most 30 s each, so no request blocks forever and a ``timeout`` is honoured.
A member's refusal becomes a :class:`~jetlet.errors.JetletError` with the
member's message; a failed job becomes :class:`~jetlet.errors.JobFailedError` carrying the remote traceback,
a cancelled one :class:`~jetlet.errors.JobCancelledError`.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import pickle
import site
import ssl
import sys
import threading
import time
import types
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import cloudpickle

from jetlet import _pickling, config, errors, job, records
from jetlet.core import dag as dag_mod
from jetlet.metrics import job_metrics

LONG_POLL_S = 30.0
"""Longest single wait the member grants; longer waits repeat it."""
_SEARCH_DEPTH = 6


class RequestRefusedError(errors.JetletError):
    """The member refused a request; ``status`` is the HTTP status, ``field`` the field it named.

    A refusal with a typed code is raised as the matching subclass, which is also the
    :mod:`jetlet.errors` type: ``except jetlet.errors.JobNotFoundError`` works on a client.
    """

    def __init__(
        self, message: str, status: int, field: str | None = None, retry_after_s: float = 0.0
    ) -> None:
        errors.JetletError.__init__(self, message)
        self.status = status
        self.field = field or ""
        self.retry_after_s = retry_after_s


class InvalidJobRefused(RequestRefusedError, errors.InvalidJobError):
    """400: the job or request is invalid (``field`` names what)."""


class JobNotFoundRefused(RequestRefusedError, errors.JobNotFoundError):
    """404: no such job or snapshot."""


class JobStateConflictRefused(RequestRefusedError, errors.JobStateConflictError):
    """409: the job's state does not allow the operation."""


class ClusterUnavailableRefused(RequestRefusedError, errors.ClusterUnavailableError):
    """503: the cluster cannot answer now (a coordinator take-over); the client retried until its deadline."""


_REFUSALS: dict[str, type[RequestRefusedError]] = {
    errors.InvalidJobError.code: InvalidJobRefused,
    errors.JobNotFoundError.code: JobNotFoundRefused,
    errors.JobStateConflictError.code: JobStateConflictRefused,
    errors.ClusterUnavailableError.code: ClusterUnavailableRefused,
}
UNAVAILABLE_RETRY_S = 30.0
"""How long a client rides through 503 answers (a coordinator take-over) before it gives up."""

MemberView = records.MemberView
ClusterView = records.ClusterView


def describe_unpicklable(definition: object) -> str:
    """The path to the first part of ``definition`` that cloudpickle cannot pickle ('' if none).

    A Pipeline is planned first: the planner names the stage and function it cannot pickle.
    """
    dag: object = definition
    to_dag = getattr(definition, "to_dag", None)
    if callable(to_dag):
        try:
            dag = to_dag()
        except Exception as exc:
            return f"{exc}".split(" cannot be pickled")[0]
    roots: list[tuple[str, object]] = []
    if isinstance(dag, dag_mod.DAG):
        roots = [(f"vertex {v.name!r}", v) for v in dag.vertices()]
    roots.append((type(definition).__name__, definition))
    for label, root in roots:
        path = _find_unpicklable(root, label, _SEARCH_DEPTH, set())
        if path:
            return path
    return ""


def _pickles(obj: object) -> bool:
    try:
        _pickling.cloudpickle_dumps(obj)
    except Exception:
        return False
    return True


def _children(obj: object) -> list[tuple[str, object]]:
    if isinstance(obj, types.FunctionType):
        found = [
            (f"function {obj.__qualname__}: closure variable {name!r}", cell.cell_contents)
            for name, cell in zip(obj.__code__.co_freevars, obj.__closure__ or (), strict=False)
        ]
        found += [
            (f"function {obj.__qualname__}: global {n!r}", obj.__globals__[n])
            for n in obj.__code__.co_names
            if n in obj.__globals__
        ]
        return found
    if isinstance(obj, types.MethodType):
        return [("method's object", obj.__self__), ("function", obj.__func__)]
    if isinstance(obj, dict):
        return [(f"[{k!r}]", v) for k, v in obj.items()]
    if isinstance(obj, list | tuple | set | frozenset):
        return [(f"[{i}]", v) for i, v in enumerate(obj)]
    attributes = getattr(obj, "__dict__", None)
    if isinstance(attributes, dict):
        return [(f"attribute {k!r}", v) for k, v in attributes.items()]
    return []


def _label(obj: object) -> str:
    if isinstance(obj, types.FunctionType | types.MethodType):
        return f"function {obj.__qualname__}"
    return f"a {type(obj).__module__}.{type(obj).__qualname__} object"


def _find_unpicklable(obj: object, path: str, depth: int, seen: set[int]) -> str:
    if id(obj) in seen or _pickles(obj):
        return ""
    seen.add(id(obj))
    if depth > 0:
        for label, child in _children(obj):
            deeper = _find_unpicklable(child, f"{path} -> {label}", depth - 1, seen)
            if deeper:
                return deeper
    return f"{path} ({_label(obj)})"


def _user_modules() -> list[types.ModuleType]:
    """Modules of this process that member processes cannot import: the user's own files.

    cloudpickle pickles functions of importable modules *by reference*
    (module and name). jetlet and the installed packages are importable on
    every member; a user's script, test or notebook module is not, so its
    functions must travel *by value*, as Jet ships a job's classes with it.
    """
    installed = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    installed |= {os.path.realpath(p) for p in [*site.getsitepackages(), site.getusersitepackages()]}
    package_root = os.path.realpath(os.path.dirname(os.path.dirname(errors.__file__)))
    found = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if module is None or path is None or name == "__main__" or name.startswith("jetlet"):
            continue
        real = os.path.realpath(path)
        if real.startswith(package_root) or any(real.startswith(root) for root in installed):
            continue
        found.append(module)
    return found


def pickle_definition(definition: object) -> bytes:
    """cloudpickle a Pipeline or DAG; a clear :class:`JetletError` names what cannot be pickled."""
    registered = []
    try:
        for module in _user_modules():
            with contextlib.suppress(ValueError):  # already registered
                cloudpickle.register_pickle_by_value(module)
                registered.append(module)
        return _pickling.cloudpickle_dumps(definition)
    except Exception as exc:
        culprit = describe_unpicklable(definition) or type(definition).__name__
        reason = f"{type(exc).__name__}: {exc}"
        raise errors.JetletError(
            f"the job cannot be sent to the cluster ({reason}): {culprit} cannot be pickled"
        ) from exc
    finally:
        for module in registered:
            cloudpickle.unregister_pickle_by_value(module)


def plan(definition: object) -> dag_mod.DAG:
    """The DAG of a job definition: a DAG itself, or a Pipeline planned with ``to_dag()``.

    Anything else is a ``TypeError`` naming its type.
    """
    if isinstance(definition, dag_mod.DAG):
        return definition
    to_dag = getattr(definition, "to_dag", None)
    if not callable(to_dag):
        raise TypeError(f"a job is a Pipeline or a DAG, got {type(definition).__qualname__}")
    dag = to_dag()
    if not isinstance(dag, dag_mod.DAG):
        raise TypeError(f"{type(definition).__qualname__}.to_dag() returned {type(dag).__qualname__}")
    return dag


def _decode(text: str) -> Any:
    return pickle.loads(base64.b64decode(text))


class Client:
    """A connection to a jetlet cluster through one member's REST API (thread-safe)."""

    def __init__(self, address: str, token: str, timeout: float = 30.0, ca_file: str = "") -> None:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"address must be host:port, got {address!r}")
        self.address = address
        self.base_url = f"{'https' if ca_file else 'http'}://{address}"
        self._ssl = ssl.create_default_context(cafile=ca_file) if ca_file else None
        self.timeout = timeout
        self._token = token
        self.token = token
        """The REST bearer token this client sends."""
        self.pids: tuple[int, ...] = ()
        """Process ids of the members (set by ``local_cluster``)."""
        self.addresses: tuple[str, ...] = (address,)
        """REST addresses of the members this client knows."""
        self.add_member: Callable[[], Client] | None = None
        """Set by :func:`jetlet.local_cluster.local_cluster`: start one more member, get a client of it."""

    def request(self, method: str, path: str, body: dict[str, Any] | None = None, wait: float = 0.0) -> Any:
        """One authenticated request; the decoded JSON answer. Raises :class:`RequestRefusedError`."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self._token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        deadline = time.monotonic() + UNAVAILABLE_RETRY_S
        while True:
            try:
                with urllib.request.urlopen(req, timeout=self.timeout + wait, context=self._ssl) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                refusal = _refusal(exc)
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                raise errors.JetletError(f"cannot reach the member at {self.address}: {reason}") from exc
            if not isinstance(refusal, ClusterUnavailableRefused) or time.monotonic() > deadline:
                raise refusal from None
            time.sleep(min(max(refusal.retry_after_s, 0.1), 2.0))  # back off, then ask again

    def new_job(self, definition: object, job_config: config.JobConfig | None = None) -> RemoteJob:
        """Submit a Pipeline or DAG; returns at once with the job handle.

        A Pipeline is planned here, in this process, so a planning error is a
        :class:`~jetlet.errors.JetletError` raised here, chained to the
        planner's error and its traceback; the cluster receives the DAG.
        """
        try:
            dag = plan(definition)
        except Exception as exc:
            raise errors.JetletError(f"the job cannot be planned: {type(exc).__name__}: {exc}") from exc
        body = {
            "definition": base64.b64encode(pickle_definition(dag)).decode("ascii"),
            "config": _config_fields(job_config or config.JobConfig()),
        }
        return RemoteJob(self, self.request("POST", "/jobs", body))

    def submit_entrypoint(
        self,
        entrypoint: str,
        arguments: dict[str, Any] | None = None,
        job_config: config.JobConfig | None = None,
    ) -> RemoteJob:
        """Submit the job that ``package.module:function``, code in the members' image, builds.

        The member calls ``function(**arguments)`` (JSON values) and plans the
        Pipeline or DAG it returns. A bad reference is refused with a
        :class:`RequestRefusedError` (status 400) whose ``field`` names what is
        wrong (``entrypoint``, ``arguments``), and no job is created.
        """
        body = {"entrypoint": entrypoint, "arguments": dict(arguments or {})}
        return self._submit_reference(body, job_config)

    def submit_source(
        self,
        source: str,
        entrypoint: str,
        arguments: dict[str, Any] | None = None,
        job_config: config.JobConfig | None = None,
    ) -> RemoteJob:
        """Submit the job that the function ``entrypoint`` of the Python ``source`` text builds.

        The member runs the source as a fresh module, calls
        ``entrypoint(**arguments)`` and plans what it returns; the source's
        functions travel to the other members by value. Refusals as
        :meth:`submit_entrypoint` (``field`` may also be ``source``).
        """
        body = {"source": source, "entrypoint": entrypoint, "arguments": dict(arguments or {})}
        return self._submit_reference(body, job_config)

    def _submit_reference(self, body: dict[str, Any], job_config: config.JobConfig | None) -> RemoteJob:
        body["config"] = _config_fields(job_config or config.JobConfig())
        return RemoteJob(self, self.request("POST", "/jobs", body))

    def new_job_if_absent(self, definition: object, job_config: config.JobConfig) -> RemoteJob:
        """Submit unless an active job has the same name; then return that job."""
        if job_config.name is None:
            raise ValueError("new_job_if_absent needs a job name")
        active = self.get_job(job_config.name)
        if active is not None and not active.last_record.is_terminal:
            return active
        try:
            return self.new_job(definition, job_config)
        except RequestRefusedError as exc:
            again = self.get_job(job_config.name)
            if exc.status == 409 and again is not None:
                return again
            raise

    def get_job(self, key: int | str) -> RemoteJob | None:
        """The job with this id or name (the newest for a reused name), or None."""
        try:
            return RemoteJob(self, self.request("GET", f"/jobs/{_quote(str(key))}"))
        except RequestRefusedError as exc:
            if exc.status == 404:
                return None
            raise

    def get_jobs(self) -> list[RemoteJob]:
        return [RemoteJob(self, record) for record in self.request("GET", "/jobs")["jobs"]]

    def get_list(self, name: str) -> list[Any]:
        """A copy of the named list."""
        result: list[Any] = _decode(self.request("GET", f"/lists/{_quote(name)}")["data"])
        return result

    def get_map(self, name: str) -> dict[Any, Any]:
        """A copy of the named map."""
        result: dict[Any, Any] = _decode(self.request("GET", f"/maps/{_quote(name)}")["data"])
        return result

    def destroy_list(self, name: str) -> None:
        """Delete the named list on the cluster (a later ``get_list`` is empty), e.g. before a rerun."""
        self.request("DELETE", f"/lists/{_quote(name)}")

    def destroy_map(self, name: str) -> None:
        """Delete the named map on the cluster (a later ``get_map`` is empty)."""
        self.request("DELETE", f"/maps/{_quote(name)}")

    def get_observable(self, name: str) -> RemoteObservable:
        return RemoteObservable(self, name)

    def list_snapshots(self) -> list[dict[str, Any]]:
        """The exported (named) snapshots, oldest first."""
        found: list[dict[str, Any]] = self.request("GET", "/snapshots")["snapshots"]
        return found

    def delete_snapshot(self, name: str) -> None:
        """Delete the exported snapshot ``name``."""
        self.request("DELETE", f"/snapshots/{_quote(name)}")

    def cluster(self) -> ClusterView:
        """The members, the coordinator and the partition table."""
        return ClusterView.from_dict(self.request("GET", "/cluster"))

    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", "/health")
        return result

    def events(self, since: int = 0, timeout: float | None = None) -> Iterator[records.JobEvent]:
        """The cluster's job events after id ``since``, as they happen (a long-poll loop).

        Every job transition, snapshot, restart and member change, in order, each with
        an ``id`` one above the last; resume a broken loop with ``since=`` the last id
        seen. A reader that fell behind the log's bound gets a ``GAP`` event first.
        With ``timeout`` the iteration ends once that many seconds passed; without,
        it waits for news forever.

        >>> import jetlet
        >>> from jetlet.records import EventKind
        >>> with jetlet.local_cluster(1) as cluster:  # doctest: +SKIP
        ...     job = cluster.new_job(pipeline)
        ...     for event in cluster.events(timeout=60):
        ...         if event.kind is EventKind.JOB_STATUS and event.status == "COMPLETED":
        ...             break
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = LONG_POLL_S if deadline is None else min(LONG_POLL_S, deadline - time.monotonic())
            if left <= 0:
                return
            page = self.request("GET", f"/events?since={since}&timeout={left:.3f}", wait=left)
            for data in page["events"]:
                event = records.JobEvent.from_dict(data)
                since = event.id
                yield event

    def shutdown(self) -> None:
        """Release the client (it holds no connection between calls)."""

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"Client({self.address!r})"


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _config_fields(job_config: config.JobConfig) -> dict[str, Any]:
    fields = {f.name: getattr(job_config, f.name) for f in dataclasses.fields(job_config)}
    fields["processing_guarantee"] = job_config.processing_guarantee.value
    fields["arguments"] = dict(job_config.arguments)
    return fields


def _refusal(exc: urllib.error.HTTPError) -> RequestRefusedError:
    try:
        body = json.loads(exc.read())
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    message = body.get("error") or exc.reason
    kind = _REFUSALS.get(str(body.get("code", "")), RequestRefusedError)
    retry = float(body.get("retry_after_s", 0.0) or exc.headers.get("Retry-After", 0) or 0)
    return kind(f"the member refused the request ({exc.code}): {message}", exc.code, body.get("field"), retry)


class RemoteJob(job.Job):
    """A job on the cluster; each property read fetches its current :class:`~jetlet.records.JobRecord`."""

    def __init__(self, client: Client, record: dict[str, Any]) -> None:
        self._client = client
        self._record = records.JobRecord.from_dict(record)
        self._id = self._record.id
        self._future: concurrent.futures.Future[None] | None = None
        self._lock = threading.Lock()

    @property
    def id(self) -> int:
        return self._id

    @property
    def name(self) -> str:
        return self._record.name

    @property
    def submission_time(self) -> int:
        return self._record.submission_time

    @property
    def status(self) -> job.JobStatus:
        return self.record().status

    @property
    def completion_time(self) -> int | None:
        return self.record().completion_time

    @property
    def config(self) -> dict[str, Any]:
        return dict(self._record.config)

    @property
    def dag_dot(self) -> str:
        return self._record.dag_dot

    def record(self) -> records.JobRecord:
        """The job's record now (one request): status, failure, snapshot, restarts, execution..."""
        self._record = records.JobRecord.from_dict(self._client.request("GET", self._path()))
        return self._record

    @property
    def last_record(self) -> records.JobRecord:
        """The record as of the last request (no request)."""
        return self._record

    def record_status(self) -> str:
        """The status as of the last fetch (no request)."""
        return self._record.status.value

    def _path(self, action: str = "") -> str:
        return f"/jobs/{self._id}" + (f"/{action}" if action else "")

    def _post(self, action: str, body: dict[str, Any]) -> None:
        self._record = records.JobRecord.from_dict(self._client.request("POST", self._path(action), body))

    def join(self, timeout: float | None = None) -> None:
        """Wait until the job ends; raise its failure. ``TimeoutError`` if ``timeout`` passes first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = LONG_POLL_S if deadline is None else max(0.0, deadline - time.monotonic())
            wait = min(remaining, LONG_POLL_S)
            reply = self._client.request("POST", self._path("join"), {"timeout": wait}, wait=wait)
            self._record = records.JobRecord.from_dict(reply)
            if self._record.is_terminal:
                self._raise_failure()
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {self.name!r} still {self._record.status.value} after {timeout} s")

    def _raise_failure(self) -> None:
        if self._record.status is not job.JobStatus.FAILED:
            return
        if self._record.cancelled:
            raise errors.JobCancelledError(self._record.failure)
        failure = errors.JobFailedError(self._record.failure, self._record.failure_traceback)
        raise failure from _unpickled_cause(self._record.failure_cause)

    @property
    def future(self) -> concurrent.futures.Future[None]:
        """A future completed when the job ends (a ``jetlet-client-join`` thread waits for it)."""
        with self._lock:
            if self._future is None:
                self._future = concurrent.futures.Future()
                threading.Thread(target=self._complete_future, name="jetlet-client-join", daemon=True).start()
            return self._future

    def _complete_future(self) -> None:
        assert self._future is not None
        try:
            self.join()
        except BaseException as exc:
            self._future.set_exception(exc)
        else:
            self._future.set_result(None)

    def cancel(self) -> None:
        self._post("cancel", {})

    def suspend(self) -> None:
        self._post("suspend", {})

    def resume(self) -> None:
        self._post("resume", {})

    def restart(self) -> None:
        self._post("restart", {})

    def metrics(self) -> job_metrics.JobMetrics:
        """The job's measurements merged across its members, with real labels (``job.metrics().sum(
        "receivedCount", vertex="sink")``); it also reads as the mapping ``"member/tasklet" -> {name:
        value}`` of before. See :mod:`jetlet.metrics.job_metrics`."""
        return job_metrics.JobMetrics.from_wire(self._client.request("GET", self._path("metrics")))

    @property
    def suspension_cause(self) -> str:
        """Why the job is suspended (empty unless it is ``SUSPENDED``)."""
        return self.record().suspension_cause

    @property
    def snapshot(self) -> dict[str, Any]:
        """The last complete snapshot (``id``, ``time``, ``bytes``, ``entries``; ``count``); typed:
        ``record().last_snapshot``."""
        return dict(self.record().snapshot)

    def export_snapshot(self, name: str) -> dict[str, Any]:
        """Save the job's current state as the snapshot ``name`` (replacing one of that name)."""
        return self._export(name, cancel=False)

    def cancel_and_export_snapshot(self, name: str) -> dict[str, Any]:
        """Save the job's state as the snapshot ``name``, then cancel the job (nothing runs after it).

        Returns once the snapshot is saved, as Jet's ``cancelAndExportSnapshot``: the job may
        still be stopping (``join()`` waits for its end)."""
        return self._export(name, cancel=True)

    def _export(self, name: str, cancel: bool) -> dict[str, Any]:
        body = {"name": name, "cancel": cancel}
        found: dict[str, Any] = self._client.request("POST", self._path("export-snapshot"), body)["snapshot"]
        self.record()
        return found


def _unpickled_cause(encoded: str) -> BaseException | None:
    """The user's exception of a failed job, when it travelled and unpickles here (else None)."""
    if not encoded:
        return None
    try:
        cause = cloudpickle.loads(base64.b64decode(encoded))
    except Exception:
        return None
    return cause if isinstance(cause, BaseException) else None


class RemoteObservable:
    """A named observable on the cluster, read by long-polling from a position."""

    def __init__(self, client: Client, name: str) -> None:
        self._client = client
        self.name = name

    def _fetch(self, position: int, wait: float) -> dict[str, Any]:
        path = f"/observables/{_quote(self.name)}?from={position}&timeout={wait}"
        answer: dict[str, Any] = self._client.request("GET", path, wait=wait)
        return answer

    def items(self) -> list[Any]:
        """The results published so far."""
        result: list[Any] = _decode(self._fetch(0, 0.0)["data"])
        return result

    def iterate(self, timeout: float | None = None) -> Iterator[Any]:
        """Every result in order, until the observable completes; raises its job's failure.

        ``TimeoutError`` if ``timeout`` seconds pass with no new result.
        """
        position = 0
        while True:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                wait = (
                    LONG_POLL_S
                    if deadline is None
                    else min(LONG_POLL_S, max(0.0, deadline - time.monotonic()))
                )
                answer = self._fetch(position, wait)
                batch = _decode(answer["data"])
                if batch or answer["done"]:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"observable {self.name!r}: no result for {timeout} s")
            yield from batch
            position = int(answer["next_position"])
            if answer["done"]:
                if answer["error"]:
                    raise errors.JobFailedError(answer["error"])
                return

    def __iter__(self) -> Iterator[Any]:
        return self.iterate()


def connect(address: str, token: str, timeout: float = 30.0, ca_file: str = "") -> Client:
    """A client of the cluster whose member serves REST at ``address`` (``host:port``).

    With ``ca_file`` (the cluster's CA certificate, PEM) it speaks HTTPS and
    checks the member's certificate. Checks the address and the token at
    once with an authenticated request.
    """
    client = Client(address, token, timeout, ca_file)
    client.request("GET", "/cluster")
    return client
