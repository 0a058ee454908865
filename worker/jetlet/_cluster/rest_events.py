"""The job-event feed over REST: a JSON long-poll, or server-sent events that ride through a take-over.

Used by :mod:`jetlet._cluster.rest` for ``GET /events``.

Theory of operation
-------------------
:func:`events` answers ``?since=N&timeout=S`` with the next page of the
feed (:mod:`~jetlet._cluster.events`) as JSON, waiting up to ``S`` seconds
for one; with ``Accept: text/event-stream`` it streams every event after
``since`` (or the ``Last-Event-ID`` header) as server-sent events, each with
its id, so a client that reconnects resumes where it was. A stream waits in
:data:`SSE_POLL_S` spans and sends a keep-alive comment after an empty one;
during a coordinator take-over (the service raises
:class:`~jetlet.errors.ClusterUnavailableError`) it backs off and goes on.
:func:`install` gives the application an event (:data:`CLOSING_KEY`) set when
it shuts down: waiting reads then answer at once with an empty page and
streams end, so an open console or follower never holds up a member's stop.
The service's futures are never cancelled (a shielded wait leaves them).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from jetlet import errors
from jetlet._cluster import events as events_mod
from jetlet._cluster import rest_requests as req

SSE_POLL_S = 15.0
"""How long one wait of an event stream lasts before a keep-alive comment is sent."""
CLOSING_KEY = web.AppKey("jetlet_closing", asyncio.Event)
"""Set when the application shuts down: event reads and streams stop waiting."""


def install(app: web.Application) -> None:
    """Make the application's event reads and streams stop waiting when it shuts down."""
    app[CLOSING_KEY] = asyncio.Event()
    app.on_shutdown.append(_closing)


async def _closing(app: web.Application) -> None:
    app[CLOSING_KEY].set()


async def events(request: web.Request) -> web.StreamResponse:
    """The job-event feed: JSON long-poll (``?since=N&timeout=S``), or server-sent events."""
    since = req.query_number(request, "since", 0, int)
    if "text/event-stream" in request.headers.get("Accept", ""):
        last_seen = request.headers.get("Last-Event-ID", "")
        if last_seen:
            if not last_seen.isdigit():
                raise req.BadRequest("Last-Event-ID", f"must be an event id (a number), got {last_seen!r}")
            since = int(last_seen)
        return await _event_stream(request, since)
    timeout = min(req.query_number(request, "timeout", 0.0), req.MAX_JOIN_WAIT_S)
    page = await _next_events(request, since, timeout)
    return web.json_response({"events": [e.to_dict() for e in page.events], "last_id": page.last_id})


async def _next_events(request: web.Request, since: int, timeout: float) -> events_mod.EventsPage:
    """The next page of the feed; an empty one after ``timeout`` (and some slack) or once the application
    shuts down. The service's future is never cancelled (as a shielded wait leaves it)."""
    page = asyncio.wrap_future(req.service(request).events(since, timeout))
    closing = asyncio.ensure_future(request.app[CLOSING_KEY].wait())
    waits: set[asyncio.Future[Any]] = {page, closing}
    try:
        done, _ = await asyncio.wait(waits, timeout=timeout + 5.0, return_when=asyncio.FIRST_COMPLETED)
    finally:
        closing.cancel()
    return page.result() if page in done else events_mod.EventsPage([], since)


async def _event_stream(request: web.Request, since: int) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    backoff = 0.1
    while not request.app[CLOSING_KEY].is_set():
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
