"""The member's REST API (aiohttp): jobs, data structures and the cluster, for authenticated clients.

Theory of operation
-------------------
:func:`create_app` builds an aiohttp application over a
:class:`~jetlet._cluster.job_service.JobService` and a function describing
the cluster. Every route except ``/health``, ``/ready`` and ``/openapi.json`` requires
``Authorization: Bearer <token>``, checked with per-address failure limits
by the application's middleware (:mod:`~jetlet._cluster.rest_auth`), which
also turns every error into JSON. Request bodies are
JSON objects checked field by field (:mod:`~jetlet._cluster.rest_requests`)
before anything reaches the service: a
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
the route table (:mod:`~jetlet._cluster.rest_openapi`), so it lists every
route. ``/events`` serves the job-event feed as a JSON long-poll or as
server-sent events (:mod:`~jetlet._cluster.rest_events`).
``/jobs/{job}/dag`` gives the job's DAG as JSON (:mod:`~jetlet._cluster.dag_graph`).

The web console (:mod:`~jetlet._cluster.console`) is served from the same
application under ``/console/`` without a token; a request without an
``Authorization`` header may instead be admitted by the console's session
cookie, with its CSRF token for an action (:mod:`~jetlet._cluster.console_auth`).

:class:`RestServer` runs the application on an event loop thread of its own
(for tests and tools); the member process runs it on its main loop instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import ssl
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from jetlet._cluster import (
    auth_limiter,
    console,
    console_auth,
    dag_graph,
    job_definition,
    job_service,
    membership_auth,
    rest_auth,
    rest_events,
    rest_openapi,
)
from jetlet._cluster import rest_requests as req

_log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

PUBLIC_PATHS = rest_auth.PUBLIC_PATHS
MAX_JOIN_WAIT_S = req.MAX_JOIN_WAIT_S
IDLE_TIMEOUT_S = 5.0
"""A connection that has not sent a whole request's headers this long after it opened, or after its
last answer (an idle keep-alive), is closed: a client holding connections open with partial headers
(slowloris) holds each for at most this long."""


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "refused": req.refused_counts(request.app)})


async def _ready(request: web.Request) -> web.Response:
    report = request.app[req.STATE_KEY].readiness
    if report is None:
        return web.json_response({"ready": True, "missing": {}})
    body = report()
    return web.json_response(body, status=200 if body["ready"] else 503)


async def _cluster(request: web.Request) -> web.Response:
    return web.json_response(request.app[req.STATE_KEY].cluster_info())


async def _list_jobs(request: web.Request) -> web.Response:
    records = await req.blocking(request, req.service(request).list_jobs)
    return web.json_response({"jobs": [r.to_dict() for r in records]})


async def _submit(request: web.Request) -> web.Response:
    body = await req.json_body(request)
    job_config = req.field(body, "config", dict, {})
    plan = functools.partial(job_definition.definition_from_request, body)  # runs user code: off the loop
    definition = await req.blocking(request, plan)
    record = await req.blocking(
        request, functools.partial(req.service(request).submit, definition, job_config)
    )
    return web.json_response(record.to_dict(), status=201)


async def _get_job(request: web.Request) -> web.Response:
    record = await req.blocking(
        request, functools.partial(req.service(request).get, request.match_info["job"])
    )
    return web.json_response(record.to_dict())


async def _dag(request: web.Request) -> web.Response:
    record = await req.blocking(
        request, functools.partial(req.service(request).get, request.match_info["job"])
    )
    return web.json_response(dag_graph.from_dot(record.dag_dot))


async def _metrics(request: web.Request) -> web.Response:
    job_key = request.match_info["job"]
    metrics = await req.blocking(request, functools.partial(req.service(request).metrics, job_key))
    return web.json_response(metrics)  # {"metrics": per member/tasklet, "samples": [{name, labels, value}]}


async def _join(request: web.Request) -> web.Response:
    body = await req.json_body(request)
    timeout = req.field(body, "timeout", (int, float), MAX_JOIN_WAIT_S)
    if timeout < 0:
        raise req.BadRequest("timeout", f"must not be negative, got {timeout}")
    wait = min(float(timeout), MAX_JOIN_WAIT_S)
    call = functools.partial(req.service(request).join, request.match_info["job"], wait)
    return web.json_response((await req.waiting(request, call)).to_dict())


def _operation(perform: Callable[[job_service.JobService, str], Any], summary: str) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        await req.json_body(request)
        call = functools.partial(perform, req.service(request), request.match_info["job"])
        return web.json_response((await req.blocking(request, call)).to_dict())

    handle.__doc__ = summary
    return handle


async def _export_snapshot(request: web.Request) -> web.Response:
    body = await req.json_body(request)
    name = req.field(body, "name", str)
    if not name.strip() or "/" in name:
        raise req.BadRequest("name", f"must be a non-empty name without '/', got {name!r}")
    cancel = req.field(body, "cancel", bool, False)
    call = functools.partial(req.service(request).export_snapshot, request.match_info["job"], name, cancel)
    return web.json_response({"snapshot": await req.blocking(request, call)}, status=201)


async def _list_snapshots(request: web.Request) -> web.Response:
    return web.json_response({"snapshots": await req.blocking(request, req.service(request).list_snapshots)})


async def _delete_snapshot(request: web.Request) -> web.Response:
    call = functools.partial(req.service(request).delete_snapshot, request.match_info["name"])
    await req.blocking(request, call)
    return web.json_response({"ok": True})


async def _get_list(request: web.Request) -> web.Response:
    items = await req.blocking(
        request, functools.partial(req.service(request).get_list, request.match_info["name"])
    )
    return web.json_response({"data": req.encode_data(items)})


async def _get_map(request: web.Request) -> web.Response:
    entries = await req.blocking(
        request, functools.partial(req.service(request).get_map, request.match_info["name"])
    )
    return web.json_response({"data": req.encode_data(entries)})


def _destroy(kind: str) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        call = functools.partial(req.service(request).destroy, kind, request.match_info["name"])
        await req.blocking(request, call)
        return web.json_response({"ok": True})

    return handle


async def _observable(request: web.Request) -> web.Response:
    position = req.query_number(request, "from", 0, int)
    timeout = min(req.query_number(request, "timeout", 0.0), MAX_JOIN_WAIT_S)
    call = functools.partial(
        req.service(request).observable_items, request.match_info["name"], position, timeout
    )
    found = await req.waiting(request, call)
    return web.json_response(
        {
            "data": req.encode_data(found.items),
            "next_position": found.next_position,
            "done": found.done,
            "error": found.error,
        }
    )


async def _membership(request: web.Request) -> web.Response:
    state = request.app[req.STATE_KEY]
    if state.membership is None:
        return req.error_response(404, "this server takes no part in a cluster's membership")
    message = await req.json_body(request)
    signature = request.headers.get(membership_auth.HEADER, "")
    refused = membership_auth.verify(
        state.membership_secret, await request.read(), signature, int(time.time() * 1000)
    )
    if refused is not None:
        req.counted(request, "refused_membership")
        state.membership_refusals.note(request.remote or "", message, refused)
        size = len(state.cluster_info().get("members", []))
        return web.json_response({"error": refused, "cluster_size": size}, status=403)
    await state.membership(message)
    return web.json_response({"ok": True})


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
        rest_events.events,
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
    ("GET", "/jobs/{job}/dag", _dag, "A job's DAG as JSON: vertices (parallelism) and edges (routing)."),
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
    ("DELETE", "/lists/{name}", _destroy("list"), "Delete a named list (a later read finds it empty)."),
    ("DELETE", "/maps/{name}", _destroy("map"), "Delete a named map (a later read finds it empty)."),
    ("POST", "/membership", _membership, "Membership messages between members (join, members, heartbeat)."),
    ("GET", "/observables/{name}", _observable, "Observable items from ?from=N, waiting ?timeout=S for one."),
]


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3 description of every route."""
    routes = [*_ROUTES, *console.ROUTES]
    public = PUBLIC_PATHS | {path for _, path, _, _ in console.ROUTES}
    return rest_openapi.document([(method, path, summary) for method, path, _, summary in routes], public)


