"""The cluster commands of the ``jetlet`` command line (Hazelcast Jet's ``jet`` command, in Python).

Each ``run_*`` function takes the parsed arguments and returns the exit
status; :func:`add_commands` registers them on the CLI's parser. Exit codes
a script can rely on:

* 0: done;
* 1: the job or the operation failed (the remote traceback is on stderr);
* 2: bad usage or bad input (bad flags, an unknown job, a file that builds
  no pipeline, a token the cluster refuses);
* 3: the cluster cannot be reached (or ``-a`` names no REST API);
* 130: interrupted (Ctrl-C); ``submit --wait`` then asks, on a terminal,
  whether to cancel the job or detach from it (detach: it runs on, and the
  command says how to cancel it); elsewhere it detaches.

``submit --wait`` shows the job's progress on stderr (:mod:`jetlet.progress`):
a line redrawn in place when stderr is a terminal, a plain line every
:data:`PLAIN_PROGRESS_S` seconds otherwise.

Messages go to stderr, results (tables, job ids, statuses) to stdout.

The client commands find the cluster with ``-a/--addresses HOST:PORT[,...]``
(or ``JETLET_CLIENT_ADDRESSES``; the first reachable address is used), the
REST token with ``--token``/``--token-file`` (or ``JETLET_CLIENT_TOKEN``)
and, for HTTPS, the CA with ``--ca-file`` (or ``JETLET_CLIENT_CA_FILE``).
The client's variables have their own prefix: a member reads every other
``JETLET_*`` variable as one of its settings, so the two never collide in
one shell. As in Jet, these
may come before the command (``jetlet -a HOST:PORT list-jobs``) or after it;
after it they win. Because ``-a`` always means the addresses, ``list-jobs``
spells "all jobs" ``--all`` only. ``jetlet cluster start`` prints exactly
the flags (and environment variables) to use, and where the members' logs
are.

``get-list NAME`` and ``get-map NAME`` print a list or a map as JSON (a map
with keys that are not text or numbers as a list of ``[key, value]``
pairs); a value JSON cannot hold (a tuple becomes a list, a named tuple an
object) is printed as its ``repr`` string.

Modules are imported when a command needs them (the member, the pipeline
API), so ``jetlet list-jobs`` starts fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import importlib
import json
import os
import pathlib
import runpy
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from jetlet import client as client_mod
from jetlet import errors, job, records
from jetlet._cluster import member_flags
from jetlet.config import JobConfig, ProcessingGuarantee
from jetlet.local_cluster import LocalCluster

CANCEL_WAIT_S = 10.0
"""How long ``save-snapshot -C`` waits for the job to end after its snapshot before it reports."""

OK, FAILED, USAGE, UNREACHABLE = 0, 1, 2, 3
INTERRUPTED = 130
"""The exit status after Ctrl-C (128 + SIGINT), as shells report it."""
PROGRESS_POLL_S = 1.0
"""How often ``submit --wait`` polls the job's status and metrics to redraw its progress on a terminal."""
PLAIN_PROGRESS_S = 5.0
"""How often it writes a plain progress line when stderr is not a terminal (a pipe, a file, a CI log)."""
ACTIVE = {"NOT_RUNNING", "STARTING", "RUNNING", "SUSPENDED", "SUSPENDED_EXPORTING_SNAPSHOT", "COMPLETING"}
BUILDER_FUNCTIONS = ("build_pipeline", "build_dag", "pipeline")
"""Functions ``jetlet submit`` calls, first found first (``build_pipeline`` is the convention)."""
BUILT_VARIABLES = ("pipeline", "p", "dag")
"""Module variables ``jetlet submit`` takes when the file defines none of the functions."""

SUBMIT_DESCRIPTION = (
    "Runs FILE.py as a script (sys.argv = [FILE, ARGS...], its directory first on sys.path, in a fresh "
    "module namespace) and submits the job it builds. The convention: the file defines "
    "build_pipeline() returning a Pipeline (or a DAG). Also accepted, in this order: a function "
    "build_dag() or pipeline(), or a module variable pipeline, p or dag holding a Pipeline or DAG. "
    "Prints the job id and name. Exit 1 if the file raises (its traceback is on stderr) or, with "
    "--wait, if the job fails; 2 if the file builds no job. "
    "By reference instead of FILE.py: --entrypoint package.module:function (code in the members' image) "
    "or --source FILE --entrypoint function (FILE's text is sent and run by the cluster), called with "
    "the --arg KEY=VALUE arguments (VALUE is parsed as JSON when it parses, else taken as a string); "
    "exit 2 if the cluster refuses the reference (its message names the problem)."
)


