"""Member settings: command-line flags, then ``JETLET_*`` environment variables, then a config file.

Theory of operation
-------------------
:class:`MemberSettings` is one frozen dataclass holding everything a member
process needs. The fields of :class:`~jetlet.config.InstanceConfig`
(``cooperative_thread_count``, ``flow_control_period_millis``,
``backup_count``, ``scale_up_delay_millis``, ``partition_count``) and of its
default :class:`~jetlet.config.EdgeConfig` (``queue_size``,
``packet_size_limit``, ``receive_window_multiplier``, ``buffer_timeout_millis``) are settings too, under
the same names, with the defaults and descriptions those classes state:
:meth:`MemberSettings.instance_config` composes them back.
:func:`load` merges three sources, the first that sets a key winning:

1. flags (a mapping from setting name to value; ``None`` means "not given"),
2. the environment: ``JETLET_<NAME>`` in upper case, e.g.
   ``JETLET_COOPERATIVE_THREAD_COUNT=2``,
3. a TOML (``.toml``) or JSON file named by the ``config_file`` flag or
   ``JETLET_CONFIG_FILE``, holding a flat table of setting names.

Text values (environment, flags from a command line) are converted to the
setting's type. An unknown key in the file or an unknown ``JETLET_*``
variable, and any value of the wrong type or out of range, raise
:class:`SettingsError` naming the key and the source, before the member
starts. ``JETLET_CLIENT_*`` variables belong to the client (the CLI's
``JETLET_CLIENT_ADDRESSES``, ``JETLET_CLIENT_TOKEN``, ``JETLET_CLIENT_CA_FILE``)
and are ignored here. Secrets come from a file (``secret_file``, ``token_file``) or from
``JETLET_SECRET`` / ``JETLET_TOKEN``; they are never shown in ``repr``, and one shorter
than :data:`MIN_SECRET_CHARS` is refused when read, naming where it came from.

>>> s = load({"name": "m1"}, environ={"JETLET_BACKUP_COUNT": "2"})
>>> (s.name, s.backup_count, s.queue_size)
('m1', 2, 1024)
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import tomllib
from collections.abc import Callable, Mapping
from typing import Any

from jetlet import config

ENV_PREFIX = "JETLET_"
CLIENT_ENV_PREFIX = "JETLET_CLIENT_"
"""The client's variables (``jetlet -a``, ``--token``, ``--ca-file``): never member settings."""


class SettingsError(ValueError):
    """A setting is unknown or has a bad value; the message names the key and its source."""


SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where Kubernetes mounts a pod's service-account token, CA certificate and namespace."""
DISCOVERY_KINDS = ("dns", "kubernetes")
"""The values of the ``discovery`` setting."""
CONSOLE_ANONYMOUS_CHOICES = ("none", "read-only")
"""The values of the ``console_anonymous`` setting."""
LOG_FORMATS = ("text", "json")
"""The values of the ``log_format`` setting."""
_INSTANCE = config.InstanceConfig()
_EDGE = config.EdgeConfig()
INSTANCE_SETTINGS = tuple(
    f.name for f in dataclasses.fields(config.InstanceConfig) if f.name != "default_edge_config"
)
"""The settings that are :class:`~jetlet.config.InstanceConfig`'s fields (its edge default aside)."""
EDGE_SETTINGS = tuple(f.name for f in dataclasses.fields(config.EdgeConfig))
"""The settings that are the fields of the instance's default :class:`~jetlet.config.EdgeConfig`."""