async def _close_pools(app: web.Application) -> None:
    app[req.STATE_KEY].pool.shutdown(wait=True, cancel_futures=True)
    app[req.STATE_KEY].waits.shutdown(wait=True, cancel_futures=True)


def create_app(
    service: job_service.JobService,
    cluster_info: req.ClusterInfo,
    token: str,
    max_body: int = 64 * 1024 * 1024,
    membership: req.MembershipHandler | None = None,
    readiness: req.ReadinessReport | None = None,
    console_anonymous: str = "none",
    membership_secret: bytes = b"",
) -> web.Application:
    """The REST application; ``token`` must be non-empty; without ``readiness`` ``/ready`` is always 200;
    ``console_anonymous="read-only"`` lets the console show the cluster and jobs without a login."""
    if not token:
        raise ValueError("the REST API needs a non-empty bearer token")
    if membership is not None and not membership_secret:
        raise ValueError("membership messages need the cluster secret to check their signatures")
    app = web.Application(middlewares=[rest_auth.auth_and_errors], client_max_size=max_body)
    pool = concurrent.futures.ThreadPoolExecutor(req.SHORT_REQUEST_THREADS, thread_name_prefix="jetlet-rest")
    waits = concurrent.futures.ThreadPoolExecutor(
        req.MAX_WAITING_REQUESTS, thread_name_prefix="jetlet-rest-wait"
    )
    app[req.STATE_KEY] = req.State(
        service,
        cluster_info,
        token,
        max_body,
        pool,
        waits,
        membership,
        readiness,
        membership_secret=membership_secret,
        membership_refusals=membership_auth.RefusalLog(),
    )
    limiter = auth_limiter.FailureLimiter()  # bad bearer tokens and wrong console logins alike
    app[rest_auth.LIMITER_KEY] = limiter
    app[console_auth.AUTH_KEY] = console_auth.ConsoleAuth(token, console_anonymous, limiter=limiter)
    rest_events.install(app)
    app.on_cleanup.append(_close_pools)
    for method, path, handler, _ in [*_ROUTES, *console.ROUTES]:
        app.router.add_route(method, path, handler)
    return app


async def start_site(
    app: web.Application, host: str, port: int, ssl_context: ssl.SSLContext | None = None
) -> tuple[web.AppRunner, tuple[str, int]]:
    """Serve ``app`` on ``host:port`` (0: any free port; HTTPS with ``ssl_context``); return the runner
    and the bound address."""
    runner = web.AppRunner(app, access_log=None, keepalive_timeout=IDLE_TIMEOUT_S)  # also bounds headers
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
