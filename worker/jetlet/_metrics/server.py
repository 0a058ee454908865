"""The member's ``/metrics`` endpoint: Prometheus text format on a port of its own.

Theory of operation
-------------------
:func:`registry` builds a ``prometheus_client`` registry of the member's
own :class:`~jetlet._metrics.collector.MemberCollector`, the process
collector (resident memory, CPU, open files), the interpreter's collections
and the collector pauses (:mod:`jetlet._metrics.gc_pauses`). :func:`create_app`
serves it as ``GET /metrics`` on an aiohttp application of its own, so it
can bind another port than the REST API, without its token: Prometheus and
a ServiceMonitor scrape it as they are. With ``token`` set, a request must
carry ``Authorization: Bearer <token>`` (else 401). Collection runs on a
worker thread, never on the member's event loop.
"""

from __future__ import annotations

import asyncio
import hmac

import prometheus_client
from aiohttp import web
from prometheus_client import exposition

from jetlet._metrics import collector, gc_pauses

REGISTRY_KEY = web.AppKey("registry", prometheus_client.CollectorRegistry)
TOKEN_KEY = web.AppKey("token", str)


def registry(member: collector.MemberCollector) -> prometheus_client.CollectorRegistry:
    """A registry of ``member``'s collector, the process's and the garbage collector's."""
    found = prometheus_client.CollectorRegistry(auto_describe=False)
    found.register(member)
    prometheus_client.ProcessCollector(registry=found)
    prometheus_client.GCCollector(registry=found)
    found.register(gc_pauses.PROCESS)
    return found


async def _metrics(request: web.Request) -> web.Response:
    token = request.app[TOKEN_KEY]
    if token:
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            return web.Response(status=401, text="a bearer token is required\n")
    text = await asyncio.to_thread(exposition.generate_latest, request.app[REGISTRY_KEY])
    return web.Response(body=text, headers={"Content-Type": exposition.CONTENT_TYPE_LATEST})


def create_app(found: prometheus_client.CollectorRegistry, token: str = "") -> web.Application:
    """``GET /metrics`` of ``found``; with ``token``, only for requests that bear it."""
    app = web.Application()
    app[REGISTRY_KEY] = found
    app[TOKEN_KEY] = token
    app.router.add_get("/metrics", _metrics)
    return app