class CommandError(Exception):
    """Ends a command with a message on stderr and an exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def add_connection_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """The cluster-selection flags; with ``defaults`` they take the environment's values.

    The top-level parser has the defaults; each command's copy suppresses
    them, so a flag given after the command overrides one given before it.
    """

    def default(variable: str) -> str:
        return os.environ.get(variable, "") if defaults else argparse.SUPPRESS

    group = parser.add_argument_group("cluster connection")
    group.add_argument(
        "-a",
        "--addresses",
        default=default("JETLET_CLIENT_ADDRESSES"),
        help="REST addresses HOST:PORT[,HOST:PORT...] of members; the first reachable one is used "
        "(env JETLET_CLIENT_ADDRESSES)",
    )
    group.add_argument(
        "--token", default=default("JETLET_CLIENT_TOKEN"), help="REST token (env JETLET_CLIENT_TOKEN)"
    )
    group.add_argument(
        "--token-file", default="" if defaults else argparse.SUPPRESS, help="file holding the REST token"
    )
    group.add_argument(
        "--ca-file",
        default=default("JETLET_CLIENT_CA_FILE"),
        help="CA certificate (PEM) of HTTPS members (env JETLET_CLIENT_CA_FILE)",
    )


def _connection_parent() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    add_connection_options(parent, defaults=False)
    return parent


def add_commands(commands: Any) -> None:
    """Register the cluster commands on the CLI's subparsers."""
    connection = _connection_parent()
    member_command = commands.add_parser(
        "member",
        help="run a member process (all flags go to the member; see jetlet member --help)",
        add_help=False,
    )
    member_command.add_argument("member_args", nargs=argparse.REMAINDER)
    member_command.set_defaults(handler=run_member)

    cluster = commands.add_parser(
        "cluster",
        parents=[connection],
        help="describe the cluster, or start a local one (cluster start)",
        description="Without a subcommand: the members (name, REST and data address, coordinator) and "
        "how many partitions each owns.",
    )
    cluster_commands = cluster.add_subparsers(dest="cluster_command", metavar="start")
    start = cluster_commands.add_parser(
        "start",
        help="run a local cluster in the foreground until Ctrl-C",
        description="Starts N member processes on 127.0.0.1, prints their REST addresses, the "
        "-a/--token flags (and JETLET_CLIENT_* variables) clients need and where each member logs, "
        "reports a member that exits, and runs until Ctrl-C or SIGTERM, then stops every member. "
        "The logs are kept after the stop.",
    )
    start.add_argument("--members", type=int, default=3, help="member processes (default 3)")
    start.add_argument(
        "--log-dir",
        default="",
        metavar="DIR",
        help="keep the members' logs here as m1.log, m2.log... (default: a new temporary directory)",
    )
    start.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="also print the members' log lines here, each prefixed with its member's name",
    )
    start.add_argument(
        "--rest-port",
        type=int,
        default=0,
        metavar="PORT",
        help="REST port of the first member; the others take the next ones (default 0: any free port)",
    )
    start.add_argument(
        "--data-port",
        type=int,
        default=0,
        metavar="PORT",
        help="data port of the first member; the others take the next ones (default 0: any free port)",
    )
    start.add_argument(
        "--log-level", default="INFO", metavar="LEVEL", help="the members' log level (default INFO)"
    )
    start.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="the members' log format: text, or json (one object per line, for log collectors)",
    )
    start.add_argument(
        "--snapshot-directory",
        default="",
        metavar="DIR",
        help="the members' --snapshot-directory: a cluster started with it resumes its jobs (default: none)",
    )
    start.set_defaults(handler=run_cluster_start)
    cluster.set_defaults(handler=run_cluster)

    submit = commands.add_parser(
        "submit",
        parents=[connection],
        help="submit the pipeline that a Python file builds",
        description=SUBMIT_DESCRIPTION,
    )
    submit.add_argument("-n", "--name", help="job name (unique among active jobs)")
    submit.add_argument(
        "-s", "--snapshot", help="start from this exported snapshot (JobConfig.initial_snapshot_name)"
    )
    submit.add_argument(
        "-g",
        "--processing-guarantee",
        choices=[g.value for g in ProcessingGuarantee],
        default=ProcessingGuarantee.NONE.value,
        help="snapshots and what they promise after a failure (default NONE: no snapshots)",
    )
    submit.add_argument(
        "--snapshot-interval-millis",
        type=int,
        default=JobConfig.snapshot_interval_millis,
        metavar="MILLIS",
        help=f"time between snapshots (default {JobConfig.snapshot_interval_millis})",
    )
    submit.add_argument(
        "--wait",
        action="store_true",
        help="wait for the job to end, showing its progress on stderr; exit 1 if it fails; "
        "Ctrl-C asks whether to cancel the job or detach (detach without a terminal)",
    )
    submit.add_argument(
        "--entrypoint",
        metavar="MODULE:FUNCTION",
        help="submit by reference: package.module:function in the members' image (with --source: a "
        "function of that file) that returns a Pipeline or a DAG; no FILE.py",
    )
    submit.add_argument(
        "--source", metavar="FILE", help="with --entrypoint FUNCTION: Python source the cluster runs"
    )
    submit.add_argument(
        "--arg",
        dest="arguments",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a keyword argument of the entrypoint (VALUE as JSON when it parses, else a string); repeatable",
    )
    submit.add_argument("file", metavar="FILE.py", nargs="?", help="the Python file that builds the pipeline")
    submit.add_argument("args", metavar="ARGS", nargs=argparse.REMAINDER, help="arguments for the file")
    submit.set_defaults(handler=run_submit)

    list_jobs = commands.add_parser(
        "list-jobs",
        parents=[connection],
        help="list the active jobs (--all: every job)",
        description="A table ID, STATUS, SUBMISSION TIME, NAME of the active jobs, oldest first. "
        "(-a is the addresses, as everywhere; all jobs is --all.)",
    )
    list_jobs.add_argument("--all", action="store_true", help="also the jobs that have ended")
    list_jobs.set_defaults(handler=run_list_jobs)

    describe = commands.add_parser(
        "job",
        parents=[connection],
        help="show one job: status, failure, times, restarts, last snapshot, metrics",
        description="Everything the cluster knows of one job: its status (CANCELLED apart from FAILED), "
        "the failure with the user's traceback, submission and completion times, restarts, the last "
        "snapshot and a summary of its metrics. Exit 2 for an unknown job.",
    )
    describe.add_argument("job", metavar="JOB", help="job id (as list-jobs shows it) or name")
    describe.set_defaults(handler=run_describe_job)

    for operation, text in (
        ("cancel", "cancel a job (it ends FAILED, as in Jet)"),
        ("suspend", "suspend a running job"),
        ("resume", "resume a suspended job"),
        ("restart", "restart a running job's execution"),
    ):
        command = commands.add_parser(
            operation,
            parents=[connection],
            help=text,
            description=f"{text[0].upper()}{text[1:]}; prints the job's new status. Exit 1 if the "
            "cluster refuses (e.g. the job has ended), 2 for an unknown job.",
        )
        command.add_argument("job", metavar="JOB", help="job id (as list-jobs shows it) or name")
        command.set_defaults(handler=run_job_operation, operation=operation)

    for kind, shape in (("list", "a JSON array"), ("map", "a JSON object (or [key, value] pairs)")):
        getter = commands.add_parser(
            f"get-{kind}",
            parents=[connection],
            help=f"print the named {kind} as JSON (e.g. a job's results)",
            description=f"Print the cluster's {kind} NAME as {shape}; a value JSON cannot hold is "
            f"printed as its repr string. An unknown {kind} is empty.",
        )
        getter.add_argument("name", metavar="NAME", help=f"the {kind}'s name (as in Sinks.{kind}(NAME))")
        getter.set_defaults(handler=run_get, kind=kind)

    save = commands.add_parser(
        "save-snapshot",
        parents=[connection],
        help="export a job's state as a named snapshot",
        description="Take a snapshot of a running job (or use a suspended job's last one) and keep it "
        "under NAME, replacing a snapshot of that name; start jobs from it with submit -s NAME. "
        "Exit 1 if the cluster refuses, 2 for an unknown job.",
    )
    save.add_argument("-C", "--cancel", action="store_true", help="cancel the job after the snapshot")
    save.add_argument("job", metavar="JOB", help="job id (as list-jobs shows it) or name")
    save.add_argument("name", metavar="NAME", help="the snapshot's name")
    save.set_defaults(handler=run_save_snapshot)

    list_snapshots = commands.add_parser(
        "list-snapshots",
        parents=[connection],
        help="list the exported snapshots",
        description="A table NAME, TIME, SIZE, ENTRIES, JOB of the exported snapshots, oldest first.",
    )
    list_snapshots.set_defaults(handler=run_list_snapshots)

    delete = commands.add_parser(
        "delete-snapshot",
        parents=[connection],
        help="delete an exported snapshot",
        description="Delete the exported snapshot NAME. Exit 2 if there is none of that name.",
    )
    delete.add_argument("name", metavar="NAME", help="the snapshot's name")
    delete.set_defaults(handler=run_delete_snapshot)


