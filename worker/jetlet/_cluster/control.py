"""The control RPC between members: an explicit table of operations over ``CONTROL`` frames.

Theory of operation
-------------------
Members steer jobs with small messages (dicts, msgpack with pickles allowed:
the peer has proved it holds the cluster secret) sent as ``CONTROL`` frames
over the authenticated connection between two members. A request names its
operation (``op``, one of :class:`Operation`) and, when it wants an answer,
carries an ``rpc`` number; the answer is a ``reply`` with that number and
either ``result`` (a dict) or ``error`` (a typed error, :func:`jetlet.errors.to_wire`,
plus the remote traceback).

Every operation is registered once in a table (:meth:`ControlChannel.register`)
with how it is dispatched: :attr:`Dispatch.INLINE` handlers run on the network
thread that received the frame and must not block (reports to the
coordinator, which only hand work to its thread); :attr:`Dispatch.POOL`
handlers may block (building an execution plan, grid work) and run on a small
pool of threads. A handler may return a future instead of a dict: the reply
is sent when it completes, so a long wait (``join``, the event feed's
long-poll) holds no thread at all.

:meth:`ControlChannel.call` returns a future of the result dict; it fails
with the remote's typed error, or with :class:`MemberUnreachableError` as soon
as the peer's connection is lost (:meth:`ControlChannel.peer_lost`), never
after a timeout alone. A call to the member itself goes through the same
table without the network.

*Fencing.* A member the membership dropped may still hold its connections
open (it was paused, not dead) and, once it runs again, send what its stale
executions and coordinator had under way — a map sink's grid writes, a
snapshot's commit — before it notices it was removed. So a member refuses
every request from a peer its membership dropped (:meth:`ControlChannel.fence`,
answered with ``ClusterUnavailableError``) until the peer is in its member
list again (:meth:`ControlChannel.unfence`, when it rejoined).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import enum
import itertools
import logging
import threading
import traceback
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from jetlet import errors
from jetlet._network import serialization
from jetlet._network.frames import MessageType
from jetlet._network.transport import PeerUnavailableError

log = logging.getLogger(__name__)

POOL_SIZE = 16
"""Threads for the handlers that may block (building an execution plan, grid work, observable reads)."""


class Operation(enum.StrEnum):
    """Every control operation, by who serves it."""

    # the member side of executions (any member)
    INIT = "init"
    START = "start"
    CANCEL = "cancel"
    FORGET = "forget"
    METRICS = "metrics"
    SNAPSHOT_START = "snapshot_start"
    SNAPSHOT_COMMIT = "snapshot_commit"
    # the replicated grid (any member)
    GRID = "grid"
    GRID_TABLE = "grid_table"
    # reports to the coordinator
    DONE = "done"
    SNAPSHOT_DONE = "snapshot_done"
    ENDING = "ending"
    LEAVING = "leaving"
    # the coordinator's operations, forwarded by any member that serves a REST call
    SUBMIT = "submit"
    LIST_JOBS = "list_jobs"
    GET_JOB = "get_job"
    JOIN_JOB = "join_job"
    CANCEL_JOB = "cancel_job"
    SUSPEND_JOB = "suspend_job"
    RESUME_JOB = "resume_job"
    RESTART_JOB = "restart_job"
    JOB_METRICS = "job_metrics"
    EXPORT_SNAPSHOT = "export_snapshot"
    LIST_SNAPSHOTS = "list_snapshots"
    DELETE_SNAPSHOT = "delete_snapshot"
    READ_ALL = "read_all"
    DESTROY = "destroy"
    OBSERVABLE = "observable"
    EVENTS = "events"


class Dispatch(enum.Enum):
    """Where a handler runs: on the receiving network thread (must not block) or on the pool."""

    INLINE = "inline"
    POOL = "pool"


Result = dict[str, Any] | concurrent.futures.Future[dict[str, Any]]
Handler = Callable[[str, dict[str, Any]], Result]


class Link(Protocol):
    """What the channel needs of a transport (the real one, or an in-memory one in tests)."""

    def send(self, peer: str, msg_type: MessageType, payload: bytes) -> None:
        """Queue a frame to ``peer``; raise ``PeerUnavailableError`` if it is not connected."""
        ...


class MemberUnreachableError(errors.JetletError):
    """A call's member is not connected (or its connection was lost before it answered)."""

    def __init__(self, member: str) -> None:
        super().__init__(f"member {member} is not connected")
        self.member = member


def remote_error(reply: Mapping[str, Any]) -> errors.JetletError:
    """The typed error of an error reply, with the remote traceback kept as ``remote_traceback``."""
    error = errors.from_wire(reply["error"])
    error.remote_traceback = str(reply.get("traceback", ""))  # type: ignore[attr-defined]
    return error


