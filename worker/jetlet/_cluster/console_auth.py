"""The web console's login: a session cookie for the cluster's token, CSRF checks, anonymous read-only.

Theory of operation
-------------------
A browser cannot be trusted with the REST API's bearer token in script
reach, so the console trades it once for a session. ``POST /console/login``
with ``{"token": ...}`` compares the token with the cluster's in constant
time; a wrong one is answered ``401`` with a message that says so, counted
(``refused_console_login`` in ``/health``) and logged, and it takes a token
from the REST API's limiter of failed authentications
(:mod:`~jetlet._cluster.auth_limiter`, shared with the bearer check): an
address past its burst is answered ``429`` with ``Retry-After`` before its
token is even compared. A right one creates
a :class:`Session`: a random id (32 bytes from :mod:`secrets`) and a random
CSRF token, held in this member's memory only (:class:`Sessions`; a
member's restart logs everyone out, and each member has its own). The id
goes to the browser as the cookie :data:`COOKIE` (``HttpOnly``: no script
reads it; ``SameSite=Strict``: no other site's page sends it; ``Secure``
over TLS); the CSRF token goes in the answer's body, for the console's
script to send back in the :data:`CSRF_HEADER` header. ``GET
/console/session`` tells a reloaded page whether it is logged in, and
gives it the CSRF token again; ``POST /console/logout`` ends the session.

:func:`admit` is asked by the REST middleware about every request that
carries no ``Authorization`` header. With a live session cookie, a safe
request (``GET``, ``HEAD``) is let through; an unsafe one (``POST``,
``DELETE``...) also needs the session's CSRF token in its header and, when
the browser names one, an ``Origin`` of this very server (and no
``Sec-Fetch-Site`` other than ``same-origin``): the cookie alone never
performs an action. Without a session, a ``GET`` of a read-only route
(:data:`READ_ONLY_ROUTES`: the cluster, the jobs, their DAG, metrics and
the event feed; never data) is let through when the member's
``console_anonymous`` setting is ``read-only``; the default, ``none``,
lets nothing through. Refusals raise :class:`Refused` with the status and
a message the console shows as it is. The login itself is checked for
``Origin`` as well, so no other site can log a browser in.
"""

from __future__ import annotations

import dataclasses
import hmac
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable

from aiohttp import web

from jetlet._cluster import auth_limiter, settings

_log = logging.getLogger(__name__)

COOKIE = "jetlet_console"
CSRF_HEADER = "X-CSRF-Token"
SESSION_TTL_S = 12 * 3600.0
"""A session ends this long after its login."""
MAX_SESSIONS = 1000
"""The most sessions a member holds; a login past it ends the oldest."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
READ_ONLY_ROUTES = frozenset(
    {"/cluster", "/jobs", "/jobs/{job}", "/jobs/{job}/dag", "/jobs/{job}/metrics", "/events"}
)
"""Routes (as the router names them) an anonymous visitor may ``GET`` with ``console_anonymous=read-only``."""


class Refused(Exception):
    """The request is refused: ``status`` and a message for the person at the console."""

    def __init__(self, status: int, message: str, retry_after_s: float = 0.0) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


@dataclasses.dataclass(frozen=True)
class Session:
    """One logged-in browser."""

    id: str
    csrf: str
    expires: float
    """``time.monotonic()`` after which the session is over."""


class Sessions:
    """The live sessions of one member, in memory, oldest first."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, ttl_s: float = SESSION_TTL_S) -> None:
        self._clock = clock
        self._ttl_s = ttl_s
        self._live: OrderedDict[str, Session] = OrderedDict()

    def create(self) -> Session:
        """A new session (the oldest is ended when :data:`MAX_SESSIONS` are live)."""
        while len(self._live) >= MAX_SESSIONS:
            self._live.popitem(last=False)
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), self._clock() + self._ttl_s)
        self._live[session.id] = session
        return session

    def find(self, session_id: str) -> Session | None:
        """The live session of that id, or None (unknown or expired: an expired one is forgotten)."""
        session = self._live.get(session_id)
        if session is not None and session.expires <= self._clock():
            del self._live[session_id]
            return None
        return session

    def end(self, session_id: str) -> None:
        self._live.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._live)


