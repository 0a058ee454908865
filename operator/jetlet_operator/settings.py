"""The operator's settings, from one environment prefix: ``JETLET_OPERATOR_<NAME>``.

:class:`OperatorSettings` is a frozen dataclass; :func:`from_environ` reads
``JETLET_OPERATOR_NAMESPACES`` (comma-separated; empty: every namespace),
``JETLET_OPERATOR_DEFAULT_IMAGE``, ``JETLET_OPERATOR_LOG_LEVEL``,
``JETLET_OPERATOR_METRICS_PORT`` and the rest, converts them to the field's
type and refuses an unknown ``JETLET_OPERATOR_*`` variable or a bad value with
:class:`SettingsError` naming the variable, before the operator starts.

>>> s = from_environ({"JETLET_OPERATOR_NAMESPACES": "jet, data", "JETLET_OPERATOR_METRICS_PORT": "9100"})
>>> (s.namespaces, s.metrics_port, s.default_image)
(('jet', 'data'), 9100, 'jetlet:dev')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

ENV_PREFIX = "JETLET_OPERATOR_"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class SettingsError(ValueError):
    """A ``JETLET_OPERATOR_*`` variable is unknown or has a bad value (the message names it)."""


@dataclasses.dataclass(frozen=True)
class OperatorSettings:
    """Everything the operator process is configured with."""

    namespaces: tuple[str, ...] = ()
    """Namespaces to watch (empty: the whole cluster)."""
    default_image: str = "jetlet:dev"
    """The member image of a JetCluster whose ``spec.image`` is empty."""
    log_level: str = "INFO"
    """DEBUG, INFO, WARNING, ERROR or CRITICAL."""
    metrics_port: int = 8080
    """Port of the operator's ``/metrics`` (Prometheus) and liveness endpoint ``/healthz``; 0: none."""
    rest_port: int = 8701
    """The REST port the member pods serve on."""
    data_port: int = 5701
    """The data port of the member pods."""
    resync_seconds: float = 30.0
    """Period of the safety-net timer that reconciles every resource even without news."""
    client_timeout_seconds: float = 10.0
    """Longest single request to a cluster member."""
    cancel_timeout_seconds: float = 60.0
    """How long the JetJob finalizer tries to cancel its job before it lets the JetJob go."""
    standalone: bool = True
    """Run without kopf's peering (one operator replica)."""

    def __post_init__(self) -> None:
        if self.log_level.upper() not in LOG_LEVELS:
            raise SettingsError(f"{ENV_PREFIX}LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}")
        for name in ("metrics_port", "rest_port", "data_port"):
            if not 0 <= getattr(self, name) <= 65535:
                raise SettingsError(f"{ENV_PREFIX}{name.upper()} must be a port in [0, 65535]")
        for name in ("resync_seconds", "client_timeout_seconds", "cancel_timeout_seconds"):
            if getattr(self, name) <= 0:
                raise SettingsError(f"{ENV_PREFIX}{name.upper()} must be > 0")
        if not self.default_image:
            raise SettingsError(f"{ENV_PREFIX}DEFAULT_IMAGE must not be empty")


_FIELDS = {f.name: f for f in dataclasses.fields(OperatorSettings)}


def _convert(name: str, text: str) -> object:
    kind = str(_FIELDS[name].type)
    variable = ENV_PREFIX + name.upper()
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
    except ValueError:
        raise SettingsError(f"{variable} must be a number, got {text!r}") from None
    if kind == "bool":
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise SettingsError(f"{variable} must be true or false, got {text!r}")
        return text.lower() in ("true", "1", "yes")
    if kind.startswith("tuple"):
        return tuple(part.strip() for part in text.split(",") if part.strip())
    return text


def from_environ(environ: Mapping[str, str]) -> OperatorSettings:
    """The settings that ``JETLET_OPERATOR_*`` variables of ``environ`` give (defaults for the rest)."""
    values: dict[str, object] = {}
    for key, text in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        name = key[len(ENV_PREFIX) :].lower()
        if name not in _FIELDS:
            known = ", ".join(ENV_PREFIX + n.upper() for n in _FIELDS)
            raise SettingsError(f"unknown variable {key} (known: {known})")
        values[name] = _convert(name, text)
    if isinstance(values.get("log_level"), str):
        values["log_level"] = str(values["log_level"]).upper()
    return OperatorSettings(**values)  # type: ignore[arg-type]
