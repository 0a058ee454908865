"""The cluster commands of the ``jetlet`` command line (Hazelcast Jet's ``jet`` command, in Python).

Each ``run_*`` function takes the parsed arguments and returns the exit
status; :func:`add_commands` registers them on the CLI's parser. Exit codes
a script can rely on:

* 0: done;
* 1: the job or the operation failed (the remote traceback is on stderr);
* 2: bad usage or bad input (an unknown job, a file that builds no pipeline);
* 3: the cluster cannot be reached.

The client commands find the cluster with ``-a/--addresses HOST:PORT[,...]``
(or ``JETLET_ADDRESSES``; the first reachable address is used), the REST
token with ``--token``/``--token-file`` (or ``JETLET_TOKEN``) and, for
HTTPS, the CA with ``--ca-file`` (or ``JETLET_CA_FILE``). ``jetlet cluster
start`` prints exactly the flags to use.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import runpy
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from jetlet import client as client_mod
from jetlet import errors, member
from jetlet.config import JobConfig
from jetlet.core.dag import DAG
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline

OK, FAILED, USAGE, UNREACHABLE = 0, 1, 2, 3
ACTIVE = {"NOT_RUNNING", "STARTING", "RUNNING", "SUSPENDED", "SUSPENDED_EXPORTING_SNAPSHOT", "COMPLETING"}


class CommandError(Exception):
    """Ends a command with a message on stderr and an exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _connection_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group("cluster connection")
    group.add_argument(
        "-a",
        "--addresses",
        default=os.environ.get("JETLET_ADDRESSES", ""),
        help="REST addresses HOST:PORT[,HOST:PORT...] of members (env JETLET_ADDRESSES)",
    )
    group.add_argument(
        "--token", default=os.environ.get("JETLET_TOKEN", ""), help="REST token (env JETLET_TOKEN)"
    )
    group.add_argument("--token-file", default="", help="file holding the REST token")
    group.add_argument(
        "--ca-file", default=os.environ.get("JETLET_CA_FILE", ""), help="CA certificate for HTTPS members"
    )
    return options


def add_commands(commands: Any) -> None:
    """Register the cluster commands on the CLI's subparsers."""
    connection = _connection_options()
    member_command = commands.add_parser(
        "member",
        help="run a member process (all flags go to the member; see jetlet member --help)",
        add_help=False,
    )
    member_command.add_argument("member_args", nargs=argparse.REMAINDER)
    member_command.set_defaults(handler=run_member)

    cluster = commands.add_parser(
        "cluster", parents=[connection], help="describe the cluster, or start a local one (cluster start)"
    )
    cluster_commands = cluster.add_subparsers(dest="cluster_command", metavar="start")
    start = cluster_commands.add_parser("start", help="run a local cluster in the foreground until Ctrl-C")
    start.add_argument("--members", type=int, default=3, help="member processes (default 3)")
    start.set_defaults(handler=run_cluster_start)
    cluster.set_defaults(handler=run_cluster)

    submit = commands.add_parser(
        "submit",
        parents=[connection],
        help="submit the pipeline that a Python file builds",
        description=(
            "Runs FILE.py (with sys.argv = [FILE, ARGS...]) and submits the job it builds: the file defines "
            "a function build_pipeline() (or build_dag()) returning a Pipeline or a DAG, or leaves one in a "
            "module variable named pipeline or dag."
        ),
    )
    submit.add_argument("-n", "--name", help="job name (unique among active jobs)")
    submit.add_argument("-s", "--snapshot", help="start from this exported snapshot")
    submit.add_argument("--wait", action="store_true", help="wait for the job to end; exit 1 if it fails")
    submit.add_argument("file", help="the Python file that builds the pipeline")
    submit.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the file")
    submit.set_defaults(handler=run_submit)

    list_jobs = commands.add_parser("list-jobs", parents=[connection], help="list the active jobs")
    list_jobs.add_argument("--all", action="store_true", help="also the jobs that have ended")
    list_jobs.set_defaults(handler=run_list_jobs)

    for operation, text in (
        ("cancel", "cancel a job (it ends FAILED)"),
        ("suspend", "suspend a running job"),
        ("resume", "resume a suspended job"),
        ("restart", "restart a running job's execution"),
    ):
        command = commands.add_parser(operation, parents=[connection], help=text)
        command.add_argument("job", help="job id or name")
        command.set_defaults(handler=run_job_operation, operation=operation)