@dataclasses.dataclass(frozen=True)
class MemberSettings:
    """Everything one member process is configured with."""

    name: str = ""
    """The member's name; unique in the cluster (empty: derived from host and data port)."""
    host: str = "127.0.0.1"
    """The address both ports bind to."""
    rest_port: int = 8701
    """Port of the REST API (0: any free port)."""
    data_port: int = 5701
    """Port of the member-to-member data connections (0: any free port)."""
    metrics_port: int = 0
    """Port of the Prometheus ``/metrics`` endpoint (0: any free port, shown in ``/cluster`` and the
    start-up line; -1: not served). A pod sets a fixed one (e.g. 9701) for its ServiceMonitor."""
    metrics_token_file: str = ""
    """File holding a bearer token that ``/metrics`` requires (empty: none, as Prometheus scrapes)."""
    metrics_token: str = dataclasses.field(default="", repr=False)
    """The ``/metrics`` bearer token itself (prefer ``metrics_token_file``)."""
    advertise_host: str = ""
    """The host other members and clients should dial (empty: ``host``)."""
    members: tuple[str, ...] = ()
    """REST addresses ``host:port`` of members to join, or ``dns:NAME:PORT`` (every address of NAME)."""
    discovery: str = "dns"
    """How the others are found: ``dns`` (``members`` only) or ``kubernetes`` (also the pods that
    ``kubernetes_label_selector`` matches, listed through the Kubernetes API; see docs/cluster.md)."""
    kubernetes_label_selector: str = ""
    """The member pods' label selector, e.g. ``app.kubernetes.io/instance=jet`` (needed by ``kubernetes``)."""
    kubernetes_namespace: str = ""
    """The member pods' namespace (empty: the pod's own, from its service account's ``namespace`` file)."""
    kubernetes_api_server: str = ""
    """The API server's URL (empty: ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``)."""
    kubernetes_token_file: str = SERVICE_ACCOUNT_DIR + "/token"
    """Bearer token for the API server, read at every listing (empty: send none)."""
    kubernetes_ca_file: str = SERVICE_ACCOUNT_DIR + "/ca.crt"
    """CA that the API server's certificate is checked against (empty: the system's CAs)."""
    kubernetes_rest_port: int = 0
    """The pods' REST port (0: their container port named ``kubernetes_port_name``, else ``rest_port``)."""
    kubernetes_port_name: str = "rest"
    """Name of the container port that serves REST in the member pods."""
    secret_file: str = ""
    """File holding the cluster secret (at least 16 characters) that peers prove on the data port's
    handshake."""
    token_file: str = ""
    """File holding the bearer token (at least 16 characters) the REST API requires."""
    secret: str = dataclasses.field(default="", repr=False)
    """The cluster secret itself, at least 16 characters (prefer ``secret_file`` or ``JETLET_SECRET``:
    a command line is visible to every user of the machine)."""
    token: str = dataclasses.field(default="", repr=False)
    """The REST bearer token itself, at least 16 characters (prefer ``token_file`` or ``JETLET_TOKEN``:
    a command line is visible to every user of the machine)."""
    ready_file: str = ""
    """Where the member writes its bound addresses as JSON once it serves."""
    parent_pid: int = 0
    """Stop at once when the process with this id is no longer this member's parent (0: never): a
    local cluster sets it, so that its members do not outlive the program that started them."""
    tls_cert_file: str = ""
    """PEM certificate of this member: with ``tls_key_file``, both ports use TLS."""
    tls_key_file: str = ""
    """PEM private key of ``tls_cert_file``."""
    tls_ca_file: str = ""
    """PEM CA certificate(s) that members' certificates are checked against."""
    snapshot_directory: str = ""
    """Where complete snapshots are also written; a cluster started with it resumes its jobs."""
    # The instance and edge settings: their defaults and descriptions are InstanceConfig's and
    # EdgeConfig's (jetlet.config), stated there once; member_flags reads the descriptions from there.
    cooperative_thread_count: int = _INSTANCE.cooperative_thread_count
    flow_control_period_millis: int = _INSTANCE.flow_control_period_millis
    backup_count: int = _INSTANCE.backup_count
    scale_up_delay_millis: int = _INSTANCE.scale_up_delay_millis
    partition_count: int = _INSTANCE.partition_count
    max_queued_bytes: int = _INSTANCE.max_queued_bytes
    queue_size: int = _EDGE.queue_size
    batch_queue_size: int = _EDGE.batch_queue_size
    packet_size_limit: int = _EDGE.packet_size_limit
    receive_window_multiplier: int = _EDGE.receive_window_multiplier
    buffer_timeout_millis: int = _EDGE.buffer_timeout_millis
    heartbeat_interval_millis: int = 500
    """How often a member tells every other member it is alive."""
    failure_timeout_millis: int = 5000
    """A member silent for this long is removed from the member list."""
    graceful_shutdown_timeout_millis: int = 30000
    """On SIGTERM, how long a member waits for its jobs and data to move to the others before it exits."""
    join_timeout_millis: int = 0
    """A member with members to join that is still alone after this long stops (exit status 4) instead of
    running as a cluster of one; 0: it never gives up (it says, with backoff, that no seed answers)."""
    max_request_bytes: int = 64 * 1024 * 1024
    """Largest REST request body accepted."""
    console_anonymous: str = "none"
    """What the web console (``/console/`` on the REST port) shows without a login: ``none`` (only the
    login form) or ``read-only`` (the cluster, the jobs and their metrics, without actions)."""
    log_level: str = "INFO"
    """DEBUG, INFO, WARNING, ERROR or CRITICAL, in any case."""
    log_format: str = "text"
    """``text`` (a line a person reads) or ``json`` (one JSON object per line, for log collectors:
    time, level, logger, message, member, job, job_name, exception)."""

    def __post_init__(self) -> None:
        for spec in dataclasses.fields(self):
            _check_type(spec.name, getattr(self, spec.name), "settings")
        for name in _POSITIVE:
            if getattr(self, name) < 1:
                raise SettingsError(f"setting {name!r} must be >= 1, got {getattr(self, name)!r}")
        if not -1 <= self.metrics_port <= 65535:
            raise SettingsError(
                f"setting 'metrics_port' must be a port in [0, 65535] or -1 (none), got {self.metrics_port}"
            )
        for name in ("rest_port", "data_port"):
            if not 0 <= getattr(self, name) <= 65535:
                raise SettingsError(
                    f"setting {name!r} must be a port in [0, 65535], got {getattr(self, name)}"
                )
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise SettingsError(
                "settings 'tls_cert_file' and 'tls_key_file' go together: set both or neither"
            )
        if self.tls_cert_file and not self.tls_ca_file:
            raise SettingsError(
                "setting 'tls_ca_file' is needed with TLS: members check each other against it"
            )
        if self.console_anonymous not in CONSOLE_ANONYMOUS_CHOICES:
            raise SettingsError(
                f"setting 'console_anonymous' must be 'none' or 'read-only', got {self.console_anonymous!r}"
            )
        if self.log_format not in LOG_FORMATS:
            raise SettingsError(f"setting 'log_format' must be 'text' or 'json', got {self.log_format!r}")
        if self.discovery not in DISCOVERY_KINDS:
            raise SettingsError(f"setting 'discovery' must be 'dns' or 'kubernetes', got {self.discovery!r}")
        if self.discovery == "kubernetes" and not self.kubernetes_label_selector:
            raise SettingsError("setting 'kubernetes_label_selector' is needed with discovery 'kubernetes'")
        if not 0 <= self.kubernetes_rest_port <= 65535:
            raise SettingsError(
                f"setting 'kubernetes_rest_port' must be in [0, 65535], got {self.kubernetes_rest_port}"
            )
        if self.join_timeout_millis < 0:
            raise SettingsError(f"setting 'join_timeout_millis' must be >= 0, got {self.join_timeout_millis}")
        if self.failure_timeout_millis <= self.heartbeat_interval_millis:
            raise SettingsError("setting 'failure_timeout_millis' must exceed 'heartbeat_interval_millis'")
        try:
            self.instance_config()
        except ValueError as exc:
            raise SettingsError(f"setting {exc}") from exc

    def instance_config(self) -> config.InstanceConfig:
        """The engine's ``InstanceConfig`` with these settings (its default edge config too)."""
        edge = config.EdgeConfig(**{name: getattr(self, name) for name in EDGE_SETTINGS})
        return config.InstanceConfig(
            **{name: getattr(self, name) for name in INSTANCE_SETTINGS}, default_edge_config=edge
        )

    def read_secret(self) -> bytes:
        """The cluster secret from ``secret`` or ``secret_file``; empty bytes if neither is set."""
        return _read_text("secret", self.secret, self.secret_file).encode()

    def read_metrics_token(self) -> str:
        """The ``/metrics`` bearer token from ``metrics_token`` or ``metrics_token_file``; empty: none."""
        return _read_text("metrics_token", self.metrics_token, self.metrics_token_file)

    def read_token(self) -> str:
        """The REST bearer token from ``token`` or ``token_file``; empty if neither is set."""
        return _read_text("token", self.token, self.token_file)


