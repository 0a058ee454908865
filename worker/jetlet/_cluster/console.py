"""The web console's routes: its pages and assets from the package, its login, logout and session.

Theory of operation
-------------------
Each member serves the console under ``/console/`` from the REST port (and
``/`` sends a browser there). The console is one page
(``console_static/index.html``) with a hand-written script and style sheet
beside it, shipped in the package: nothing is fetched from elsewhere, and
the Content-Security-Policy sent with every asset forbids it
(``default-src 'self'``, no inline script, no framing). The script draws
the cluster, the jobs and a job's DAG from the REST API itself (``/cluster``,
``/jobs``, ``/jobs/{job}/dag``, ``/jobs/{job}/metrics``), follows the job-event
feed (``/events`` as server-sent events) and polls the metrics, so a page
updates without a reload.

The REST middleware lets every ``/console`` path and ``/`` through without
a token (:func:`is_public`): the assets and the login hold no data. The
API routes the script calls are authenticated by the session cookie that
the login sets, as :mod:`~jetlet._cluster.console_auth` describes; its
refusals are JSON errors like the API's, and a wrong token at the login is
counted as ``refused_console_login``.
"""

from __future__ import annotations

import importlib.resources
import math
from collections.abc import Awaitable, Callable

from aiohttp import web

from jetlet._cluster import console_auth
from jetlet._cluster import rest_requests as req

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

PREFIX = "/console"
_STATIC = importlib.resources.files("jetlet._cluster") / "console_static"
_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
}
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def is_public(path: str) -> bool:
    """Whether the REST middleware serves ``path`` without a token (the console's own routes)."""
    return path == "/" or path == PREFIX or path.startswith(PREFIX + "/")


def _asset(name: str) -> web.Response:
    suffix = name[name.rfind(".") :] if "." in name else ""
    resource = _STATIC / name
    if suffix not in _TYPES or "/" in name or name.startswith(".") or not resource.is_file():
        raise web.HTTPNotFound()
    return web.Response(body=resource.read_bytes(), content_type=_TYPES[suffix], headers=_HEADERS)


async def _root(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound(PREFIX + "/")


async def _index(request: web.Request) -> web.StreamResponse:
    return _asset("index.html")


async def _static(request: web.Request) -> web.StreamResponse:
    return _asset(request.match_info["asset"])


async def _login(request: web.Request) -> web.StreamResponse:
    body = await req.json_body(request)
    try:
        return console_auth.login(request, req.field(body, "token", str))
    except console_auth.Refused as exc:
        if exc.status == 401:
            req.counted(request, "refused_console_login")
        response = req.error_response(exc.status, str(exc))
        if exc.retry_after_s:
            response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
        return response


async def _logout(request: web.Request) -> web.StreamResponse:
    try:
        return console_auth.logout(request)
    except console_auth.Refused as exc:
        return req.error_response(exc.status, str(exc))


async def _session(request: web.Request) -> web.StreamResponse:
    return console_auth.describe_session(request)


ROUTES: list[tuple[str, str, Handler, str]] = [
    ("GET", "/", _root, "Redirects a browser to the web console."),
    ("GET", PREFIX + "/", _index, "The web console (a page for a browser)."),
    ("GET", PREFIX + "/session", _session, "The console session: logged_in, its csrf token, anonymous."),
    (
        "POST",
        PREFIX + "/login",
        _login,
        "Log the console in with {token}: sets an HttpOnly session cookie and answers its csrf token.",
    ),
    (
        "POST",
        PREFIX + "/logout",
        _logout,
        "End the console session (needs its csrf token in the X-CSRF-Token header).",
    ),
    ("GET", PREFIX + "/{asset}", _static, "The web console's script, style sheet and images."),
]
"""The console's routes; ``/{asset}`` last, so that the router finds the named routes first."""