def run(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command, turning a :class:`CommandError` into its message and status."""
    try:
        return handler(args)
    except CommandError as exc:
        print(f"jetlet: {exc}", file=sys.stderr)
        return exc.status


def run_member(args: argparse.Namespace) -> int:
    return member.main(args.member_args)


def connect(args: argparse.Namespace) -> client_mod.Client:
    """A client of the first reachable member of ``--addresses``."""
    addresses = [a.strip() for a in args.addresses.split(",") if a.strip()]
    if not addresses:
        raise CommandError("no cluster address: give -a HOST:PORT or set JETLET_ADDRESSES", USAGE)
    token = args.token
    if args.token_file:
        try:
            token = pathlib.Path(args.token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise CommandError(f"--token-file: {exc}", USAGE) from exc
    if not token:
        raise CommandError("no REST token: give --token, --token-file or set JETLET_TOKEN", USAGE)
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
    raise CommandError("cannot reach the cluster: " + "; ".join(problems), UNREACHABLE)


def run_cluster(args: argparse.Namespace) -> int:
    view = connect(args).cluster()
    print(f"{'MEMBER':<10}{'REST':<24}{'DATA':<24}PARTITIONS")
    for entry in view.members:
        marker = "  (coordinator)" if entry.is_coordinator else ""
        count = len(view.partitions.get(entry.name, []))
        print(f"{entry.name:<10}{entry.rest_address:<24}{entry.data_address:<24}{count}{marker}")
    summary = f"{len(view.members)} members, member list version {view.version}"
    print(f"\n{summary}, {view.partition_count} partitions")
    return OK


def run_cluster_start(args: argparse.Namespace) -> int:
    if args.members < 1:
        raise CommandError(f"--members must be >= 1, got {args.members}", USAGE)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with local_cluster(args.members) as client:
            token = client.token
            print(f"local cluster of {args.members} members on 127.0.0.1:")
            for address, pid in zip(client.addresses, client.pids, strict=True):
                print(f"  member REST {address}  (pid {pid})")
            print(f"\nuse it with:  -a {','.join(client.addresses)} --token {token}")
            print("stop it with Ctrl-C", flush=True)
            stop.wait()
            print("stopping the members...", flush=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return OK


def _load_definition(path: str, args: Sequence[str]) -> Pipeline | DAG:
    """Run the file and find what it builds (see ``jetlet submit --help``)."""
    if not os.path.isfile(path):
        raise CommandError(f"no such file: {path}", USAGE)
    saved_argv = sys.argv
    sys.argv = [path, *args]
    try:
        namespace = runpy.run_path(path, run_name="__jetlet_submit__")
        for builder in ("build_pipeline", "build_dag"):
            if callable(namespace.get(builder)):
                built = namespace[builder]()
                break
        else:
            built = namespace.get("pipeline", namespace.get("dag"))
    except SystemExit as exc:
        raise CommandError(f"{path} exited ({exc.code}) while building the job", FAILED) from exc
    except Exception as exc:
        import traceback

        trace = "".join(traceback.format_exception(exc))
        raise CommandError(f"{path} failed while building the job:\n{trace}", FAILED) from exc
    finally:
        sys.argv = saved_argv
    if not isinstance(built, Pipeline | DAG):
        raise CommandError(
            f"{path} builds no job: define build_pipeline() returning a Pipeline (or build_dag() returning a "
            "DAG), or a module variable pipeline or dag",
            USAGE,
        )
    return built


def run_submit(args: argparse.Namespace) -> int:
    if args.snapshot:
        raise CommandError(
            "-s/--snapshot: snapshots are not available yet, so no job can start from one", USAGE
        )
    definition = _load_definition(args.file, args.args)
    client = connect(args)
    try:
        job = client.new_job(definition, JobConfig(name=args.name))
    except errors.JetletError as exc:
        raise CommandError(f"the cluster refused the job: {exc}", FAILED) from exc
    print(f"submitted job {job.name} (id {job.id})", flush=True)
    if not args.wait:
        return OK
    try:
        job.join()
    except errors.JobFailedError as exc:
        print(f"job {job.name} failed: {exc}\n{exc.remote_traceback}", file=sys.stderr)
        return FAILED
    print(f"job {job.name} completed")
    return OK


def run_list_jobs(args: argparse.Namespace) -> int:
    jobs = connect(args).get_jobs()
    shown = [j for j in jobs if args.all or j.record_status() in ACTIVE]
    print(f"{'ID':<22}{'STATUS':<14}{'SUBMITTED':<22}NAME")
    for entry in shown:
        submitted = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.submission_time / 1000))
        print(f"{entry.id:<22}{entry.record_status():<14}{submitted:<22}{entry.name}")
    return OK


def run_job_operation(args: argparse.Namespace) -> int:
    client = connect(args)
    job = client.get_job(args.job)
    if job is None:
        raise CommandError(f"no job with id or name {args.job!r}", USAGE)
    try:
        getattr(job, args.operation)()
    except errors.JetletError as exc:
        raise CommandError(f"{args.operation} {job.name}: {exc}", FAILED) from exc
    print(f"job {job.name}: {job.status.value}")
    return OK
