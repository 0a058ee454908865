"""The member's command line: a flag per setting with its description and default, and start-up checks.

Theory of operation
-------------------
Every field of :class:`~jetlet._cluster.settings.MemberSettings` is a flag
(``queue_size`` is ``--queue-size``). Its help is the field's attribute
docstring, read once from the source with :mod:`ast` (the docstrings are
the one place settings are documented: the instance and edge settings'
are those of :class:`~jetlet.config.InstanceConfig` and
:class:`~jetlet.config.EdgeConfig`), followed by its default. Values stay text (``None``: not given) so that
:func:`jetlet._cluster.settings.load` can tell a flag from the environment
and the file, and check and convert them all alike.

The checks here turn the mistakes a person makes at a terminal into one
line naming the flag, instead of a traceback from deep in asyncio: a log
level in lower case is accepted (``--log-level debug``), an unknown one is
refused with the choices, and a port that another process holds is named
by its flag before the member starts (:func:`busy_port`).

>>> help_texts()["queue_size"].endswith("(default 1024)")
True
>>> log_level("debug")
10
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import itertools
import logging
import socket

from jetlet import config
from jetlet._cluster import settings

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_SECRETS = frozenset({"secret", "token", "metrics_token"})


@functools.cache
def _docstrings() -> dict[str, str]:
    """Each setting's attribute docstring, from the source of ``MemberSettings``; the instance and
    edge settings' from ``InstanceConfig`` and ``EdgeConfig``, where they are stated."""
    found: dict[str, str] = {}
    for owner in (config.EdgeConfig, config.InstanceConfig, settings.MemberSettings):
        found.update(_attribute_docstrings(owner))
    return found


def _attribute_docstrings(owner: type) -> dict[str, str]:
    tree = ast.parse(inspect.getsource(owner))
    body = tree.body[0].body  # type: ignore[attr-defined]
    found: dict[str, str] = {}
    for statement, following in itertools.pairwise(body):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            found[statement.target.id] = " ".join(following.value.value.replace("``", "").split())
    return found


def help_texts() -> dict[str, str]:
    """Every setting's help: its description, then its default (secrets' defaults are not shown)."""
    texts = {}
    for spec in dataclasses.fields(settings.MemberSettings):
        description = _docstrings().get(spec.name, "").replace("%", "%%")
        default = spec.default
        shown = "(default: none)" if spec.name in _SECRETS or default in ("", ()) else f"(default {default})"
        texts[spec.name] = f"{description} {shown}".strip()
    return texts


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """``--NAME VALUE`` for every setting, with its help; the value stays text (None: not given)."""
    texts = help_texts()
    for name in sorted(settings.NAMES):
        kind = str(next(f.type for f in dataclasses.fields(settings.MemberSettings) if f.name == name))
        metavar = {"int": "N", "str": "VALUE"}.get(kind, "A,B,...")
        parser.add_argument(
            f"--{name.replace('_', '-')}", dest=name, default=None, metavar=metavar, help=texts[name]
        )


def log_level(text: str) -> int:
    """The logging level named by ``text`` in any case; ``ValueError`` naming ``--log-level`` otherwise."""
    name = text.strip().upper()
    if name not in LOG_LEVELS:
        raise ValueError(f"--log-level must be one of {', '.join(LOG_LEVELS)} (any case), got {text!r}")
    level: int = logging.getLevelName(name)
    return level


def busy_port(config: settings.MemberSettings) -> str | None:
    """A one-line message naming the flag of a port another process listens on, or None."""
    ports = (
        ("--rest-port", config.rest_port),
        ("--data-port", config.data_port),
        ("--metrics-port", max(config.metrics_port, 0)),
    )
    for flag, port in ports:
        if not port:
            continue
        with socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
            try:
                probe.bind((config.host, port))
            except OSError as exc:
                return f"{flag} {port}: cannot listen on {config.host}:{port}: {exc.strerror}"
    return None
