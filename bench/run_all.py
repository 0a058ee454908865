"""Run the benchmarks and record the results in ``bench/RESULTS.md``.

Each ``bench/*_bench.py`` (and ``bench/chaos.py``, the chaos suite) exposes
``main(argv) -> str`` returning a Markdown section (and prints it when run
alone). This script imports them in name order (``--only`` picks some) and
calls each ``main`` with the flags given here (``--repeats``); a script
whose ``main()`` takes no arguments runs with its default flags and what it
prints becomes its section.

``RESULTS.md`` is a header, then sections between ``<!-- section:NAME -->``
and ``<!-- /section:NAME -->`` markers, each opened by when, on what machine
(platform, CPU count, Python version), at which git commit and with which
command its numbers were made. A run replaces the sections of the scripts it
ran and keeps every other one (also those other tools write, such as the
NEXMark harness's), so one benchmark can be measured again alone. A
benchmark that fails is recorded with its error and the run goes on; the
exit status is then 1. A benchmark that cannot run on this machine raises
``_common.BenchSkipped``: the reason is printed and its old section kept.
Run: ``python bench/run_all.py [--repeats N] [--only NAME,...] [--output PATH]``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import inspect
import io
import os
import platform
import re
import subprocess
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import _common  # noqa: E402  (the benchmarks' shared module, beside this script)


def _bench_scripts() -> list[Path]:
    return sorted([*BENCH_DIR.glob("*_bench.py"), BENCH_DIR / "chaos.py"])


def _run_script(path: Path, argv: Sequence[str]) -> str:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    # Registered, as an import would: dataclasses (and pickling) look a class's module up there.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    if inspect.signature(module.main).parameters:
        markdown = module.main(list(argv))
        if not isinstance(markdown, str):
            raise TypeError(f"{path.name}: main() returned {type(markdown).__qualname__}, not Markdown text")
        return markdown
    return _run_printing_main(path, module.main)


def _run_printing_main(path: Path, main: Callable[[], object]) -> str:
    """A ``main()`` without arguments: run it with default flags and keep what it prints."""
    printed = io.StringIO()
    saved_argv = sys.argv
    sys.argv = [str(path)]
    try:
        with contextlib.redirect_stdout(printed):
            main()
    finally:
        sys.argv = saved_argv
    return f"## {path.stem}\n\n{printed.getvalue().strip()}\n"


def _git_commit() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=BENCH_DIR,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


HEADER = (
    "# Benchmark results\n\n"
    "Each benchmark compares jetlet with a plain-Python baseline measured in the same run; each section "
    "says when, where and with which command it was measured.\n"
)
_SECTION = re.compile(r"<!-- section:(?P<name>[\w.-]+) -->\n.*?<!-- /section:(?P=name) -->\n", re.DOTALL)


def provenance(command: str) -> str:
    """The line that opens a section: date, machine, commit and the command that measured it."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    return f"_Measured {now} on {machine}, commit {_git_commit()}, with `{command}`._\n"


def wrap_section(name: str, body: str, command: str) -> str:
    """``body`` (a Markdown section starting with its heading) between its markers, with provenance."""
    heading, _, rest = body.strip().partition("\n")
    return (
        f"<!-- section:{name} -->\n{heading}\n\n{provenance(command)}{rest.rstrip()}\n"
        f"<!-- /section:{name} -->\n"
    )


def merge_sections(existing: str, fresh: dict[str, str]) -> str:
    """``existing`` RESULTS.md text with the ``fresh`` wrapped sections put in (replaced or appended)."""
    kept = {m["name"]: m.group(0) for m in _SECTION.finditer(existing)}
    order = list(kept) + [name for name in fresh if name not in kept]
    merged = {**kept, **fresh}
    return HEADER + "\n" + "\n".join(merged[name] for name in order)


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(
        description="Run bench/*_bench.py and write their sections of RESULTS.md"
    )
    parser.add_argument("--repeats", type=int, help="passed on to every benchmark")
    parser.add_argument("--only", help="comma-separated script names to run (e.g. fault_tolerance_bench)")
    parser.add_argument("--output", type=Path, default=BENCH_DIR / "RESULTS.md")
    args = parser.parse_args(list(argv))
    forwarded = ["--repeats", str(args.repeats)] if args.repeats is not None else []
    scripts = _bench_scripts()
    if args.only:
        wanted = {name.strip().removesuffix(".py") for name in args.only.split(",") if name.strip()}
        unknown = sorted(wanted - {script.stem for script in scripts})
        if unknown:
            parser.error(f"--only: no bench/{', '.join(unknown)}.py; there are {[s.stem for s in scripts]}")
        scripts = [script for script in scripts if script.stem in wanted]
    command = " ".join(["python", "bench/run_all.py", *argv])
    fresh: dict[str, str] = {}
    failed = False
    for script in scripts:
        print(f"running {script.name} ...", file=sys.stderr, flush=True)
        try:
            section = _run_script(script, forwarded)
        except _common.BenchSkipped as skipped:
            print(f"{script.name} skipped (its section is kept as it was): {skipped}", flush=True)
            continue
        except Exception:
            failed = True
            section = f"## {script.name}: FAILED\n\n```\n{traceback.format_exc().rstrip()}\n```\n"
        print(section, flush=True)
        fresh[script.stem] = wrap_section(script.stem, section, command)
    existing = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
    args.output.write_text(merge_sections(existing, fresh), encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
