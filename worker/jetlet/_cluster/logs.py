"""A member's log lines: the member and the job in every line, as text or as JSON for log collectors.

Theory of operation
-------------------
:func:`configure` gives the root logger one handler on stderr with a
:class:`MemberFilter` and a formatter. The filter stamps every record with
the member's name (:meth:`MemberFilter.set_member`, once the member knows
it) and gives a record without a job ``job = None``. A line about a job is
logged with ``extra=logs.job(id, name)``, which adds the job's id string
and name, and with ``traceback=`` when it carries the user's traceback.

* ``text`` (the default): ``TIME LEVEL [MEMBER] LOGGER: MESSAGE``; a line
  about a job names it in its message (:func:`label`); a user's traceback
  and an exception follow on the next lines.
* ``json``: one JSON object per line, with ``time`` (ISO 8601, UTC, ms),
  ``level``, ``logger``, ``message``, ``member``, ``job`` and ``job_name``
  (null when the line is not about a job), and ``exception``: the user's
  traceback or the exception's text (null when there is none). Newlines
  inside stay escaped, so every line parses alone.

A thread's uncaught exception is logged too (``threading.excepthook``),
so that a JSON log holds nothing but JSON lines.

The user's traceback of a failed job is logged once in the cluster: by the
coordinator, in the line that says the job failed (the members report it to
the coordinator, they do not log it).

>>> record = logging.LogRecord("jetlet.x", logging.INFO, "", 0, "%s RUNNING", ("job wc",), None)
>>> record.__dict__.update(job("0a1b-0000", "wc"), member="m1")
>>> json.loads(JsonFormatter().format(record))["job"]
'0a1b-0000'
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
import threading
from typing import Any

_TEXT = "%(asctime)s %(levelname)s [%(member)s] %(name)s: %(message)s"


def label(name: str, id_string: str) -> str:
    """How a log line names a job: ``job NAME (ID)``, or ``job ID`` when the name is the id."""
    return f"job {id_string}" if name == id_string else f"job {name} ({id_string})"


def job(id_string: str, name: str, traceback: str = "") -> dict[str, Any]:
    """The ``extra`` of a line about a job (with the user's ``traceback``, if it carries one)."""
    fields: dict[str, Any] = {"job": id_string, "job_name": name}
    if traceback.strip():
        fields["traceback"] = traceback.strip()
    return fields


class MemberFilter(logging.Filter):
    """Stamps every record with the member's name, and ``job = None`` when it is not about a job."""

    def __init__(self, member: str = "") -> None:
        super().__init__()
        self.member = member

    def set_member(self, member: str) -> None:
        self.member = member

    def filter(self, record: logging.LogRecord) -> bool:
        record.member = self.member or "-"
        if not hasattr(record, "job"):
            record.job = None
            record.job_name = None
        return True


class TextFormatter(logging.Formatter):
    """``TIME LEVEL [MEMBER] LOGGER: MESSAGE``, then the user's traceback, if the line carries one."""

    def __init__(self) -> None:
        super().__init__(_TEXT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        trace = getattr(record, "traceback", "")
        return f"{text}\n{trace}" if trace else text


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module doc)."""

    def format(self, record: logging.LogRecord) -> str:
        exception = getattr(record, "traceback", "") or (
            self.formatException(record.exc_info) if record.exc_info else record.exc_text or ""
        )
        stamp = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        line = {
            "time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "member": getattr(record, "member", None),
            "job": getattr(record, "job", None),
            "job_name": getattr(record, "job_name", None),
            "exception": exception or None,
        }
        return json.dumps(line, ensure_ascii=False, default=str)


def configure(level: int, as_json: bool, member: str = "") -> None:
    """Log to stderr at ``level``, as JSON lines or text, every line naming ``member``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(MemberFilter(member))
    handler.setFormatter(JsonFormatter() if as_json else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    threading.excepthook = _log_uncaught


def _log_uncaught(args: threading.ExceptHookArgs) -> None:
    """A thread's uncaught exception as a log line (in JSON too), not raw text on stderr."""
    if args.exc_type is SystemExit:
        return
    thread = args.thread.name if args.thread is not None else "?"
    exc_info = (args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback)
    logging.getLogger("jetlet.uncaught").error("uncaught exception in thread %s", thread, exc_info=exc_info)


def name_member(member: str) -> None:
    """The member's name for the lines to come (a member without ``--name`` knows it once bound)."""
    for handler in logging.getLogger().handlers:
        for stamp in handler.filters:
            if isinstance(stamp, MemberFilter):
                stamp.set_member(member)
