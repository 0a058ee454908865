"""The member's REST API (aiohttp): jobs, data structures and the cluster, for authenticated clients.

Theory of operation
-------------------
:func:`create_app` builds an aiohttp application over a
:class:`~jetlet._cluster.job_service.JobService` and a function describing
the cluster. Every route except ``/health``, ``/ready`` and ``/openapi.json`` requires
``Authorization: Bearer <token>``; the token is compared in constant time,
and a request without it is answered ``401`` and counted. Request bodies are
JSON objects checked field by field before anything reaches the service: a
body that is too large (``413``), not JSON, not an object, missing a field
or holding a field of the wrong type (``400``) is refused with a message
naming the field, and counted. Such a request never reaches a job, so it
cannot harm one. Unknown jobs answer ``404``; an operation the job's state
does not allow answers ``409``. Every error, an unknown path's ``404`` and a
wrong method's ``405`` included, is a JSON object with an ``error`` text.

A job travels as base64 of the cloudpickle of its DAG (``definition``), or
by reference: ``entrypoint`` (``package.module:function`` in the worker
image) or ``source`` and ``entrypoint`` (a function of that source), called
with ``arguments``. :mod:`~jetlet._cluster.job_definition` turns each form
into a validated DAG on the thread pool before the service sees the job (a
bad one is a ``400`` naming its field, and nothing is registered). Data read
back (lists, maps, observable items) travels as base64 of a cloudpickle
in ``data``: both sides of that exchange hold the token. The service's
blocking calls (``join`` and observable long-polls wait) run on a small
thread pool owned by the application (``jetlet-rest`` threads), so the event
loop never blocks. ``/openapi.json`` is an OpenAPI 3 document generated from
the route table, so it lists every route.

:class:`RestServer` runs the application on an event loop thread of its own
(for tests and tools); the member process runs it on its main loop instead.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import concurrent.futures
import dataclasses
import functools
import hmac
import json
import logging
import math
import ssl
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import cloudpickle
from aiohttp import web

from jetlet import errors
from jetlet._cluster import events as events_mod
from jetlet._cluster import job_definition, job_service

_log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ClusterInfo = Callable[[], dict[str, Any]]
MembershipHandler = Callable[[dict[str, Any]], Awaitable[None]]
ReadinessReport = Callable[[], dict[str, Any]]
"""A member's readiness: a dict with ``ready`` (bool) and ``missing`` (see ``jetlet._cluster.readiness``)."""
T = TypeVar("T")

PUBLIC_PATHS = frozenset({"/health", "/ready", "/openapi.json"})
SSE_POLL_S = 15.0
"""How long one wait of an event stream lasts before a keep-alive comment is sent."""
MAX_JOIN_WAIT_S = 30.0
"""Longest one ``join`` or observable request waits; clients repeat it to wait longer."""


@dataclasses.dataclass
class _State:
    """What the handlers of one application share."""

    service: job_service.JobService
    cluster_info: ClusterInfo
    token: str
    max_body: int
    pool: concurrent.futures.ThreadPoolExecutor
    membership: MembershipHandler | None = None
    readiness: ReadinessReport | None = None
    counters: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)


STATE_KEY = web.AppKey("jetlet_state", _State)


def refused_counts(app: web.Application) -> dict[str, int]:
    """How many requests were refused, by reason (``refused_unauthorized``, ``refused_bad_request``)."""
    return dict(app[STATE_KEY].counters)


class BadRequest(Exception):
    """A request body or parameter is invalid; ``field`` names what is wrong."""

    def __init__(self, field: str, message: str, status: int = 400) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.status = status


def encode_data(value: object) -> str:
    """Python data as base64 text of its cloudpickle (what ``data`` fields carry)."""
    return base64.b64encode(cloudpickle.dumps(value)).decode("ascii")


def _error(status: int, message: str, field: str | None = None) -> web.Response:
    body: dict[str, Any] = {"error": message}
    if field is not None:
        body["field"] = field
    return web.json_response(body, status=status)


