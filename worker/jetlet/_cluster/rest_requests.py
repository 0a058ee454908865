"""What the REST API's handlers share: the application's state, the checks of a request, typed refusals.

Used by :mod:`jetlet._cluster.rest` (the routes and their handlers).

Theory of operation
-------------------
An application's handlers share one :class:`State` (the service, the
cluster description, the token, the body limit, the thread pool, counters
of refused requests), kept in the application under :data:`STATE_KEY`.
A request's body is read by :func:`json_body`, which refuses one that is
too large (``413``), not JSON or not an object (``400``); its fields are
read by :func:`field` and its query parameters by :func:`query_number`,
which refuse a missing field or one of the wrong type. Each refusal is a
:class:`BadRequest` naming the field, which the REST middleware answers as
a JSON error and counts (:func:`refused_counts`). The service's blocking
calls run on the application's thread pool through :func:`blocking`, so
the event loop never blocks.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import concurrent.futures
import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web

from jetlet import _pickling
from jetlet._cluster import job_service

ClusterInfo = Callable[[], dict[str, Any]]
MembershipHandler = Callable[[dict[str, Any]], Awaitable[None]]
ReadinessReport = Callable[[], dict[str, Any]]
"""A member's readiness: a dict with ``ready`` (bool) and ``missing`` (see ``jetlet._cluster.readiness``)."""
T = TypeVar("T")
MAX_JOIN_WAIT_S = 30.0
"""Longest one ``join``, observable or event request waits; clients repeat it to wait longer."""
MAX_WAITING_REQUESTS = 64
"""Threads for waiting requests (``join``, observable reads); more wait in line for one."""
SHORT_REQUEST_THREADS = 8
"""Threads that answer every other request."""


@dataclasses.dataclass
class State:
    """What the handlers of one application share."""

    service: job_service.JobService
    cluster_info: ClusterInfo
    token: str
    max_body: int
    pool: concurrent.futures.ThreadPoolExecutor
    """Threads that answer short requests."""
    waits: concurrent.futures.ThreadPoolExecutor
    """Threads that hold long waits (``join``, observable reads), so that waiting clients never take
    the threads of short requests (16 clients joining a job once blocked every other request)."""
    membership: MembershipHandler | None = None
    readiness: ReadinessReport | None = None
    membership_secret: bytes = b""
    """The cluster secret that membership messages must be signed with (see ``membership_auth``)."""
    membership_refusals: Any = None
    """The :class:`~jetlet._cluster.membership_auth.RefusalLog` of refused membership messages."""
    counters: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)


STATE_KEY = web.AppKey("jetlet_state", State)


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
    return base64.b64encode(_pickling.cloudpickle_dumps(value)).decode("ascii")


def error_response(status: int, message: str, field: str | None = None) -> web.Response:
    body: dict[str, Any] = {"error": message}
    if field is not None:
        body["field"] = field
    return web.json_response(body, status=status)


def counted(request: web.Request, what: str) -> None:
    request.app[STATE_KEY].counters[what] += 1


async def json_body(request: web.Request) -> dict[str, Any]:
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


def field(body: dict[str, Any], name: str, kind: type[T] | tuple[type, ...], default: Any = ...) -> Any:
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


def query_number(request: web.Request, name: str, default: float, kind: type = float) -> Any:
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


async def blocking(request: web.Request, call: Callable[[], T]) -> T:
    """``call()`` on a thread of the short requests' pool."""
    return await asyncio.get_running_loop().run_in_executor(request.app[STATE_KEY].pool, call)


async def waiting(request: web.Request, call: Callable[[], T]) -> T:
    """``call()``, which may wait up to ``MAX_JOIN_WAIT_S``, on a thread of the waits' pool."""
    return await asyncio.get_running_loop().run_in_executor(request.app[STATE_KEY].waits, call)


def service(request: web.Request) -> job_service.JobService:
    return request.app[STATE_KEY].service
