"""The member process: ``python -m jetlet.member`` (and ``jetlet member``).

Theory of operation
-------------------
:func:`main` reads the member's settings (flags > ``JETLET_*`` environment >
config file, see ``jetlet._cluster.settings``), refuses to start without a
cluster secret and a REST token, then runs one asyncio loop in the main
thread until SIGTERM or SIGINT:

* the data port is a ``jetlet._network.transport.Transport`` (its own loop
  thread), admitting only peers that prove the cluster secret; every member
  dials every other member's data port as it learns of it (one connection
  per pair carries the job protocol, the distributed edges' packets and
  their flow control);
* the REST API (``jetlet._cluster.rest``) serves the job service, a
  ``jetlet._cluster.cluster_service.ClusterJobService``: the coordinator runs
  each job on every member, the others forward their calls to it — and the
  ``/cluster`` description;
* membership (``jetlet._cluster.membership``, sans-IO) is driven by a
  periodic tick; its messages travel as authenticated ``POST /membership``
  calls to the other members' REST ports (so ``--members`` lists REST
  addresses), and the partition table is re-derived from every new member
  list, moving as few partitions as possible. While alone the member looks
  for the others (``jetlet._cluster.discovery``: the ``--members``
  entries, DNS, or the Kubernetes API); ``/ready`` answers from
  ``jetlet._cluster.readiness``. A joiner enters the member
  list only once the coordinator's transport has authenticated it on its
  data port (``jetlet._cluster.admission``); a lone member that a cluster
  refuses (a wrong cluster secret) stops with :data:`EXIT_REFUSED`. A
  member with ``--members`` that is still alone says why, with backoff
  (``jetlet._cluster.seed_watch``), and with ``--join-timeout-millis``
  stops with :data:`EXIT_ALONE` rather than run as a cluster of one.

The process is the member's own, so it sets the interpreter's thread switch
interval to :data:`SWITCH_INTERVAL_S` (1 ms instead of Python's 5 ms): the
cooperative threads, the non-cooperative sources' threads and the network
thread share one GIL, and a thread that wants it waits up to that interval
behind one that computes; measured on NEXMark Q1 at 100,000 events/s, p99.99
11 ms -> 6.5 ms with the same throughput (within the noise).

Every member also serves Prometheus ``/metrics`` on a port of its own
(``--metrics-port``; ``jetlet._metrics``), read from its own executions.

Once both ports are bound the member writes ``{"name", "pid",
"rest_address", "data_address", "metrics_address"}`` as JSON to ``--ready-file`` (atomically:
written aside, then renamed). On shutdown it stops the REST server, the
membership loop, the transport and every job, and returns 0.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import pathlib
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import aiohttp
from aiohttp import web

from jetlet import _embedded
from jetlet._cluster import (
    admission,
    cluster_service,
    discovery,
    logs,
    member_flags,
    membership,
    membership_auth,
    partition_table,
    readiness,
    rest,
    seed_watch,
    settings,
    tls,
)
from jetlet._metrics import collector, gc_pauses
from jetlet._metrics import server as metrics_server
from jetlet._network import frames
from jetlet._network import tasklets as remote
from jetlet._network import transport as transport_mod

_log = logging.getLogger("jetlet.member")
_TICK_S = 0.05
ALONE_RESUME_S = 30.0
"""How long a member with seeds and a snapshot directory waits to join before it resumes the
directory's jobs as a cluster of one (see ``Member._recover_offloaded_jobs``)."""
LONE_TAKE_OVER_HEARTBEATS = 3
"""Heartbeat intervals a member that dropped every other member waits before it takes their jobs
over: time for its join to be answered ``removed`` if it was the one cut off (see coordination.py)."""

SWITCH_INTERVAL_S = 0.001
"""The member process's ``sys.setswitchinterval`` (see the module doc)."""
EXIT_REFUSED = 3
"""Exit status of a member that a cluster refused to admit (e.g. its cluster secret is wrong)."""
EXIT_ALONE = 4
"""Exit status of a member still alone after ``--join-timeout-millis`` (no seed of ``--members`` answered)."""


def _now_ms() -> int:
    return int(time.time() * 1000)