def _counted(request: web.Request, what: str) -> None:
    request.app[STATE_KEY].counters[what] += 1


@web.middleware
async def _auth_and_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path not in PUBLIC_PATHS:
        expected = request.app[STATE_KEY].token
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {expected}".encode()):
            _counted(request, "refused_unauthorized")
            _log.warning(
                "REST: refused %s %s from %s: bad or missing token",
                request.method,
                request.path,
                request.remote,
            )
            response = _error(401, "a valid bearer token is required (Authorization: Bearer <token>)")
            response.headers["WWW-Authenticate"] = "Bearer"
            return response
    try:
        return await handler(request)
    except BadRequest as exc:
        _counted(request, "refused_bad_request")
        return _error(exc.status, str(exc), exc.field)
    except web.HTTPException as exc:  # the router's 404 and 405: JSON, as every other error
        if exc.status < 400:
            raise
        response = _error(
            exc.status, f"{request.method} {request.path}: {exc.reason} (the routes: GET /openapi.json)"
        )
        if "Allow" in exc.headers:
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    except errors.JetletError as exc:  # typed: the client raises the same type (jetlet.errors.from_wire)
        if isinstance(exc, errors.InvalidJobError):
            _counted(request, "refused_bad_request")
        wire = errors.to_wire(exc)
        response = web.json_response({"error": str(exc), **wire}, status=exc.http_status)
        if isinstance(exc, errors.ClusterUnavailableError):
            response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
        return response


