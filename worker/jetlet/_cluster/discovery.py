"""Finding the other members: a static list, the DNS of a headless Service, or the Kubernetes API.

``--members`` takes entries of two kinds:

* ``host:port``: a member's REST address, used as it is (static discovery;
  a local cluster passes its first member's address);
* ``dns:NAME:PORT``: every address that ``NAME`` resolves to, each with
  ``PORT``. A Kubernetes headless Service resolves to the IP of every ready
  pod behind it, so members of a StatefulSet find each other this way as
  pods come and go; the member resolves the names again while it is alone.

Resolution failures are not errors (the Service may have no ready pod yet):
the entry yields no address this time.

With the setting ``discovery = "kubernetes"`` the member also lists the
pods that ``kubernetes_label_selector`` matches through the Kubernetes API
(``jetlet._cluster.kube_discovery``), which works before any pod is Ready
and needs neither DNS nor a ClusterIP. :func:`for_settings` builds the
member's :class:`Discovery`; the member calls :meth:`Discovery.seeds` (it
blocks: on a worker thread) while it is alone, every
:meth:`Discovery.next_delay_s` seconds.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence

from jetlet._cluster import kube_discovery
from jetlet._cluster import settings as settings_mod

Resolve = Callable[[str, int], list[str]]


def resolve_host(name: str, port: int) -> list[str]:
    """The distinct IPv4/IPv6 addresses of ``name`` as ``host:port`` (IPv6 in brackets), sorted."""
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):  # UnicodeError: a label longer than 63 characters
        return []
    addresses = {str(info[4][0]) for info in infos}
    return sorted(f"[{a}]:{port}" if ":" in a else f"{a}:{port}" for a in addresses)


def parse_entry(entry: str) -> tuple[str, int] | None:
    """``(name, port)`` of a ``dns:NAME:PORT`` entry, None for a plain address; ValueError if malformed.

    >>> parse_entry("[::1]:8701") is None
    True
    >>> parse_entry("127.0.0.1")
    Traceback (most recent call last):
    ValueError: members: '127.0.0.1' must look like HOST:PORT (a member's REST address) or dns:NAME:PORT
    """
    if not entry.startswith("dns:"):
        _check_address(entry)
        return None
    name, _, port = entry.removeprefix("dns:").rpartition(":")
    if not name or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"members: {entry!r} must look like dns:NAME:PORT (a Service name and a REST port)")
    return name, int(port)


def _check_address(entry: str) -> None:
    host, _, port = entry.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]") and ":" in host
    plain = bool(host) and not any(c in host for c in ":/[]@ ") and host.isprintable()
    if not (bracketed or plain) or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"members: {entry!r} must look like HOST:PORT (a member's REST address) or dns:NAME:PORT"
        )


def discover(entries: Sequence[str], resolve: Resolve = resolve_host) -> tuple[str, ...]:
    """The seed addresses that ``entries`` stand for now, in order, without duplicates."""
    seeds: list[str] = []
    for entry in entries:
        parsed = parse_entry(entry)
        for address in [entry] if parsed is None else resolve(*parsed):
            if address not in seeds:
                seeds.append(address)
    return tuple(seeds)


class Discovery:
    """The ``members`` entries, then (with ``discovery = "kubernetes"``) the member pods' addresses."""

    def __init__(
        self,
        entries: Sequence[str],
        pods: kube_discovery.PodDiscovery | None = None,
        resolve: Resolve = resolve_host,
    ) -> None:
        for entry in entries:
            parse_entry(entry)
        self.entries = tuple(entries)
        self.pods = pods
        self._resolve = resolve

    def seeds(self) -> tuple[str, ...]:
        """The seed addresses now, without duplicates (blocking: DNS look-ups, an API call)."""
        found = discover(self.entries, self._resolve)
        if self.pods is None:
            return found
        return found + tuple(a for a in self.pods.addresses() if a not in found)

    @property
    def problem(self) -> str:
        """Why the last look failed (the Kubernetes API's error), or '' (DNS failures are no problem)."""
        return "" if self.pods is None else self.pods.state

    def next_delay_s(self) -> float:
        """How long to wait before looking again (longer while the Kubernetes API fails)."""
        return kube_discovery.INTERVAL_S if self.pods is None else self.pods.next_delay_s()


def for_settings(config: settings_mod.MemberSettings, environ: Mapping[str, str]) -> Discovery:
    """The discovery that ``config`` asks for; ValueError naming a malformed entry or missing setting."""
    pods = None
    if config.discovery == "kubernetes":
        pods = kube_discovery.PodDiscovery(kube_discovery.target(config, environ))
    return Discovery(config.members, pods)