def build_parser() -> argparse.ArgumentParser:
    """Flags for every setting (``--rest-port``, ``--members a:1,b:2``, ``--queue-size`` ...)."""
    parser = argparse.ArgumentParser(
        prog="jetlet member",
        description="Run a jetlet cluster member until SIGTERM or Ctrl-C. Each setting comes from its "
        "flag, else the environment variable JETLET_<SETTING> (e.g. JETLET_QUEUE_SIZE), else --config.",
    )
    parser.add_argument(
        "--config", dest="config_file", metavar="FILE", help="TOML or JSON file of settings (default: none)"
    )
    member_flags.add_setting_flags(parser)
    return parser


class Member:
    """One running member: transport, membership, partition table and REST server."""

    def __init__(self, config: settings.MemberSettings, token: str, secret: bytes) -> None:
        self.config = config
        self.token = token
        self.secret = secret
        self.stopping = asyncio.Event()
        self.instance = _embedded.embedded(config.instance_config())
        self.service: cluster_service.ClusterJobService | None = None
        self.transport: transport_mod.Transport | None = None
        self.membership: membership.Membership | None = None
        self._names: tuple[str, ...] = ()
        self._incarnations: dict[str, str] = {}
        """Each listed member's uuid: the same name with another uuid is a new member."""
        self._session: aiohttp.ClientSession | None = None
        self._leaving: asyncio.Task[None] | None = None
        self.exit_code = 0
        self.seed_watch = seed_watch.SeedWatch(config.members, config.join_timeout_millis)
        """Non-zero once the member stops because a cluster refused it (see ``_on_refused``)."""
        self.admission = admission.Admission()
        self._background: set[asyncio.Task[None]] = set()
        self.discovery = discovery.for_settings(config, os.environ)
        self.readiness = readiness.Readiness(config.failure_timeout_millis)
        tls_on = bool(config.tls_cert_file)
        self._scheme = "https" if tls_on else "http"
        self._server_ssl = (
            tls.server_context(config.tls_cert_file, config.tls_key_file, config.tls_ca_file)
            if tls_on
            else None
        )
        self._data_server_ssl = (
            tls.mutual_server_context(config.tls_cert_file, config.tls_key_file, config.tls_ca_file)
            if tls_on
            else None
        )
        self._client_ssl = (
            tls.client_context(config.tls_ca_file, config.tls_cert_file, config.tls_key_file)
            if tls_on
            else None
        )

    @property
    def table(self) -> partition_table.PartitionTable | None:
        """The partition table the coordinator installed on this member (the one every reader uses)."""
        return self.service.tables.current if self.service is not None else None

    def describe(self) -> dict[str, Any]:
        assert self.membership is not None
        table = self.table
        return {
            **self.membership.describe(),
            "partition_table": table.to_dict() if table is not None else None,
        }

    def _refresh_table(self) -> None:
        """Tell the job service of a new member list (its coordinator installs the partition table)."""
        assert self.membership is not None
        name = self.membership.local.name
        paused_ms = self.membership.take_pause()
        if paused_ms and self.service is not None:
            _log.warning(
                "member %s was not running for %.1f s (longer than the failure timeout): it stops its "
                "executions and waits to hear whether the cluster removed it",
                name,
                paused_ms / 1000,
            )
            self.service.paused(paused_ms)
        if self.membership.take_removed() and self.service is not None:
            _log.warning(
                "member %s was removed from the cluster: it forgets its state and joins again, a new member",
                name,
            )
            self.service.removed_from_cluster()
        if self.membership.take_confirmed() and self.service is not None:
            _log.info("member %s is still in the cluster: it goes on", name)
            self.service.confirmed()
        names = tuple(self.membership.member_list.names)
        incarnations = {m.name: m.uuid for m in self.membership.member_list.members}
        # a member replaced under the same name (a StatefulSet's new pod) is a new member: the old one
        # leaves the list first, so that nothing of the old one (lost, leaving) sticks to the new one
        replaced = [n for n, u in incarnations.items() if self._incarnations.get(n, u) != u]
        if names != self._names or replaced:
            self._names = names
            if self.service is not None:
                if replaced:
                    self.service.on_members_changed(tuple(n for n in names if n not in replaced))
                self.service.on_members_changed(names)
        self._incarnations = incarnations
        if self.service is not None:
            self.service.tick()
        self._connect_data_ports()

    def _connect_data_ports(self) -> None:
        """Dial every other member's data port (the transport keeps one connection per pair)."""
        assert self.membership is not None and self.transport is not None
        for member in self.membership.member_list.members:
            if member.name == self.membership.local.name or self.transport.is_connected(member.name):
                continue
            host, _, port = member.data_address.rpartition(":")
            future = self.transport.connect_soon(member.name, host, int(port))
            future.add_done_callback(_log_connect_failure(member.name))

    def ready(self) -> dict[str, Any]:
        """What ``GET /ready`` answers (see ``jetlet._cluster.readiness``)."""
        assert self.membership is not None and self.transport is not None
        members = None if self.table is None else self.table.members
        return self.readiness.report(self.membership, members, self.transport.is_connected, _now_ms())

    def has_quorum(self) -> bool:
        """Whether the members present are a majority of the largest cluster this member has known."""
        assert self.membership is not None
        return membership.has_quorum(
            len(self.membership.member_list.members), self.membership.last_known_size
        )

    def member_names(self) -> tuple[str, ...]:
        """The members in age order: the first is the coordinator."""
        assert self.membership is not None
        return tuple(self.membership.member_list.names)

    def _on_message(self, peer: str, msg_type: frames.MessageType, payload: bytes) -> None:
        if self.service is None or not self.service.on_message(peer, msg_type, payload):
            _log.debug("message %s from %s ignored", msg_type.name, peer)

    def _on_peer_lost(self, peer: str) -> None:
        _log.info("data connection to %s lost", peer)
        if self.service is not None:
            self.service.on_peer_lost(peer)

    async def _send(self, outgoing: list[membership.Outgoing]) -> None:
        assert self.membership is not None and self._session is not None
        for out in outgoing:
            target = self.membership.member_list.get(out.name) if out.name else None
            address = target.rest_address if target is not None else out.address
            if not address:
                continue
            body = json.dumps(out.message).encode()
            headers = {
                "Content-Type": "application/json",
                membership_auth.HEADER: membership_auth.sign(self.secret, body, int(time.time() * 1000)),
            }
            try:
                url = f"{self._scheme}://{address}/membership"
                async with self._session.post(
                    url, data=body, headers=headers, ssl=self._client_ssl or True
                ) as response:
                    answer = await response.read()
                    if response.status == 401 and target is None:
                        self.seed_watch.note_failure(address, "refused this member's REST token (401)")
                    elif response.status == 403 and target is None:
                        self._on_membership_refused(address, answer)
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                if target is None:  # a seed: SeedWatch reports it if the member stays alone
                    self.seed_watch.note_failure(address, f"unreachable ({type(exc).__name__}: {exc})")

    async def on_membership(self, message: dict[str, Any]) -> None:
        assert self.membership is not None
        if message.get("kind") == "refused":
            self._on_refused(message)
            return
        if message.get("kind") == "join" and not self._may_admit(message):
            return
        outgoing = self.membership.receive(message, _now_ms())
        self._refresh_table()
        if outgoing:
            asyncio.get_running_loop().create_task(self._send(outgoing))

    def _may_admit(self, message: dict[str, Any]) -> bool:
        """Whether a join may reach the membership: only once the transport trusts the joiner (its
        handshake proved the cluster secret); until then its data port is dialed (``_cluster.admission``)."""
        assert self.membership is not None and self.transport is not None
        joiner = membership.MemberInfo.from_dict(message["member"])
        known = self.membership.member_list.get(joiner.name)
        if joiner.name == self.membership.local.name or (known is not None and known.uuid == joiner.uuid):
            return True
        if not self.membership.is_coordinator:
            return True  # forwarded to the coordinator, which decides
        verdict = self.admission.on_join(joiner, self.transport.is_connected(joiner.name))
        if verdict is admission.Verdict.DIAL:
            host, _, port = joiner.data_address.rpartition(":")
            dial = self.transport.connect_soon(joiner.name, host, int(port))
            loop = asyncio.get_running_loop()
            dial.add_done_callback(
                lambda done: loop.call_soon_threadsafe(self._on_joiner_dialed, joiner, message, done)
            )
        return verdict is admission.Verdict.ADMIT

    def _on_joiner_dialed(
        self, joiner: membership.MemberInfo, message: dict[str, Any], dial: concurrent.futures.Future[None]
    ) -> None:
        error = ConnectionError("the dial was cancelled") if dial.cancelled() else dial.exception()
        outcome = self.admission.on_dialed(joiner, error)
        if outcome.log:
            _log.log(logging.INFO if outcome.admit else logging.WARNING, "%s", outcome.log)
        if outcome.admit:
            self._spawn(self.on_membership(message))
        elif outcome.refusal is not None and self.membership is not None:
            size = len(self.membership.member_list.members)
            refusal = admission.refusal_message(joiner, outcome.refusal, size)
            self._spawn(self._send([membership.Outgoing(refusal, address=joiner.rest_address)]))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)  # held until done: the loop keeps only a weak reference
        task.add_done_callback(self._background.discard)

    def _on_membership_refused(self, address: str, answer: bytes) -> None:
        """A seed refused this member's membership message (403): a wrong cluster secret stops it."""
        assert self.membership is not None
        try:
            body = json.loads(answer)
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        refusal = membership_auth.wrong_secret_refusal(body, self.membership.local.uuid) if body else None
        if refusal is not None:
            self._on_refused(refusal)
        else:
            self.seed_watch.note_failure(
                address, f"refused its membership messages: {body.get('error', answer[:200])}"
            )

    def _on_refused(self, message: dict[str, Any]) -> None:
        """A coordinator refused this member's join: stop if it applies (``admission.refusal_applies``)."""
        assert self.membership is not None
        reason = admission.refusal_applies(message, self.membership.local.uuid, self.membership.is_alone)
        if reason is None:
            return
        _log.error("the cluster refused this member: %s; stopping", reason)
        print(f"jetlet member: the cluster refused this member: {reason}", file=sys.stderr)
        self.exit_code = EXIT_REFUSED
        self.stopping.set()

    def _watch_seeds(self) -> None:
        """Say, with backoff, that the seeds do not answer; stop after ``--join-timeout-millis``."""
        assert self.membership is not None
        seen = self.seed_watch.observe(self.membership.is_alone, _now_ms())
        if seen.log is not None:
            _log.log(logging.WARNING if self.membership.is_alone else logging.INFO, "%s", seen.log)
        if seen.give_up:
            print(f"jetlet member: {seen.log}", file=sys.stderr)
            self.exit_code = EXIT_ALONE
            self.stopping.set()

    async def _tick_forever(self) -> None:
        assert self.membership is not None
        next_discovery = 0.0
        while not self.stopping.is_set():
            if self.membership.is_alone and time.monotonic() >= next_discovery:
                seeds = await asyncio.to_thread(self.discovery.seeds)  # answers change as pods come and go
                next_discovery = time.monotonic() + self.discovery.next_delay_s()
                self.membership.set_seeds(seeds)
                self.readiness.discovered(self.membership, self.discovery.problem, _now_ms())
            outgoing = self.membership.tick(_now_ms())
            self._refresh_table()
            await self._send(outgoing)
            self._watch_seeds()
            self._watch_parent()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), _TICK_S)

    def _watch_parent(self) -> None:
        """With ``parent_pid``: stop at once (no graceful leave) when that process is gone."""
        parent = self.config.parent_pid
        if parent and os.getppid() != parent and not self.stopping.is_set():
            _log.warning(
                "member %s: the process that started it (%d) is gone: stopping", self.config.name, parent
            )
            self.stopping.set()

    async def _serve_metrics(self, host: str, advertised: str) -> tuple[web.AppRunner | None, str]:
        """Serve Prometheus ``/metrics`` on ``metrics_port`` (jetlet._metrics); none with -1."""
        if self.config.metrics_port < 0 or self.service is None:
            return None, ""
        service = self.service
        collected = collector.MemberCollector(
            lambda: self.membership.local.name if self.membership is not None else service.member_name,
            service.executions.views,
            self.instance.service.worker_stats,
            lambda: dict(service.coordination.jobs.counts),
        )
        app = metrics_server.create_app(metrics_server.registry(collected), self.config.read_metrics_token())
        runner, (_, port) = await rest.start_site(app, host, self.config.metrics_port, self._server_ssl)
        gc_pauses.PROCESS.install()
        return runner, f"{advertised}:{port}"

    async def run(self) -> None:
        config = self.config
        host = config.host
        advertised = config.advertise_host or host
        name = config.name
        transport = transport_mod.Transport(
            name or "member",
            self.secret,
            self._on_message,
            self._on_peer_lost,
            server_ssl=self._data_server_ssl,  # with the TLS flags the data port speaks only mutual TLS
            client_ssl=self._client_ssl,
        )
        self.transport = transport
        data_host, data_port = await asyncio.to_thread(transport.start, host, config.data_port)
        flow = remote.FlowSettings(
            flow_control_period_millis=config.flow_control_period_millis,
            receive_window_multiplier=config.receive_window_multiplier,
            packet_size_limit=config.packet_size_limit,
        )
        self.service = cluster_service.ClusterJobService(
            transport.member_name,
            transport,
            self.member_names,
            self.instance,
            flow,
            self.has_quorum,
            config.snapshot_directory,
            LONE_TAKE_OVER_HEARTBEATS * config.heartbeat_interval_millis / 1000,
        )
        app = rest.create_app(
            self.service,
            self.describe,
            self.token,
            config.max_request_bytes,
            self.on_membership,
            self.ready,
            config.console_anonymous,
            membership_secret=self.secret,
        )
        runner, (_, rest_port) = await rest.start_site(app, host, config.rest_port, self._server_ssl)
        metrics_runner, metrics_address = await self._serve_metrics(host, advertised)
        name = name or f"{advertised}:{data_port}"
        logs.name_member(name)
        info = membership.MemberInfo(
            name,
            f"{advertised}:{data_port}",
            f"{advertised}:{rest_port}",
            _now_ms(),
            metrics_address=metrics_address,
        )
        self.membership = membership.Membership(
            info,
            (),  # the first tick looks for the others
            config.heartbeat_interval_millis,
            config.failure_timeout_millis,
            _now_ms(),
        )
        self._refresh_table()
        timeout = aiohttp.ClientTimeout(total=max(1.0, config.heartbeat_interval_millis / 1000))
        headers = {"Authorization": f"Bearer {self.token}"}
        self._session = aiohttp.ClientSession(timeout=timeout, headers=headers)
        ticker = asyncio.get_running_loop().create_task(self._tick_forever())
        recovery = asyncio.get_running_loop().create_task(self._recover_offloaded_jobs())
        _write_ready_file(config.ready_file, info)
        _log.info(
            "member %s serving REST on %s, data on %s:%d, metrics on %s",
            name,
            info.rest_address,
            data_host,
            data_port,
            f"http{'s' if self._server_ssl else ''}://{metrics_address}/metrics"
            if metrics_address
            else "none",
        )
        try:
            await self.stopping.wait()
        finally:
            recovery.cancel()
            await ticker
            await self._session.close()
            await runner.cleanup()
            if metrics_runner is not None:
                await metrics_runner.cleanup()
                gc_pauses.PROCESS.uninstall()
            await asyncio.to_thread(self._close_engine)

    def leave(self) -> None:
        """SIGTERM or Ctrl-C: leave the cluster gracefully, then stop (a second signal stops at once)."""
        if self._leaving is not None:
            self.stopping.set()
            return
        self._leaving = asyncio.get_running_loop().create_task(self._leave_gracefully())

    async def _leave_gracefully(self) -> None:
        timeout_s = self.config.graceful_shutdown_timeout_millis / 1000
        if self.service is not None:
            name = self.service.member_name
            _log.info(
                "member %s is leaving the cluster (up to %g s for its jobs and data to move)",
                self.config.name,
                timeout_s,
            )
            started = time.monotonic()
            confirmed = await asyncio.to_thread(self.service.leave, timeout_s)
            _log.info(
                "member %s left the cluster in %.2f s%s",
                name,
                time.monotonic() - started,
                "" if confirmed else " (not confirmed: leaving anyway)",
            )
        self.stopping.set()

    async def _recover_offloaded_jobs(self) -> None:
        """With a snapshot directory: once the members started with this one have joined, resume its jobs.

        Only the coordinator resumes them. A member told whom to join (``--members``, or Kubernetes
        discovery) first waits to join: alone, it would be the coordinator of a cluster of one and
        run the jobs a moment before it joins the cluster that runs them too (two executions writing
        the same output). It resumes them alone only after :data:`ALONE_RESUME_S` without a seed.
        """
        if not self.config.snapshot_directory or self.service is None or self.membership is None:
            return
        await asyncio.sleep(3 * self.config.heartbeat_interval_millis / 1000)
        if self.config.members or self.config.discovery == "kubernetes":
            deadline = time.monotonic() + ALONE_RESUME_S
            while self.membership.is_alone and time.monotonic() < deadline and not self.stopping.is_set():
                await asyncio.sleep(_TICK_S)  # polls the membership, which the tick loop changes
            if self.stopping.is_set():
                return
            if self.membership.is_alone:
                _log.warning(
                    "no seed answered within %g s: resuming the jobs of %s as a cluster of one",
                    ALONE_RESUME_S,
                    self.config.snapshot_directory,
                )
        resumed = await asyncio.to_thread(self.service.recover_offloaded_jobs)
        if resumed:
            _log.info("resumed %d job(s) from %s", resumed, self.config.snapshot_directory)

    def _close_engine(self) -> None:
        if self.transport is not None:
            self.transport.close()
        if self.service is not None:
            self.service.close()
        self.instance.shutdown()