async def _json_body(request: web.Request) -> dict[str, Any]:
    limit = request.app[STATE_KEY].max_body
    if request.content_length is not None and request.content_length > limit:
        raise BadRequest("body", f"is {request.content_length} bytes, more than the limit of {limit}", 413)
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise BadRequest("body", f"is more than the limit of {limit} bytes", 413) from None
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest("body", f"is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("body", f"must be a JSON object, got {type(body).__name__}")
    return body


def _field(body: dict[str, Any], name: str, kind: type[T] | tuple[type, ...], default: Any = ...) -> Any:
    if name not in body:
        if default is ...:
            raise BadRequest(name, "is required")
        return default
    value = body[name]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise BadRequest(name, f"must be {_kind_name(kind)}, got a boolean")
    if not isinstance(value, kind):
        raise BadRequest(name, f"must be {_kind_name(kind)}, got {type(value).__name__}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {str: "a string", int: "an integer", float: "a number", dict: "an object", bool: "a boolean"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _query_number(request: web.Request, name: str, default: float, kind: type = float) -> Any:
    text = request.query.get(name)
    if text is None:
        return default
    try:
        value = kind(text)
    except ValueError:
        raise BadRequest(name, f"must be {_kind_name(kind)}, got {text!r}") from None
    if value < 0:
        raise BadRequest(name, f"must not be negative, got {text}")
    return value


async def _blocking(request: web.Request, call: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(request.app[STATE_KEY].pool, call)


def _service(request: web.Request) -> job_service.JobService:
    return request.app[STATE_KEY].service


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "refused": refused_counts(request.app)})


async def _ready(request: web.Request) -> web.Response:
    report = request.app[STATE_KEY].readiness
    if report is None:
        return web.json_response({"ready": True, "missing": {}})
    body = report()
    return web.json_response(body, status=200 if body["ready"] else 503)


async def _cluster(request: web.Request) -> web.Response:
    return web.json_response(request.app[STATE_KEY].cluster_info())


async def _list_jobs(request: web.Request) -> web.Response:
    records = await _blocking(request, _service(request).list_jobs)
    return web.json_response({"jobs": [r.to_dict() for r in records]})


async def _submit(request: web.Request) -> web.Response:
    body = await _json_body(request)
    job_config = _field(body, "config", dict, {})
    plan = functools.partial(job_definition.definition_from_request, body)  # runs user code: off the loop
    definition = await _blocking(request, plan)
    record = await _blocking(request, functools.partial(_service(request).submit, definition, job_config))
    return web.json_response(record.to_dict(), status=201)


async def _get_job(request: web.Request) -> web.Response:
    record = await _blocking(request, functools.partial(_service(request).get, request.match_info["job"]))
    return web.json_response(record.to_dict())


async def _metrics(request: web.Request) -> web.Response:
    job_key = request.match_info["job"]
    metrics = await _blocking(request, functools.partial(_service(request).metrics, job_key))
    return web.json_response({"metrics": metrics})


async def _join(request: web.Request) -> web.Response:
    body = await _json_body(request)
    timeout = _field(body, "timeout", (int, float), MAX_JOIN_WAIT_S)
    if timeout < 0:
        raise BadRequest("timeout", f"must not be negative, got {timeout}")
    wait = min(float(timeout), MAX_JOIN_WAIT_S)
    call = functools.partial(_service(request).join, request.match_info["job"], wait)
    return web.json_response((await _blocking(request, call)).to_dict())


def _operation(perform: Callable[[job_service.JobService, str], Any], summary: str) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        await _json_body(request)
        call = functools.partial(perform, _service(request), request.match_info["job"])
        return web.json_response((await _blocking(request, call)).to_dict())

    handle.__doc__ = summary
    return handle


async def _export_snapshot(request: web.Request) -> web.Response:
    body = await _json_body(request)
    name = _field(body, "name", str)
    if not name.strip() or "/" in name:
        raise BadRequest("name", f"must be a non-empty name without '/', got {name!r}")
    cancel = _field(body, "cancel", bool, False)
    call = functools.partial(_service(request).export_snapshot, request.match_info["job"], name, cancel)
    return web.json_response({"snapshot": await _blocking(request, call)}, status=201)


async def _list_snapshots(request: web.Request) -> web.Response:
    return web.json_response({"snapshots": await _blocking(request, _service(request).list_snapshots)})


async def _delete_snapshot(request: web.Request) -> web.Response:
    call = functools.partial(_service(request).delete_snapshot, request.match_info["name"])
    await _blocking(request, call)
    return web.json_response({"ok": True})


async def _get_list(request: web.Request) -> web.Response:
    items = await _blocking(
        request, functools.partial(_service(request).get_list, request.match_info["name"])
    )
    return web.json_response({"data": encode_data(items)})


async def _get_map(request: web.Request) -> web.Response:
    entries = await _blocking(
        request, functools.partial(_service(request).get_map, request.match_info["name"])
    )
    return web.json_response({"data": encode_data(entries)})


async def _observable(request: web.Request) -> web.Response:
    position = _query_number(request, "from", 0, int)
    timeout = min(_query_number(request, "timeout", 0.0), MAX_JOIN_WAIT_S)
    call = functools.partial(
        _service(request).observable_items, request.match_info["name"], position, timeout
    )
    found = await _blocking(request, call)
    return web.json_response(
        {
            "data": encode_data(found.items),
            "next_position": found.next_position,
            "done": found.done,
            "error": found.error,
        }
    )


async def _membership(request: web.Request) -> web.Response:
    handler = request.app[STATE_KEY].membership
    if handler is None:
        return _error(404, "this server takes no part in a cluster's membership")
    await handler(await _json_body(request))
    return web.json_response({"ok": True})


async def _events(request: web.Request) -> web.StreamResponse:
    """The job-event feed: JSON long-poll (``?since=N&timeout=S``), or server-sent events."""
    since = _query_number(request, "since", 0, int)
    if "text/event-stream" in request.headers.get("Accept", ""):
        last_seen = request.headers.get("Last-Event-ID", "")
        if last_seen:
            if not last_seen.isdigit():
                raise BadRequest("Last-Event-ID", f"must be an event id (a number), got {last_seen!r}")
            since = int(last_seen)
        return await _event_stream(request, since)
    timeout = min(_query_number(request, "timeout", 0.0), MAX_JOIN_WAIT_S)
    page = await _next_events(request, since, timeout)
    return web.json_response({"events": [e.to_dict() for e in page.events], "last_id": page.last_id})


async def _next_events(request: web.Request, since: int, timeout: float) -> events_mod.EventsPage:
    future = _service(request).events(since, timeout)
    try:
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout + 5.0)
    except TimeoutError:
        return events_mod.EventsPage([], since)