_POSITIVE = (
    "cooperative_thread_count",
    "flow_control_period_millis",
    "partition_count",
    "max_queued_bytes",
    "queue_size",
    "batch_queue_size",
    "packet_size_limit",
    "receive_window_multiplier",
    "heartbeat_interval_millis",
    "failure_timeout_millis",
    "max_request_bytes",
)
_KINDS: dict[str, str] = {f.name: str(f.type) for f in dataclasses.fields(MemberSettings)}
NAMES = frozenset(_KINDS)
"""Every setting name (the keys accepted by flags, environment and file)."""


MIN_SECRET_CHARS = 16
"""The fewest characters a cluster secret or REST token may have (a generated one has 43)."""


def _read_text(what: str, inline: str, path: str) -> str:
    if inline:
        return _strong(what, inline, f"--{what.replace('_', '-')} or JETLET_{what.upper()}")
    if not path:
        return ""
    try:
        text = pathlib.Path(path).read_text().strip()
    except OSError as exc:
        raise SettingsError(f"setting '{what}_file': cannot read {path!r}: {exc.strerror}") from exc
    return _strong(what, text, f"'{what}_file' {path}") if text else ""


def _strong(what: str, value: str, source: str) -> str:
    if len(value) < MIN_SECRET_CHARS:
        raise SettingsError(
            f"setting {what!r} (from {source}) must be at least {MIN_SECRET_CHARS} characters, got "
            f"{len(value)}: generate one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return value


def _check_type(name: str, value: object, source: str) -> None:
    kind = _KINDS[name]
    if kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "str":
        ok = isinstance(value, str)
    else:
        ok = isinstance(value, tuple) and all(isinstance(v, str) for v in value)
    if not ok:
        raise SettingsError(f"setting {name!r} from {source} must be {_describe(kind)}, got {value!r}")


def _describe(kind: str) -> str:
    return {"int": "an integer", "str": "a string"}.get(kind, "a list of strings")


def _from_text(name: str, text: str, source: str) -> object:
    kind = _KINDS[name]
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            raise SettingsError(f"setting {name!r} from {source} must be an integer, got {text!r}") from None
    if kind == "str":
        return text
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _normalise(name: str, value: object, source: str) -> object:
    if name not in NAMES:
        raise SettingsError(f"unknown setting {name!r} in {source}")
    if isinstance(value, str) and _KINDS[name] != "str":
        return _from_text(name, value, source)
    if isinstance(value, list):
        value = tuple(value)
    _check_type(name, value, source)
    return value


def _from_environment(environ: Mapping[str, str]) -> dict[str, object]:
    found: dict[str, object] = {}
    for key, text in environ.items():
        if not key.startswith(ENV_PREFIX) or key.startswith(CLIENT_ENV_PREFIX):
            continue
        if key == ENV_PREFIX + "CONFIG_FILE":
            continue
        name = key[len(ENV_PREFIX) :].lower()
        if name not in NAMES:
            raise SettingsError(
                f"unknown setting {name!r} in environment variable {key} (a member's variables are "
                f"JETLET_<SETTING>; the client's are {CLIENT_ENV_PREFIX}ADDRESSES, _TOKEN and _CA_FILE)"
            )
        found[name] = _normalise(name, text, f"environment variable {key}")
    return found


_PARSERS: dict[str, Callable[[str], Any]] = {".toml": tomllib.loads, ".json": json.loads}


def _from_file(path: str) -> dict[str, object]:
    suffix = pathlib.Path(path).suffix.lower()
    parser = _PARSERS.get(suffix)
    if parser is None:
        raise SettingsError(f"config file {path!r} must end in .toml or .json")
    try:
        text = pathlib.Path(path).read_text()
        table = parser(text)
    except OSError as exc:
        raise SettingsError(f"cannot read config file {path!r}: {exc.strerror}") from exc
    except ValueError as exc:
        raise SettingsError(f"config file {path!r} is not valid {suffix[1:].upper()}: {exc}") from exc
    if not isinstance(table, dict):
        raise SettingsError(f"config file {path!r} must hold a table of settings")
    return {str(k): _normalise(str(k), v, f"config file {path}") for k, v in table.items()}


def load(
    flags: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
    config_file: str | None = None,
) -> MemberSettings:
    """Merge flags > ``JETLET_*`` environment > config file into validated settings."""
    flags = dict(flags or {})
    environ = dict(environ or {})
    file_flag = flags.pop("config_file", None)
    path = config_file or (str(file_flag) if file_flag else "") or environ.get(ENV_PREFIX + "CONFIG_FILE", "")
    merged = _from_file(path) if path else {}
    merged.update(_from_environment(environ))
    merged.update({k: _normalise(k, v, "flags") for k, v in flags.items() if v is not None})
    return MemberSettings(**merged)  # type: ignore[arg-type]
