"""The errors jetlet raises to users, how they cross the wire, and the argument check every API shares.

Errors an operator or a client can act on have a type of their own and a
stable wire ``code``, so that a REST answer or a control reply becomes the
same typed error on the other side (:func:`to_wire`, :func:`from_wire`):

=========================  ==========  =====================================
error                      HTTP        what to do
=========================  ==========  =====================================
:class:`InvalidJobError`   400         permanent: fix the named ``field``
:class:`JobNotFoundError`  404         the job (or snapshot) does not exist
:class:`JobStateConflictError` 409     the job's state does not allow it now
:class:`ClusterUnavailableError` 503   temporary: retry after ``retry_after_s``
=========================  ==========  =====================================

Any other :class:`JetletError` crosses as code ``JetletError`` (409).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Mapping
from typing import Any, ClassVar


class JetletError(Exception):
    """Base of jetlet's own errors."""

    code: ClassVar[str] = "JetletError"
    http_status: ClassVar[int] = 409


class InvalidJobError(JetletError):
    """A job definition or request is invalid (a permanent error); ``field`` names what is wrong."""

    code = "InvalidJob"
    http_status = 400

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


class JobNotFoundError(JetletError):
    """No job (or named snapshot) has this id or name."""

    code = "JobNotFound"
    http_status = 404


class JobStateConflictError(JetletError):
    """The job's current state does not allow the operation (e.g. resuming a running job)."""

    code = "JobStateConflict"
    http_status = 409


class ClusterUnavailableError(JetletError):
    """The cluster cannot answer now (no coordinator yet, a take-over in progress); retry later."""

    code = "ClusterUnavailable"
    http_status = 503

    def __init__(self, message: str, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class JobFailedError(JetletError):
    """A job failed; ``remote_traceback`` is the failing user code's traceback as text.

    In the embedded instance the original exception is also chained as
    ``__cause__``, so Python prints the user's own frames (file and line).
    """

    def __init__(self, message: str, remote_traceback: str = "") -> None:
        super().__init__(message)
        self.remote_traceback = remote_traceback

    def __str__(self) -> str:
        text = super().__str__()
        if self.remote_traceback:
            text += "\n\nTraceback of the failure in the job:\n" + self.remote_traceback.rstrip()
        return text


class JobCancelledError(JetletError):
    """The job was cancelled (by the user, or because it ran past ``timeout_millis``)."""


_BY_CODE: dict[str, type[JetletError]] = {
    kind.code: kind
    for kind in (
        JetletError,
        InvalidJobError,
        JobNotFoundError,
        JobStateConflictError,
        ClusterUnavailableError,
    )
}


def to_wire(error: BaseException) -> dict[str, Any]:
    """``error`` as a JSON- and msgpack-friendly dict: ``code``, ``message`` and the type's own fields."""
    code = error.code if isinstance(error, JetletError) else "JetletError"
    wire: dict[str, Any] = {"code": code if code in _BY_CODE else "JetletError", "message": str(error)}
    if isinstance(error, InvalidJobError):
        wire["field"] = error.field
        wire["message"] = str(error.args[0]).removeprefix(f"{error.field}: ") if error.field else str(error)
    if isinstance(error, ClusterUnavailableError):
        wire["retry_after_s"] = error.retry_after_s
    return wire


def from_wire(wire: Mapping[str, Any]) -> JetletError:
    """The typed error that :func:`to_wire` described (a plain :class:`JetletError` for unknown codes)."""
    kind = _BY_CODE.get(str(wire.get("code", "")), JetletError)
    message = str(wire.get("message", "") or wire.get("error", ""))
    if kind is InvalidJobError:
        return InvalidJobError(str(wire.get("field", "")), message)
    if kind is ClusterUnavailableError:
        return ClusterUnavailableError(message, float(wire.get("retry_after_s", 1.0)))
    return kind(message)


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_traceback(error: BaseException) -> str:
    """``error``'s traceback without jetlet's own frames: the user's lines, then the exception.

    Frames of files inside the ``jetlet`` package are dropped (the engine that called the
    user's function is noise to its author); if no frame is left (a fault of jetlet's own),
    the whole traceback is kept. Chained exceptions keep their chain.
    """
    summary = traceback.TracebackException.from_exception(error)
    chain: list[traceback.TracebackException] = []
    link: traceback.TracebackException | None = summary
    while link is not None:
        chain.append(link)
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)
    for link in chain:
        user = [f for f in link.stack if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR)]
        if user:
            link.stack = traceback.StackSummary.from_list(user)
    return "".join(summary.format())


def require_callable(value: object, what: str) -> None:
    """``TypeError`` saying that ``what`` (naming the argument and its owner) must be callable."""
    if not callable(value):
        raise TypeError(f"{what} must be callable, got {value!r}")