async def _event_stream(request: web.Request, since: int) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    backoff = 0.1
    while True:
        try:
            page = await _next_events(request, since, SSE_POLL_S)
        except errors.ClusterUnavailableError as exc:  # a take-over: the stream rides through it
            await asyncio.sleep(max(exc.retry_after_s, backoff))
            backoff = min(backoff * 2, 5.0)
            continue
        backoff = 0.1
        chunks = [
            f"id: {e.id}\nevent: {e.kind.value}\ndata: {json.dumps(e.to_dict())}\n\n" for e in page.events
        ]
        try:
            await response.write(("".join(chunks) or ": keep-alive\n\n").encode())
        except (ConnectionResetError, RuntimeError):
            break
        if page.events:
            since = page.events[-1].id
    return response


async def _openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


_ROUTES: list[tuple[str, str, Handler, str]] = [
    ("GET", "/health", _health, "Liveness, and counts of refused requests."),
    ("GET", "/ready", _ready, "Readiness: 200 when joined with a coordinator and partition table, else 503."),
    ("GET", "/openapi.json", _openapi, "This OpenAPI document."),
    ("GET", "/cluster", _cluster, "Members, coordinator and partition table."),
    (
        "GET",
        "/events",
        _events,
        "The job-event feed after ?since=N (waiting ?timeout=S for one); with Accept: text/event-stream, "
        "server-sent events resumable with Last-Event-ID.",
    ),
    ("GET", "/jobs", _list_jobs, "Every job known to the cluster."),
    (
        "POST",
        "/jobs",
        _submit,
        "Submit a job: {definition: base64 cloudpickle of a DAG} or {entrypoint: 'package.module:function'} "
        "or {source: Python source, entrypoint: function}, with arguments (the function's) and config "
        "(JobConfig fields).",
    ),
    ("GET", "/jobs/{job}", _get_job, "A job's status, config, DAG (DOT) and failure."),
    ("GET", "/jobs/{job}/metrics", _metrics, "A job's metrics."),
    ("POST", "/jobs/{job}/join", _join, "Wait up to {timeout} seconds (at most 30) for the job to end."),
    (
        "POST",
        "/jobs/{job}/cancel",
        _operation(lambda service, key: service.cancel(key), "Cancel the job."),
        "Cancel the job (it ends FAILED).",
    ),
    (
        "POST",
        "/jobs/{job}/suspend",
        _operation(lambda service, key: service.suspend(key), "Suspend the job."),
        "Suspend the job.",
    ),
    (
        "POST",
        "/jobs/{job}/resume",
        _operation(lambda service, key: service.resume(key), "Resume the job."),
        "Resume a suspended job.",
    ),
    (
        "POST",
        "/jobs/{job}/restart",
        _operation(lambda service, key: service.restart(key), "Restart the job."),
        "Restart the job's execution.",
    ),
    (
        "POST",
        "/jobs/{job}/export-snapshot",
        _export_snapshot,
        "Save the job's state as the named snapshot {name}; with {cancel: true} the job then ends.",
    ),
    ("GET", "/snapshots", _list_snapshots, "The exported (named) snapshots."),
    ("DELETE", "/snapshots/{name}", _delete_snapshot, "Delete an exported snapshot."),
    ("GET", "/lists/{name}", _get_list, "A named list, as base64 cloudpickle in data."),
    ("GET", "/maps/{name}", _get_map, "A named map, as base64 cloudpickle in data."),
    ("POST", "/membership", _membership, "Membership messages between members (join, members, heartbeat)."),
    ("GET", "/observables/{name}", _observable, "Observable items from ?from=N, waiting ?timeout=S for one."),
]

