"""Finding the other members: a static list, or the DNS of a Kubernetes headless Service.

``--members`` takes entries of two kinds:

* ``host:port``: a member's REST address, used as it is (static discovery;
  a local cluster passes its first member's address);
* ``dns:NAME:PORT``: every address that ``NAME`` resolves to, each with
  ``PORT``. A Kubernetes headless Service resolves to the IP of every ready
  pod behind it, so members of a StatefulSet find each other this way as
  pods come and go; the member resolves the names again while it is alone.

Resolution failures are not errors (the Service may have no ready pod yet):
the entry yields no address this time.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence

Resolve = Callable[[str, int], list[str]]


def resolve_host(name: str, port: int) -> list[str]:
    """The distinct IPv4/IPv6 addresses of ``name`` as ``host:port`` (IPv6 in brackets), sorted."""
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except OSError:
        return []
    addresses = {str(info[4][0]) for info in infos}
    return sorted(f"[{a}]:{port}" if ":" in a else f"{a}:{port}" for a in addresses)


def parse_entry(entry: str) -> tuple[str, int] | None:
    """``(name, port)`` of a ``dns:NAME:PORT`` entry, None for a plain address; ValueError if malformed."""
    if not entry.startswith("dns:"):
        return None
    name, _, port = entry.removeprefix("dns:").rpartition(":")
    if not name or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"members: {entry!r} must look like dns:NAME:PORT (a Service name and a REST port)")
    return name, int(port)


def discover(entries: Sequence[str], resolve: Resolve = resolve_host) -> tuple[str, ...]:
    """The seed addresses that ``entries`` stand for now, in order, without duplicates."""
    seeds: list[str] = []
    for entry in entries:
        parsed = parse_entry(entry)
        for address in [entry] if parsed is None else resolve(*parsed):
            if address not in seeds:
                seeds.append(address)
    return tuple(seeds)
