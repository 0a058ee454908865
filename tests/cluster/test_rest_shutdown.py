"""A REST server stops at once even while readers wait on the event feed (the console long-polls it)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any

import jetlet
from jetlet._cluster import job_service, rest
from jetlet.testing import wait_until

TOKEN = "rest-shutdown-test-token"


def _read(host: str, port: int, path: str, headers: dict[str, str], out: list[Any]) -> None:
    connection = http.client.HTTPConnection(host, port, timeout=60)
    connection.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}", **headers})
    response = connection.getresponse()
    out.append((response.status, response.read()))
    connection.close()


def test_given_a_long_poll_and_a_stream_of_events_when_the_server_stops_then_both_end_at_once() -> None:
    service = job_service.EmbeddedJobService(jetlet.embedded())
    waits: list[int] = []
    feed = service.events

    def counted_events(since: int, timeout: float) -> Any:
        waits.append(since)
        return feed(since, timeout)

    service.events = counted_events  # type: ignore[method-assign]
    server = rest.RestServer(rest.create_app(service, dict, TOKEN))
    host, port = server.start("127.0.0.1", 0)
    polled: list[Any] = []
    streamed: list[Any] = []
    readers = [
        threading.Thread(target=_read, args=(host, port, "/events?since=0&timeout=30", {}, polled)),
        threading.Thread(
            target=_read, args=(host, port, "/events", {"Accept": "text/event-stream"}, streamed)
        ),
    ]
    for reader in readers:
        reader.start()
    runner = server._runner
    assert runner is not None and runner.server is not None
    wait_until(lambda: len(runner.server.connections) == 2, "both readers connected")
    # (a connection counts once accepted; its request may not have reached its handler yet, and a
    # request the server has not begun to answer when it stops gets no answer: wait for both waits)
    wait_until(lambda: len(waits) >= 2, "both readers waiting on the event feed")
    try:
        started = time.monotonic()
        server.stop()
        stopped_in = time.monotonic() - started
    finally:
        service.close()
    for reader in readers:
        reader.join(10)
    assert stopped_in < 5.0, f"the server took {stopped_in:.1f} s to stop"
    assert polled and polled[0][0] == 200 and json.loads(polled[0][1])["events"] == []
    assert streamed and streamed[0][0] == 200