_BODIES: dict[str, dict[str, Any]] = {
    "/jobs": {
        "type": "object",
        "properties": {
            "definition": {"type": "string", "format": "byte", "description": "base64 cloudpickle of a DAG"},
            "entrypoint": {
                "type": "string",
                "description": "package.module:function in the worker image; with source, a function of it",
            },
            "source": {"type": "string", "description": "Python source that defines the entrypoint"},
            "arguments": {"type": "object", "description": "keyword arguments of the entrypoint"},
            "config": {"type": "object"},
        },
        "oneOf": [{"required": ["definition"]}, {"required": ["entrypoint"]}],
    },
    "/jobs/{job}/export-snapshot": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}, "cancel": {"type": "boolean"}},
    },
    "/jobs/{job}/join": {"type": "object", "properties": {"timeout": {"type": "number", "minimum": 0}}},
}


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3 description of every route."""
    paths: dict[str, dict[str, Any]] = {}
    for method, path, _, summary in _ROUTES:
        operation: dict[str, Any] = {
            "summary": summary,
            "responses": {
                "200": {"description": "OK"},
                "400": {"description": "Invalid request; names the field"},
            },
        }
        parameters = [
            {"name": part[1:-1], "in": "path", "required": True, "schema": {"type": "string"}}
            for part in path.split("/")
            if part.startswith("{")
        ]
        if parameters:
            operation["parameters"] = parameters
        if path not in PUBLIC_PATHS:
            operation["security"] = [{"bearer": []}]
            operation["responses"]["401"] = {"description": "Missing or wrong bearer token"}
        if path == "/ready":
            operation["responses"] = {
                "200": {"description": "Ready"},
                "503": {"description": "Not ready; missing names what is missing"},
            }
        if method == "POST" and path in _BODIES:
            operation["requestBody"] = {"content": {"application/json": {"schema": _BODIES[path]}}}
        paths.setdefault(path, {})[method.lower()] = operation
    return {
        "openapi": "3.0.3",
        "info": {"title": "jetlet member REST API", "version": "1"},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "paths": paths,
    }


async def _close_pool(app: web.Application) -> None:
    app[STATE_KEY].pool.shutdown(wait=True, cancel_futures=True)


def create_app(
    service: job_service.JobService,
    cluster_info: ClusterInfo,
    token: str,
    max_body: int = 64 * 1024 * 1024,
    membership: MembershipHandler | None = None,
    readiness: ReadinessReport | None = None,
) -> web.Application:
    """The REST application; ``token`` must be non-empty; without ``readiness`` ``/ready`` is always 200."""
    if not token:
        raise ValueError("the REST API needs a non-empty bearer token")
    app = web.Application(middlewares=[_auth_and_errors], client_max_size=max_body)
    pool = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="jetlet-rest")
    app[STATE_KEY] = _State(service, cluster_info, token, max_body, pool, membership, readiness)
    app.on_cleanup.append(_close_pool)
    for method, path, handler, _ in _ROUTES:
        app.router.add_route(method, path, handler)
    return app


async def start_site(
    app: web.Application, host: str, port: int, ssl_context: ssl.SSLContext | None = None
) -> tuple[web.AppRunner, tuple[str, int]]:
    """Serve ``app`` on ``host:port`` (0: any free port; HTTPS with ``ssl_context``); return the runner
    and the bound address."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    await site.start()
    server = site._server
    assert isinstance(server, asyncio.base_events.Server)
    bound = server.sockets[0].getsockname()
    return runner, (str(bound[0]), int(bound[1]))


class RestServer:
    """The REST application served from an event loop thread of its own.

    >>> import jetlet
    >>> svc = job_service.EmbeddedJobService(jetlet.embedded())
    >>> server = RestServer(create_app(svc, dict, "t"))
    >>> host, port = server.start("127.0.0.1", 0)
    >>> port > 0
    True
    >>> server.stop(); svc.close()
    """

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="jetlet-rest-loop", daemon=True)
        self._runner: web.AppRunner | None = None

    def start(self, host: str, port: int) -> tuple[str, int]:
        """Bind and serve; return the bound ``(host, port)``."""
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(start_site(self.app, host, port), self._loop)
        self._runner, address = future.result(10)
        return address

    def stop(self) -> None:
        """Stop serving, close the application and its threads, and end the loop thread."""
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
            self._runner = None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