_UNREACHABLE: set[str] = set()
"""Members whose last data connection attempt failed (their retries are logged at DEBUG)."""


def _log_connect_failure(peer: str) -> Callable[[concurrent.futures.Future[None]], None]:
    def report(future: concurrent.futures.Future[None]) -> None:
        error = future.exception()
        if error is None:
            if peer in _UNREACHABLE:
                _UNREACHABLE.discard(peer)
                _log.info("connected to member %s", peer)
        elif peer not in _UNREACHABLE:  # one line per change of state, not one per retry
            _UNREACHABLE.add(peer)
            _log.warning("cannot connect to member %s: %s (retrying quietly)", peer, error)
        else:
            _log.debug("cannot connect to member %s: %s", peer, error)

    return report


def _write_ready_file(path: str, info: membership.MemberInfo) -> None:
    if not path:
        return
    target = pathlib.Path(path)
    aside = target.with_name(target.name + ".tmp")
    record = {
        "name": info.name,
        "pid": os.getpid(),
        "rest_address": info.rest_address,
        "data_address": info.data_address,
        "metrics_address": info.metrics_address,
    }
    aside.write_text(json.dumps(record))
    aside.replace(target)


async def _serve(member: Member) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, member.leave)
    await member.run()


def main(argv: Sequence[str] | None = None) -> int:
    """Run a member until SIGTERM/SIGINT; 0 on a clean stop, 2 on bad settings, 3 if a cluster refused it."""
    args = vars(build_parser().parse_args(argv))
    for name in ("token", "secret", "metrics_token"):
        if args.get(name) is not None:  # as docker login's --password: allowed, with a warning
            flag = "--" + name.replace("_", "-")
            print(
                f"jetlet member: warning: {flag} on the command line is visible to every user of this "
                f"machine (ps); use {flag}-file or JETLET_{name.upper()} instead",
                file=sys.stderr,
            )
    try:
        config = settings.load(args, os.environ)
        token, secret = config.read_token(), config.read_secret()
        config.read_metrics_token()  # an unreadable file is a line here, not a traceback later
        level = member_flags.log_level(config.log_level)
        discovery.for_settings(config, os.environ)  # malformed entries, unresolvable kubernetes settings
        tls.check_files(config.tls_cert_file, config.tls_key_file, config.tls_ca_file)  # a line, no traceback
    except (settings.SettingsError, ValueError) as exc:
        print(f"jetlet member: {exc}", file=sys.stderr)
        return 2
    logs.configure(level, config.log_format == "json", config.name)
    if not token or not secret:
        missing = (
            "a REST token (--token-file or JETLET_TOKEN)"
            if not token
            else "a cluster secret (--secret-file or JETLET_SECRET)"
        )
        print(f"jetlet member: {missing} is required", file=sys.stderr)
        return 2
    busy = member_flags.busy_port(config)
    if busy is not None:
        print(f"jetlet member: {busy}", file=sys.stderr)
        return 2
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        member = Member(config, token, secret)
        asyncio.run(_serve(member))
    except OSError as exc:  # a port taken between the check and the bind, an address not on this host
        _log.debug("the member could not start", exc_info=True)
        print(f"jetlet member: cannot start: {exc} (check --host, --rest-port, --data-port)", file=sys.stderr)
        return 2
    return member.exit_code


if __name__ == "__main__":
    sys.exit(main())