@dataclasses.dataclass
class ConsoleAuth:
    """What :func:`admit` and the login routes of one application share."""

    token: str
    anonymous: str = "none"
    """``none`` or ``read-only`` (the member setting ``console_anonymous``)."""
    sessions: Sessions = dataclasses.field(default_factory=Sessions)
    limiter: auth_limiter.FailureLimiter = dataclasses.field(default_factory=auth_limiter.FailureLimiter)
    """Failed logins per address (the REST application passes the one its bearer check uses)."""

    def __post_init__(self) -> None:
        if self.anonymous not in settings.CONSOLE_ANONYMOUS_CHOICES:
            raise ValueError(f"console_anonymous must be 'none' or 'read-only', got {self.anonymous!r}")


AUTH_KEY = web.AppKey("jetlet_console_auth", ConsoleAuth)


def session_of(request: web.Request) -> Session | None:
    """The live session whose id the request's cookie holds, or None."""
    session_id = request.cookies.get(COOKIE, "")
    return request.app[AUTH_KEY].sessions.find(session_id) if session_id else None


def admit(request: web.Request) -> bool:
    """Whether the console lets this request (one without ``Authorization``) through; :class:`Refused`
    when it carries a session but fails a check. False: nothing here admits it (the bearer check
    answers)."""
    session = session_of(request)
    if session is not None:
        if request.method not in SAFE_METHODS:
            check_action(request, session)
        return True
    if request.cookies.get(COOKIE) and request.method not in SAFE_METHODS:
        raise Refused(401, "the console session is over (expired, logged out or the member restarted)")
    resource = request.match_info.route.resource
    canonical = resource.canonical if resource is not None else ""
    return (
        request.app[AUTH_KEY].anonymous == "read-only"
        and request.method == "GET"
        and canonical in READ_ONLY_ROUTES
    )


def check_action(request: web.Request, session: Session) -> None:
    """:class:`Refused` unless an unsafe request of ``session`` is same-origin and holds its CSRF token."""
    check_same_origin(request)
    given = request.headers.get(CSRF_HEADER, "")
    if not hmac.compare_digest(given.encode(), session.csrf.encode()):
        raise Refused(403, f"the console's CSRF token is missing or wrong (header {CSRF_HEADER})")


def check_same_origin(request: web.Request) -> None:
    """:class:`Refused` unless the browser's ``Origin`` (when sent) is this server and
    ``Sec-Fetch-Site`` (when sent) is ``same-origin``."""
    origin = request.headers.get("Origin")
    if origin is not None and origin != f"{request.scheme}://{request.host}":
        raise Refused(403, f"cross-origin request refused: Origin {origin!r} is not this console")
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site not in ("same-origin", "none"):
        raise Refused(403, f"cross-origin request refused: Sec-Fetch-Site {site!r}")


def login(request: web.Request, token: str) -> web.Response:
    """Answer a login with ``token``: the session cookie and the CSRF token, or :class:`Refused`."""
    check_same_origin(request)
    auth = request.app[AUTH_KEY]
    address = request.remote or ""
    delay = auth.limiter.allow(address)
    if delay is not None:
        raise Refused(429, "too many failed logins from this address: wait and try again", delay)
    if not token or not hmac.compare_digest(token.encode(), auth.token.encode()):
        auth.limiter.failed(address)
        _log.warning("console: refused a login from %s: wrong token", address)
        raise Refused(401, "wrong token: log in with the cluster's REST token (the member's --token-file)")
    session = auth.sessions.create()
    response = web.json_response({"logged_in": True, "csrf": session.csrf, "anonymous": auth.anonymous})
    response.set_cookie(
        COOKIE,
        session.id,
        path="/",
        httponly=True,
        samesite="Strict",
        secure=request.secure,
        max_age=int(SESSION_TTL_S),
    )
    return response


def logout(request: web.Request) -> web.Response:
    """End the request's session (checked as any action: :func:`check_action`) and clear the cookie."""
    session = session_of(request)
    if session is not None:
        check_action(request, session)
        request.app[AUTH_KEY].sessions.end(session.id)
    response = web.json_response({"logged_in": False, "anonymous": request.app[AUTH_KEY].anonymous})
    response.del_cookie(COOKIE, path="/")
    return response


def describe_session(request: web.Request) -> web.Response:
    """Whether the browser is logged in, its CSRF token if so, and what an anonymous visitor sees."""
    session = session_of(request)
    body: dict[str, object] = {
        "logged_in": session is not None,
        "anonymous": request.app[AUTH_KEY].anonymous,
    }
    if session is not None:
        body["csrf"] = session.csrf
    return web.json_response(body)
