"""The errors jetlet raises to users, and the argument check every API shares."""

from __future__ import annotations


class JetletError(Exception):
    """Base of jetlet's own errors."""


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


def require_callable(value: object, what: str) -> None:
    """``TypeError`` saying that ``what`` (naming the argument and its owner) must be callable."""
    if not callable(value):
        raise TypeError(f"{what} must be callable, got {value!r}")