class ControlChannel:
    """Requests, replies and the operation table of one member. See the module doc."""

    def __init__(self, member_name: str, link: Link, pool: concurrent.futures.Executor | None = None) -> None:
        self.member_name = member_name
        self._link = link
        self._table: dict[str, tuple[Handler, Dispatch]] = {}
        self._rpc_ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[str, concurrent.futures.Future[dict[str, Any]]]] = {}
        self._pool = pool or concurrent.futures.ThreadPoolExecutor(
            POOL_SIZE, thread_name_prefix=f"jetlet-control-{member_name}"
        )
        self._closed = False
        self._fenced: set[str] = set()
        """Peers the membership dropped: their requests are refused (see the module doc: *Fencing*)."""

    def fence(self, peer: str) -> None:
        """The membership dropped ``peer``: refuse its requests from now on, fail the calls waiting on it."""
        with self._lock:
            self._fenced.add(peer)
        self.peer_lost(peer)

    def unfence(self, peer: str) -> None:
        """``peer`` is in the member list (again): serve its requests."""
        with self._lock:
            self._fenced.discard(peer)

    def register(self, op: Operation, handler: Handler, dispatch: Dispatch = Dispatch.POOL) -> None:
        """Serve ``op`` with ``handler(peer, body)``; each operation is registered once."""
        if op in self._table:
            raise ValueError(f"control operation {op.value!r} is already registered")
        self._table[op] = (handler, dispatch)

    # -- sending ---------------------------------------------------------------------
    def call(self, peer: str, op: Operation, **fields: Any) -> concurrent.futures.Future[dict[str, Any]]:
        """Ask ``peer`` (this member too) to perform ``op``; a future of its result dict."""
        rpc = next(self._rpc_ids)
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        if self._closed:  # nobody would ever answer (the transport may drop what it is given)
            future.set_exception(errors.ClusterUnavailableError("this member is shutting down"))
            return future
        with self._lock:
            self._pending[rpc] = (peer, future)
        if not self.send(peer, op, rpc=rpc, **fields):
            self._fail(rpc, MemberUnreachableError(peer))
        return future

    def send(self, peer: str, op: Operation, **fields: Any) -> bool:
        """Send a one-way message (or a call's request); False if ``peer`` is not connected."""
        body = {"op": op.value, **fields}
        if peer == self.member_name:
            self._dispatch(peer, body)
            return True
        return self._send_frame(peer, body)

    def _send_frame(self, peer: str, body: dict[str, Any]) -> bool:
        try:
            self._link.send(peer, MessageType.CONTROL, serialization.dumps(body))
        except PeerUnavailableError:
            log.debug("member %s is gone: %s not delivered", peer, body.get("op", "reply"))
            return False
        return True

    # -- receiving -------------------------------------------------------------------
    def on_frame(self, peer: str, payload: bytes) -> None:
        """A ``CONTROL`` frame from an authenticated peer (on the network thread)."""
        body = serialization.loads(payload)
        if not isinstance(body, dict):
            log.warning("control frame from %s is not a message: %r", peer, type(body).__name__)
            return
        if "reply" in body:
            self._complete(body)
        elif peer in self._fenced:
            log.warning(
                "member %s refuses %s from %s, which its cluster dropped",
                self.member_name,
                body.get("op"),
                peer,
            )
            error = errors.ClusterUnavailableError(
                f"member {peer} is not in the cluster of {self.member_name}"
            )
            self._answer(peer, body.get("rpc"), None, error, "")
        else:
            self._dispatch(peer, body)

    def peer_lost(self, peer: str) -> None:
        """Fail every call waiting on ``peer`` at once."""
        with self._lock:
            waiting = [rpc for rpc, (member, _) in self._pending.items() if member == peer]
        for rpc in waiting:
            self._fail(rpc, MemberUnreachableError(peer))

    def _complete(self, reply: dict[str, Any]) -> None:
        with self._lock:
            entry = self._pending.pop(reply["reply"], None)
        if entry is None or entry[1].done():
            return
        if "error" in reply:
            entry[1].set_exception(remote_error(reply))
        else:
            entry[1].set_result(reply.get("result", {}))

    def _fail(self, rpc: int, error: BaseException) -> None:
        with self._lock:
            entry = self._pending.pop(rpc, None)
        if entry is not None and not entry[1].done():
            entry[1].set_exception(error)

    def _dispatch(self, peer: str, body: dict[str, Any]) -> None:
        op = body.get("op")
        entry = self._table.get(op) if isinstance(op, str) else None
        if entry is None:
            error = errors.JetletError(f"unknown control operation {op!r}")
            self._answer(peer, body.get("rpc"), None, error, "")
            return
        handler, dispatch = entry
        if dispatch is Dispatch.INLINE:
            self._run(handler, peer, body)
        elif not self._closed:
            with contextlib.suppress(RuntimeError):  # the pool shut down between the check and the submit
                self._pool.submit(self._run, handler, peer, body)

    def _run(self, handler: Handler, peer: str, body: dict[str, Any]) -> None:
        rpc = body.get("rpc")
        try:
            result = handler(peer, body)
        except Exception as exc:  # every failure goes back to the caller, with its traceback
            if rpc is None:
                log.exception("control operation %s from %s failed", body.get("op"), peer)
            self._answer(peer, rpc, None, exc, "".join(traceback.format_exception(exc)))
            return
        if isinstance(result, concurrent.futures.Future):
            result.add_done_callback(lambda done: self._answer_future(peer, rpc, done))
        else:
            self._answer(peer, rpc, result, None, "")

    def _answer_future(
        self, peer: str, rpc: int | None, done: concurrent.futures.Future[dict[str, Any]]
    ) -> None:
        error = done.exception()
        if error is None:
            self._answer(peer, rpc, done.result(), None, "")
        else:
            self._answer(peer, rpc, None, error, "".join(traceback.format_exception(error)))

    def _answer(
        self,
        peer: str,
        rpc: int | None,
        result: dict[str, Any] | None,
        error: BaseException | None,
        trace: str,
    ) -> None:
        if rpc is None:
            return
        reply: dict[str, Any] = {"reply": rpc}
        if error is not None:
            reply["error"] = errors.to_wire(error)
            reply["traceback"] = getattr(error, "remote_traceback", "") or trace
        else:
            reply["result"] = result or {}
        if peer == self.member_name:
            self._complete(reply)
        else:
            self._send_frame(peer, reply)

    def close(self) -> None:
        """Stop serving: fail every waiting call and let running handlers finish."""
        self._closed = True
        with self._lock:
            waiting = list(self._pending)
        for rpc in waiting:
            self._fail(rpc, errors.ClusterUnavailableError("this member is shutting down"))
        self._pool.shutdown(wait=True, cancel_futures=True)
