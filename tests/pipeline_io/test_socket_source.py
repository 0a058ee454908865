"""``Sources.socket`` against a real TCP server on the loopback interface."""

from __future__ import annotations

import collections
import concurrent.futures
import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

import jetlet
from jetlet.errors import JobCancelledError, JobFailedError
from jetlet.pipeline import Pipeline, Sinks, Sources

JOIN_TIMEOUT_S = 30
LINES = [f"line {n} héllo" for n in range(2000)] + ["", "last"]


class _LinesHandler(socketserver.BaseRequestHandler):
    """Sends the server's payload in small pieces (splitting lines and characters), then closes."""

    def handle(self) -> None:
        payload: bytes = self.server.payload  # type: ignore[attr-defined]
        for start in range(0, len(payload), 997):
            self.request.sendall(payload[start : start + 997])
        self.server.served.release()  # type: ignore[attr-defined]


@pytest.fixture
def server() -> Iterator[socketserver.ThreadingTCPServer]:
    # \r\n line ends, no line end after the last line
    payload = "\r\n".join(LINES).encode("utf-8")
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _LinesHandler)
    srv.daemon_threads = True
    srv.payload = payload  # type: ignore[attr-defined]
    srv.served = threading.Semaphore(0)  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=5)


def test_socket_source_emits_every_line_and_completes_when_the_server_closes(
    jet: jetlet.EmbeddedInstance, server: socketserver.ThreadingTCPServer
) -> None:
    # given a server that sends the lines and closes the connection
    host, port = server.server_address[:2]
    p = Pipeline()
    p.read_from(Sources.socket(str(host), int(port))).without_timestamps().write_to(Sinks.list("lines"))
    # when the job runs, then it completes by itself
    jet.new_job(p).join(timeout=JOIN_TIMEOUT_S)
    # then it saw each line once, in order, without line ends
    assert jet.get_list("lines") == LINES
    assert server.served.acquire(timeout=5)  # type: ignore[attr-defined]


def test_each_socket_source_processor_opens_its_own_connection(
    jet: jetlet.EmbeddedInstance, server: socketserver.ThreadingTCPServer
) -> None:
    # given two source processors
    host, port = server.server_address[:2]
    p = Pipeline()
    p.read_from(Sources.socket(str(host), int(port))).without_timestamps().set_local_parallelism(2).write_to(
        Sinks.list("lines")
    )
    # when the job runs
    jet.new_job(p).join(timeout=JOIN_TIMEOUT_S)
    # then the server served two connections and every line arrived twice
    assert server.served.acquire(timeout=5) and server.served.acquire(timeout=5)  # type: ignore[attr-defined]
    assert collections.Counter(jet.get_list("lines")) == collections.Counter(LINES * 2)


class _HoldingHandler(socketserver.BaseRequestHandler):
    """Sends two lines, then keeps the connection open until the test releases it."""

    def handle(self) -> None:
        self.request.sendall(b"one\ntwo\n")
        self.server.release.wait(timeout=JOIN_TIMEOUT_S)  # type: ignore[attr-defined]


def test_a_socket_stream_that_stays_open_runs_until_the_job_is_cancelled(
    jet: jetlet.EmbeddedInstance,
) -> None:
    # given a server that sends two lines and keeps the connection open
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _HoldingHandler)
    srv.daemon_threads = True
    srv.release = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        p = Pipeline()
        p.read_from(Sources.socket("127.0.0.1", srv.server_address[1])).without_timestamps().write_to(
            Sinks.list("lines")
        )
        job = jet.new_job(p)
        # when both lines arrived (polled with a deadline)
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while len(jet.get_list("lines")) < 2 and time.monotonic() < deadline:
            concurrent.futures.wait([job.future], timeout=0.01)
        lines = jet.get_list("lines")
        # then the job still runs, and a cancellation ends it although the socket stays open
        assert lines == ["one", "two"]
        assert not job.future.done()
        job.cancel()
        with pytest.raises(JobCancelledError):
            job.join(timeout=JOIN_TIMEOUT_S)
    finally:
        srv.release.set()  # type: ignore[attr-defined]
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


def test_socket_source_fails_the_job_when_nothing_listens(jet: jetlet.EmbeddedInstance) -> None:
    # given a port that was free a moment ago (bound, then closed)
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    p = Pipeline()
    p.read_from(Sources.socket("127.0.0.1", port)).without_timestamps().write_to(Sinks.list("lines"))
    # when the job runs, then it fails naming the address
    with pytest.raises(JobFailedError) as failure:
        jet.new_job(p).join(timeout=JOIN_TIMEOUT_S)
    assert f"cannot connect to 127.0.0.1:{port}" in str(failure.value.__cause__)


@pytest.mark.parametrize(
    ("host", "port", "encoding", "message"),
    [
        ("", 80, "utf-8", "host must be a non-empty string"),
        ("localhost", 0, "utf-8", "port must be an int in 1..65535"),
        ("localhost", 70000, "utf-8", "port must be an int in 1..65535"),
        ("localhost", 80, "no-such-codec", "encoding 'no-such-codec' is not a known codec"),
    ],
)
def test_socket_source_arguments_are_validated(host: str, port: int, encoding: str, message: str) -> None:
    # given a bad argument, when the source is made, then the error names it
    with pytest.raises(ValueError, match=message):
        Sources.socket(host, port, encoding)
