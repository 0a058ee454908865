"""Which Python ran a figure: version, executable, and whether it was built with PGO and LTO.

Theory of operation. A CPython built with profile-guided optimisation and link-time optimisation
(``./configure --enable-optimizations --with-lto``) runs this workload 15-20 % faster per event
than one built without, so every figure names its build. :func:`describe` reads this interpreter's
``sysconfig``: ``CONFIG_ARGS`` (the configure command line: ``--enable-optimizations`` is PGO,
``--with-lto`` LTO) and ``PY_CFLAGS`` (a build whose flags carry ``-fprofile-use`` or ``-flto``
counts too; some distributions pass them that way). :func:`describe_executable` asks another
interpreter (a peer's venv) the same, in a subprocess. The member processes of a local cluster run
this interpreter (``sys.executable``), so jetlet's and the plain loop's figures share its build.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import subprocess
import sys
import sysconfig

PGO_FLAGS = ("--enable-optimizations",)
PGO_CFLAGS = ("-fprofile-use",)
LTO_FLAGS = ("--with-lto",)
LTO_CFLAGS = ("-flto",)
TIMEOUT_S = 30.0


@dataclasses.dataclass(frozen=True, slots=True)
class Interpreter:
    """One Python build."""

    implementation: str
    version: str
    executable: str
    config_args: str
    cflags: str

    @property
    def pgo(self) -> bool:
        return _has(self.config_args, PGO_FLAGS) or _has(self.cflags, PGO_CFLAGS)

    @property
    def lto(self) -> bool:
        return _has(self.config_args, LTO_FLAGS) or _has(self.cflags, LTO_CFLAGS)

    @property
    def build(self) -> str:
        """``PGO+LTO``, ``PGO``, ``LTO`` or ``no PGO, no LTO``."""
        chosen = [name for name, on in (("PGO", self.pgo), ("LTO", self.lto)) if on]
        return "+".join(chosen) if chosen else "no PGO, no LTO"

    def line(self) -> str:
        """One line for a report header."""
        return (
            f"{self.implementation} {self.version} ({self.build}) at `{self.executable}`; "
            f"PY_CFLAGS `{self.cflags or '-'}`"
        )


def _has(text: str, flags: tuple[str, ...]) -> bool:
    words = text.replace("'", " ").replace('"', " ").split()
    return any(word == flag or word.startswith(flag + "=") for word in words for flag in flags)


def describe() -> Interpreter:
    """This interpreter."""
    return Interpreter(
        platform.python_implementation(),
        platform.python_version(),
        sys.executable,
        str(sysconfig.get_config_var("CONFIG_ARGS") or ""),
        str(sysconfig.get_config_var("PY_CFLAGS") or ""),
    )


_DESCRIBE = (
    "import json, platform, sys, sysconfig; print(json.dumps([platform.python_implementation(), "
    "platform.python_version(), sys.executable, str(sysconfig.get_config_var('CONFIG_ARGS') or ''), "
    "str(sysconfig.get_config_var('PY_CFLAGS') or '')]))"
)


def describe_executable(executable: str) -> Interpreter:
    """The interpreter at ``executable`` (run once to ask it); raises OSError or ValueError if it cannot."""
    try:
        done = subprocess.run(
            [executable, "-c", _DESCRIBE], capture_output=True, text=True, timeout=TIMEOUT_S, check=True
        )
        fields = json.loads(done.stdout)
    except (subprocess.SubprocessError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot ask {executable} what it is: {exc}") from exc
    return Interpreter(*(str(field) for field in fields))