def run(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command, turning a :class:`CommandError` into its message and status."""
    try:
        return handler(args)
    except CommandError as exc:
        print(f"jetlet: {exc}", file=sys.stderr)
        return exc.status


def run_member(args: argparse.Namespace) -> int:
    from jetlet import member  # the member's modules (aiohttp, the coordinator) only when one runs

    return member.main(args.member_args)


def _token(args: argparse.Namespace) -> str:
    if args.token_file:
        try:
            return pathlib.Path(args.token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise CommandError(f"--token-file: {exc}", USAGE) from exc
    token: str = args.token
    if not token:
        raise CommandError("no REST token: give --token, --token-file or set JETLET_CLIENT_TOKEN", USAGE)
    return token


def connect(args: argparse.Namespace) -> client_mod.Client:
    """A client of the first reachable member of ``--addresses``."""
    addresses = [a.strip() for a in args.addresses.split(",") if a.strip()]
    if not addresses:
        raise CommandError("no cluster address: give -a HOST:PORT or set JETLET_CLIENT_ADDRESSES", USAGE)
    token = _token(args)
    problems = []
    for address in addresses:
        try:
            return client_mod.connect(address, token, ca_file=args.ca_file)
        except ValueError as exc:
            raise CommandError(f"--addresses: {exc}", USAGE) from exc
        except client_mod.RequestRefusedError as exc:
            raise CommandError(f"{address} refused the connection: {exc}", USAGE) from exc
        except errors.JetletError as exc:
            problems.append(str(exc))
        except (http.client.HTTPException, ConnectionError) as exc:
            raise CommandError(_not_rest(address, exc), USAGE) from exc
    raise CommandError("cannot reach the cluster: " + "; ".join(problems), UNREACHABLE)


def _not_rest(address: str, exc: Exception) -> str:
    return (
        f"--addresses {address} does not answer as a jetlet REST API ({type(exc).__name__}): "
        "give the member's REST port (jetlet cluster lists it), not its data port"
    )


@contextmanager
def _cluster_errors() -> Iterator[None]:
    """A member that stops answering mid-command is unreachable (3); a refusal is a failure (1)."""
    try:
        yield
    except client_mod.RequestRefusedError as exc:
        raise CommandError(str(exc), FAILED) from exc
    except errors.JetletError as exc:
        raise CommandError(f"cannot reach the cluster: {exc}", UNREACHABLE) from exc
    except (http.client.HTTPException, ConnectionError) as exc:
        raise CommandError(f"cannot reach the cluster: {type(exc).__name__}: {exc}", UNREACHABLE) from exc


def run_cluster(args: argparse.Namespace) -> int:
    client = connect(args)
    with _cluster_errors():
        view = client.cluster()
    print(f"{'MEMBER':<10}{'REST ADDRESS':<24}{'DATA ADDRESS':<24}PARTITIONS")
    for entry in view.members:
        marker = "  (coordinator)" if entry.is_coordinator else ""
        count = len(view.partitions.get(entry.name, []))
        print(f"{entry.name:<10}{entry.rest_address:<24}{entry.data_address:<24}{count}{marker}")
    summary = f"{len(view.members)} members, member list version {view.version}"
    print(f"\n{summary}, {view.partition_count} partitions, coordinator {view.coordinator}")
    return OK


def run_cluster_start(args: argparse.Namespace) -> int:
    if args.members < 1:
        raise CommandError(f"--members must be >= 1, got {args.members}", USAGE)
    try:
        member_flags.log_level(args.log_level)
    except ValueError as exc:
        raise CommandError(str(exc), USAGE) from exc
    log_dir = pathlib.Path(args.log_dir or tempfile.mkdtemp(prefix="jetlet-cluster-logs-"))
    member_args = ["--log-level", args.log_level, "--log-format", args.log_format]
    if args.snapshot_directory:
        member_args += ["--snapshot-directory", args.snapshot_directory]
    cluster = LocalCluster(
        args.members, member_args, log_dir=log_dir, rest_port=args.rest_port, data_port=args.data_port
    )
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            client = cluster.start()
        except errors.JetletError as exc:
            first = str(exc).splitlines()[0]
            raise CommandError(
                f"the local cluster did not start: {first} (logs in {log_dir})", FAILED
            ) from exc
        try:
            _print_cluster_start(client, cluster)
            status = _watch(cluster, stop, args.follow)
            print("stopping the members...", flush=True)
        finally:
            names, logs = cluster.names, list(cluster.log_paths)
            cluster.stop()
        if args.follow:
            _LogFollower(names, logs).print_new()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"stopped; the members' logs are in {log_dir}", flush=True)
    return status


class _LogFollower:
    """Prints the lines the members' logs gained since the last call, each prefixed ``NAME| ``."""

    def __init__(self, names: list[str], logs: list[pathlib.Path]) -> None:
        self._logs = list(zip(names, logs, strict=True))
        self._offsets: dict[pathlib.Path, int] = {}

    def print_new(self) -> None:
        for name, path in self._logs:
            try:
                with path.open("rb") as log:
                    log.seek(self._offsets.get(path, 0))
                    chunk = log.read()
            except OSError:
                continue
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self._offsets[path] = self._offsets.get(path, 0) + len(complete)
            for line in complete.decode(errors="replace").splitlines():
                print(f"{name}| {line}", flush=True)


def _watch(cluster: LocalCluster, stop: threading.Event, follow: bool) -> int:
    """Until ``stop``: report each member that exits (and, following, print the logs); FAILED if all did."""
    follower = _LogFollower(cluster.names, cluster.log_paths) if follow else None
    reported: set[str] = set()
    while not stop.wait(0.2):
        if follower is not None:
            follower.print_new()
        exited = cluster.exited()
        for name, code in exited.items():
            if name not in reported:
                reported.add(name)
                log = cluster.log_paths[cluster.names.index(name)]
                print(
                    f"jetlet: member {name} exited with {code}; its log: {log}", file=sys.stderr, flush=True
                )
        if len(exited) == len(cluster.names):
            print("jetlet: every member has exited", file=sys.stderr, flush=True)
            return FAILED
    return OK


def _print_cluster_start(client: client_mod.Client, cluster: LocalCluster) -> None:
    addresses = ",".join(client.addresses)
    print(f"local cluster of {len(client.addresses)} members on 127.0.0.1:")
    for name, address, pid, log in zip(
        cluster.names, client.addresses, client.pids, cluster.log_paths, strict=True
    ):
        print(f"  {name}  REST {address}  pid {pid}  log {log}")
    print(f"\nuse it with:  -a {addresses} --token={client.token}")  # = : a token may start with -
    print(f"or:  export JETLET_CLIENT_ADDRESSES={addresses} JETLET_CLIENT_TOKEN={client.token}")
    print(f"web console:  http://{client.addresses[0]}/console/ (log in with the token)")
    print("stop it with Ctrl-C", flush=True)


def _built_job(namespace: dict[str, Any]) -> object:
    from jetlet.core.dag import DAG
    from jetlet.pipeline import Pipeline

    for name in BUILDER_FUNCTIONS:
        builder = namespace.get(name)
        if callable(builder) and not isinstance(builder, Pipeline | DAG):
            return builder()
    for name in BUILT_VARIABLES:
        if isinstance(namespace.get(name), Pipeline | DAG):
            return namespace[name]
    return None


def _load_definition(path: str, args: Sequence[str]) -> Any:
    """Run the file as a script and find the Pipeline or DAG it builds (see ``jetlet submit --help``)."""
    from jetlet.core.dag import DAG
    from jetlet.pipeline import Pipeline

    if not os.path.isfile(path):
        raise CommandError(f"no such file: {path}", USAGE)
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        built = _built_job(runpy.run_path(path, run_name="__jetlet_submit__"))
    except SystemExit as exc:
        raise CommandError(f"{path} exited ({exc.code}) while building the job", FAILED) from exc
    except Exception as exc:
        trace = "".join(traceback.format_exception(exc))
        raise CommandError(f"{path} failed while building the job:\n{trace}", FAILED) from exc
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    if not isinstance(built, Pipeline | DAG):
        raise CommandError(
            f"{path} builds no job: define build_pipeline() returning a Pipeline (or a DAG); "
            f"see jetlet submit --help (got {type(built).__name__})",
            USAGE,
        )
    return built


def _reference(args: argparse.Namespace) -> dict[str, Any] | None:
    """``jetlet submit --entrypoint/--source/--arg`` as a request body (None when a FILE.py is given)."""
    if args.entrypoint is None:
        if args.source is not None or args.arguments:
            raise CommandError("--source and --arg go with --entrypoint", USAGE)
        if args.file is None:
            raise CommandError("give FILE.py, or --entrypoint package.module:function", USAGE)
        return None
    if args.file is not None:
        raise CommandError(f"give FILE.py or --entrypoint, not both (got {args.file})", USAGE)
    arguments: dict[str, Any] = {}
    for pair in args.arguments:
        key, equals, text = pair.partition("=")
        if not equals or not key:
            raise CommandError(f"--arg must be KEY=VALUE, got {pair!r}", USAGE)
        if key in arguments:
            raise CommandError(f"--arg {key} is given twice", USAGE)
        try:
            arguments[key] = json.loads(text)
        except ValueError:
            arguments[key] = text
    body: dict[str, Any] = {"entrypoint": args.entrypoint, "arguments": arguments}
    if args.source is not None:
        try:
            body["source"] = pathlib.Path(args.source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"--source: {exc}", USAGE) from exc
    return body


def run_submit(args: argparse.Namespace) -> int:
    if args.wait:
        # loaded before the job exists, so that a Ctrl-C while waiting never lands in an import:
        # one that does leaves CPython exiting by SIGINT (status -2) although it is handled here
        importlib.import_module("jetlet.progress")
    reference = _reference(args)
    client = connect(args)
    definition = _load_definition(args.file, args.args) if reference is None else None
    try:
        job_config = JobConfig(
            name=args.name,
            initial_snapshot_name=args.snapshot,
            processing_guarantee=ProcessingGuarantee(args.processing_guarantee),
            snapshot_interval_millis=args.snapshot_interval_millis,
        )
    except ValueError as exc:
        raise CommandError(str(exc), USAGE) from exc
    try:
        if reference is None:
            submitted = client.new_job(definition, job_config)
        elif "source" in reference:
            submitted = client.submit_source(
                reference["source"], reference["entrypoint"], reference["arguments"], job_config
            )
        else:
            submitted = client.submit_entrypoint(reference["entrypoint"], reference["arguments"], job_config)
    except client_mod.RequestRefusedError as exc:
        bad_reference = exc.status == 400 and exc.field in ("entrypoint", "source", "arguments")
        raise CommandError(f"the cluster refused the job: {exc}", USAGE if bad_reference else FAILED) from exc
    except errors.JetletError as exc:
        raise CommandError(f"the job was not submitted: {exc}", FAILED) from exc
    print(f"submitted job {submitted.name} (id {job.id_to_string(submitted.id)})", flush=True)
    if not args.wait:
        return OK
    return _wait(submitted)


def _wait(submitted: client_mod.RemoteJob) -> int:
    """``submit --wait``: the job's progress on stderr until it ends; Ctrl-C asks: cancel or detach?"""
    try:
        return _follow(submitted)
    except KeyboardInterrupt:
        return _interrupted(submitted)


def _follow(submitted: client_mod.RemoteJob) -> int:
    from jetlet import progress

    tty = sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
    screen = progress.Screen(sys.stderr, submitted.name, tty, shutil.get_terminal_size().columns)
    try:
        try:
            progress.follow(submitted, screen, PROGRESS_POLL_S if tty else PLAIN_PROGRESS_S)
        finally:
            screen.close()
    except errors.JobCancelledError:
        print(f"jetlet: job {submitted.name} was cancelled", file=sys.stderr)
        return FAILED
    except errors.JobFailedError as exc:
        print(f"jetlet: job {submitted.name} failed: {exc}", file=sys.stderr)
        return FAILED
    except client_mod.RequestRefusedError as exc:
        raise CommandError(f"waiting for job {submitted.name}: {exc}", FAILED) from exc
    except errors.JetletError as exc:
        raise CommandError(f"cannot reach the cluster: {exc}", UNREACHABLE) from exc
    print(f"job {submitted.name} completed")
    return OK


def _interrupted(submitted: client_mod.RemoteJob) -> int:
    """Ctrl-C while waiting: on a terminal, ask whether to cancel the job; else (or unanswered) detach."""
    job_id = job.id_to_string(submitted.id)
    answer = ""
    if sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty():
        print(
            f"jetlet: cancel job {submitted.name}, or detach and leave it running? [c]ancel/[D]etach: ",
            end="",
            file=sys.stderr,
            flush=True,
        )
        try:
            answer = sys.stdin.readline().strip().lower()
        except KeyboardInterrupt:  # a second Ctrl-C: detach
            print(file=sys.stderr)
    if answer in ("c", "cancel"):
        with _cluster_errors():
            submitted.cancel()
        print(f"jetlet: job {submitted.name} (id {job_id}) cancelled", file=sys.stderr)
        return INTERRUPTED
    print(
        f"jetlet: stopped waiting; job {submitted.name} (id {job_id}) is still running on the cluster. "
        f"Cancel it with: jetlet cancel {job_id}",
        file=sys.stderr,
    )
    return INTERRUPTED


def _jsonable(value: Any) -> Any:
    """``value`` as JSON can hold it: containers as arrays and objects, anything else as its repr."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple) and hasattr(value, "_asdict"):  # a named tuple: KeyedWindowResult...
        return {k: _jsonable(v) for k, v in value._asdict().items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return [_jsonable(v) for v in _sorted(value)]
    if isinstance(value, dict):
        return _json_map(value)
    return repr(value)


def _sorted(values: Any) -> list[Any]:
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=repr)


def _json_map(mapping: dict[Any, Any]) -> Any:
    """An object if every key is text or a number (as JSON writes them), else ``[key, value]`` pairs."""
    keys = _sorted(mapping)
    if all(isinstance(k, str) for k in keys) or all(
        isinstance(k, int | float) and not isinstance(k, bool) for k in keys
    ):
        return {str(k): _jsonable(mapping[k]) for k in keys}
    return [[_jsonable(k), _jsonable(mapping[k])] for k in keys]


def run_get(args: argparse.Namespace) -> int:
    client = connect(args)
    with _cluster_errors():
        value = client.get_list(args.name) if args.kind == "list" else client.get_map(args.name)
    print(json.dumps(_jsonable(value), indent=2, ensure_ascii=False))
    return OK


def run_list_jobs(args: argparse.Namespace) -> int:
    client = connect(args)
    with _cluster_errors():
        jobs = client.get_jobs()
    shown = [j for j in jobs if args.all or j.record_status() in ACTIVE]
    print(f"{'ID':<21}{'STATUS':<14}{'SUBMISSION TIME':<25}NAME")
    for entry in shown:
        millis = _timestamp(entry.submission_time)
        status = shown_status(entry.last_record)
        print(f"{job.id_to_string(entry.id):<21}{status:<14}{millis:<25}{entry.name}")
    return OK


def shown_status(record: records.JobRecord) -> str:
    """The status a person reads: a cancelled job shows CANCELLED (Jet's state is FAILED)."""
    return "CANCELLED" if record.status is job.JobStatus.FAILED and record.cancelled else record.status.value


def _timestamp(millis: int) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(millis / 1000))
    return f"{stamp}.{millis % 1000:03d}"


def run_describe_job(args: argparse.Namespace) -> int:
    client = connect(args)
    with _cluster_errors():
        found = client.get_job(args.job)
        if found is None:
            raise CommandError(f"no job with id or name {args.job!r}", USAGE)
        record = found.record()
        metrics = found.metrics()
    print(f"job {record.name} ({record.id_string})")
    print(f"  status:      {shown_status(record)}")
    print(f"  submitted:   {_timestamp(record.submission_time)}")
    if record.completion_time is not None:
        print(f"  completed:   {_timestamp(record.completion_time)}")
    print(f"  guarantee:   {record.config.get('processing_guarantee', 'NONE')}")
    print(f"  restarts:    {record.restarts}")
    last = record.last_snapshot
    if last is not None:
        print(
            f"  snapshot:    {last.id} at {_timestamp(last.time)}: {last.entries} entries, "
            f"{last.bytes} bytes, {last.duration_ms} ms ({record.snapshot.get('count', 0)} taken)"
        )
    if record.suspension_cause:
        print(f"  suspended:   {record.suspension_cause}")
    received = sum(v.get("receivedCount", 0) for v in metrics.values() if isinstance(v, dict))
    emitted = sum(v.get("emittedCount", 0) for v in metrics.values() if isinstance(v, dict))
    members = sorted({name.split("/", 1)[0] for name in metrics})
    print(
        f"  metrics:     {received} items received, {emitted} emitted by {len(metrics)} processors "
        f"on {len(members)} member(s)"
    )
    if record.failure:
        print(f"  failure:     {record.failure}")
    if record.failure_traceback.strip():
        print()
        print(record.failure_traceback.rstrip())
    return OK


def run_job_operation(args: argparse.Namespace) -> int:
    client = connect(args)
    with _cluster_errors():
        found = client.get_job(args.job)
    if found is None:
        raise CommandError(f"no job with id or name {args.job!r}", USAGE)
    try:
        getattr(found, args.operation)()
    except client_mod.RequestRefusedError as exc:
        raise CommandError(f"{args.operation} {found.name}: {exc}", FAILED) from exc
    except errors.JetletError as exc:
        raise CommandError(f"{args.operation} {found.name}: {exc}", UNREACHABLE) from exc
    print(f"job {found.name}: {found.record_status()}")
    return OK


def run_save_snapshot(args: argparse.Namespace) -> int:
    client = connect(args)
    with _cluster_errors():
        found = client.get_job(args.job)
    if found is None:
        raise CommandError(f"no job with id or name {args.job!r}", USAGE)
    with _cluster_errors():
        exported = (
            found.cancel_and_export_snapshot(args.name) if args.cancel else found.export_snapshot(args.name)
        )
    print(
        f"snapshot {args.name}: {sum(exported['counts'].values())} entries, {exported['bytes']} bytes "
        f"of job {found.name} (snapshot {exported['id']})"
    )
    if args.cancel:  # the job ends right after the snapshot: say how, once it has
        with suppress(errors.JobCancelledError, errors.JobFailedError, TimeoutError):
            found.join(CANCEL_WAIT_S)
        print(f"job {found.name}: {found.status.value}")
    return OK


def run_list_snapshots(args: argparse.Namespace) -> int:
    client = connect(args)
    with _cluster_errors():
        snapshots = client.list_snapshots()
    print(f"{'NAME':<24}{'TIME':<21}{'SIZE':>12}{'ENTRIES':>10}  JOB")
    for entry in snapshots:
        taken = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(entry["time"] / 1000))
        entries = sum(entry["counts"].values())
        print(f"{entry['name']:<24}{taken:<21}{entry['bytes']:>12}{entries:>10}  {entry['job_name']}")
    return OK


def run_delete_snapshot(args: argparse.Namespace) -> int:
    client = connect(args)
    try:
        client.delete_snapshot(args.name)
    except client_mod.RequestRefusedError as exc:
        raise CommandError(str(exc), USAGE if exc.status == 404 else FAILED) from exc
    except errors.JetletError as exc:
        raise CommandError(f"cannot reach the cluster: {exc}", UNREACHABLE) from exc
    print(f"snapshot {args.name} deleted")
    return OK
