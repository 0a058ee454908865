"""The REST API's gate: the bearer token (or the console's session), failure limits, errors as JSON.

Used by :mod:`jetlet._cluster.rest` as its one middleware.

Theory of operation
-------------------
:func:`auth_and_errors` admits a request to a path outside
:data:`PUBLIC_PATHS` (and the console's public pages) when it carries
``Authorization: Bearer <token>`` (compared in constant time), or, without
that header, the console's session cookie with its CSRF token for an action
(:mod:`~jetlet._cluster.console_auth`). Failures are limited per client
address (:mod:`~jetlet._cluster.auth_limiter`, kept in the application under
:data:`LIMITER_KEY`): past a burst, the address is answered ``429`` with
``Retry-After`` before its token is even checked, and failures are logged as
one summary line per interval. Then the handler runs, and whatever it
raises becomes a JSON error: a :class:`~jetlet._cluster.rest_requests.BadRequest`
its status naming the field, the router's ``404``/``405`` with the way to
the route list, a typed :class:`~jetlet.errors.JetletError` its own status
and wire form (with ``Retry-After`` for an unavailable cluster).
"""

from __future__ import annotations

import hmac
import logging
import math
from collections.abc import Awaitable, Callable

from aiohttp import web

from jetlet import errors
from jetlet._cluster import auth_limiter, console, console_auth
from jetlet._cluster import rest_requests as req

_log = logging.getLogger("jetlet._cluster.rest")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

PUBLIC_PATHS = frozenset({"/health", "/ready", "/openapi.json"})
"""Paths served without a token."""
LIMITER_KEY = web.AppKey("jetlet_auth_limiter", auth_limiter.FailureLimiter)
"""The application's limiter of failed authentications (the web console's login may share it)."""


def _rate_limited(request: web.Request) -> web.Response | None:
    """A ``429`` for an address that failed to authenticate too often, else None."""
    delay = request.app[LIMITER_KEY].allow(request.remote or "")
    if delay is None:
        return None
    req.counted(request, "refused_rate_limited")
    _log_failures(request.app[LIMITER_KEY])
    response = req.error_response(
        429, "too many failed authentications from this address: wait Retry-After seconds"
    )
    response.headers["Retry-After"] = str(max(1, math.ceil(delay)))
    return response


def _log_failures(limiter: auth_limiter.FailureLimiter) -> None:
    summary = limiter.summary()  # one line per interval, however many requests failed
    if summary is not None:
        _log.warning("REST: bad or missing tokens: %s", summary)


@web.middleware
async def auth_and_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path not in PUBLIC_PATHS and not console.is_public(request.path):
        limited = _rate_limited(request)
        if limited is not None:
            return limited
        expected = request.app[req.STATE_KEY].token
        given = request.headers.get("Authorization", "")
        try:
            by_console = not given and console_auth.admit(request)
        except console_auth.Refused as exc:
            req.counted(request, "refused_unauthorized")
            return req.error_response(exc.status, str(exc))
        if not by_console and not hmac.compare_digest(given.encode(), f"Bearer {expected}".encode()):
            req.counted(request, "refused_unauthorized")
            request.app[LIMITER_KEY].failed(request.remote or "")
            _log_failures(request.app[LIMITER_KEY])
            response = req.error_response(
                401, "a valid bearer token is required (Authorization: Bearer <token>)"
            )
            response.headers["WWW-Authenticate"] = "Bearer"
            return response
    try:
        return await handler(request)
    except req.BadRequest as exc:
        req.counted(request, "refused_bad_request")
        return req.error_response(exc.status, str(exc), exc.field)
    except web.HTTPException as exc:  # the router's 404 and 405: JSON, as every other error
        if exc.status < 400:
            raise
        response = req.error_response(
            exc.status, f"{request.method} {request.path}: {exc.reason} (the routes: GET /openapi.json)"
        )
        if "Allow" in exc.headers:
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    except errors.JetletError as exc:  # typed: the client raises the same type (jetlet.errors.from_wire)
        if isinstance(exc, errors.InvalidJobError):
            req.counted(request, "refused_bad_request")
        wire = errors.to_wire(exc)
        response = web.json_response({"error": str(exc), **wire}, status=exc.http_status)
        if isinstance(exc, errors.ClusterUnavailableError):
            response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
        return response
