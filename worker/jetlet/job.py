"""The job handle and the job states (Jet's ``Job`` and ``JobStatus``)."""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import enum
from collections.abc import Generator
from typing import Any


class JobStatus(enum.StrEnum):
    """The life of a job, with Jet's state names (equal to their names as strings)."""

    NOT_RUNNING = "NOT_RUNNING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUSPENDED = "SUSPENDED"
    SUSPENDED_EXPORTING_SNAPSHOT = "SUSPENDED_EXPORTING_SNAPSHOT"
    COMPLETING = "COMPLETING"
    FAILED = "FAILED"
    COMPLETED = "COMPLETED"

    @property
    def is_terminal(self) -> bool:
        return self in (JobStatus.FAILED, JobStatus.COMPLETED)


def id_to_string(job_id: int) -> str:
    """Jet's job id format: 16 hex digits in groups of four, e.g. ``0a1b-2c3d-4e5f-6789``."""
    text = f"{job_id & ((1 << 64) - 1):016x}"
    return "-".join(text[i : i + 4] for i in range(0, 16, 4))


class Job(abc.ABC):
    """A handle on a submitted job.

    ``join()`` waits for the end and raises
    :class:`~jetlet.errors.JobFailedError` (with the user's traceback) or
    :class:`~jetlet.errors.JobCancelledError`; ``await job`` does the same
    in asyncio code, and ``job.future`` is a ``concurrent.futures.Future``.
    """

    @property
    @abc.abstractmethod
    def id(self) -> int: ...

    @property
    @abc.abstractmethod
    def name(self) -> str: ...

    @property
    @abc.abstractmethod
    def status(self) -> JobStatus: ...

    @property
    @abc.abstractmethod
    def submission_time(self) -> int:
        """When the job was submitted, in milliseconds since the epoch."""

    @property
    @abc.abstractmethod
    def future(self) -> concurrent.futures.Future[None]: ...

    @abc.abstractmethod
    def cancel(self) -> None:
        """Stop the job everywhere; ``join()`` then raises ``JobCancelledError``."""

    @property
    def id_string(self) -> str:
        return id_to_string(self.id)

    def join(self, timeout: float | None = None) -> None:
        """Wait until the job ends; raise its failure. ``TimeoutError`` if ``timeout`` passes first."""
        self.future.result(timeout)

    def __await__(self) -> Generator[Any, None, None]:
        return asyncio.wrap_future(self.future).__await__()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id_string}, name={self.name!r}, status={self.status.value})"
