"""The peers' virtualenvs: ``bench/.venvs/<peer>``, made with ``python -m venv`` and filled from PyPI.

Theory of operation: each peer runs in its own virtualenv so that nothing of jetlet's environment
(or of the other peer's) leaks into its measurement. :func:`ensure_venv` creates the venv with the
interpreter running the harness (CPython 3.11), ``pip install``s the pinned :data:`REQUIREMENTS`
and writes a stamp file (``jetlet-peer-stamp.json``) holding the pins and the versions pip
actually installed. A venv whose stamp holds the same pins is reused as it is; any other (no
stamp, different pins, a failed install) is rebuilt from scratch. A failed install raises
:class:`PeerInstallError` carrying pip's own error text, so the harness can report why a peer
did not run instead of skipping it silently.

Run as a script (``python -m bench.nexmark_peers.venvs [peer ...]``) it prepares the venvs and
prints their versions.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

VENVS_DIR = Path(__file__).resolve().parent.parent / ".venvs"
"""Where the peers' virtualenvs live (``bench/.venvs``, ignored by git)."""

STAMP_NAME = "jetlet-peer-stamp.json"

REQUIREMENTS: dict[str, tuple[str, ...]] = {
    # PySpark 4.x runs on Java 17; pandas < 3 (PySpark warns on 3.x); pyarrow for toArrow().
    "pyspark": ("pyspark==4.3.0", "pandas==2.3.3", "pyarrow==21.0.0"),
    "bytewax": ("bytewax==0.21.1",),
    # PyFlink 2.3 (Java 11+, runs on 17) bounds Beam to <= 2.61 for its Python worker; pinned too.
    "pyflink": ("apache-flink==2.3.0", "apache-beam==2.61.0"),
}
"""The pinned packages of each peer (all have CPython 3.11 manylinux x86_64 wheels or are pure)."""

SHARED_VENVS: dict[str, str] = {"pyflink2": "pyflink"}
"""Peers that run in another peer's venv (the same package at another parallelism)."""

REPORTED_PACKAGES: dict[str, tuple[str, ...]] = {
    "pyspark": ("pyspark", "py4j", "pandas", "pyarrow", "numpy"),
    "bytewax": ("bytewax",),
    "pyflink": ("apache-flink", "apache-beam", "pemja", "pandas", "pyarrow"),
}

PIP_TIMEOUT_S = 1800.0


class PeerInstallError(RuntimeError):
    """A peer's virtualenv could not be made; the message holds the failing command's output."""


def venv_dir(peer: str) -> Path:
    """The virtualenv directory of ``peer``."""
    peer = SHARED_VENVS.get(peer, peer)
    if peer not in REQUIREMENTS:
        raise ValueError(f"unknown peer {peer!r}; known: {sorted(REQUIREMENTS)}")
    return VENVS_DIR / peer


def venv_python(peer: str) -> Path:
    """The interpreter of ``peer``'s virtualenv."""
    return venv_dir(peer) / "bin" / "python"


def read_stamp(peer: str) -> dict[str, object] | None:
    """The stamp of ``peer``'s venv (``requirements`` and installed ``versions``), if it is ready."""
    path = venv_dir(peer) / STAMP_NAME
    try:
        stamp = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def _is_ready(peer: str) -> bool:
    stamp = read_stamp(peer)
    return (
        stamp is not None
        and stamp.get("requirements") == list(REQUIREMENTS[peer])
        and venv_python(peer).exists()
    )


def _run(command: list[str], what: str) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise PeerInstallError(f"{what}: timed out after {PIP_TIMEOUT_S:.0f} s") from error
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip()[-4000:]
        raise PeerInstallError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return done.stdout


def _installed_versions(peer: str) -> dict[str, str]:
    listing = _run([str(venv_python(peer)), "-m", "pip", "list", "--format=json"], "pip list")
    versions = {entry["name"].lower(): entry["version"] for entry in json.loads(listing)}
    return {name: versions[name] for name in REPORTED_PACKAGES[peer] if name in versions}


def ensure_venv(peer: str, log: bool = True) -> dict[str, str]:
    """Make ``peer``'s virtualenv unless a ready one exists; its installed versions of note."""
    peer = SHARED_VENVS.get(peer, peer)
    directory = venv_dir(peer)
    if _is_ready(peer):
        stamp = read_stamp(peer) or {}
        versions = stamp.get("versions", {})
        return dict(versions) if isinstance(versions, dict) else {}
    if directory.exists():
        shutil.rmtree(directory)
    started = time.perf_counter()
    if log:
        print(f"[peers] creating {directory} ({sys.version.split()[0]})", flush=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(directory)
    pins = list(REQUIREMENTS[peer])
    if log:
        print(f"[peers] pip install {' '.join(pins)} (this takes minutes)", flush=True)
    pip = [str(venv_python(peer)), "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
    _run([*pip, *pins], f"pip install {' '.join(pins)}")
    versions = _installed_versions(peer)
    stamp = {"requirements": pins, "versions": versions, "python": sys.version.split()[0]}
    (directory / STAMP_NAME).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
    if log:
        print(f"[peers] {peer} ready in {time.perf_counter() - started:.0f} s: {versions}", flush=True)
    return versions


def main(argv: list[str]) -> int:
    """Prepare the named peers' venvs (all by default); exit 1 if any failed."""
    failed = 0
    for peer in argv or list(REQUIREMENTS):
        try:
            print(f"{peer}: {ensure_venv(peer)}", flush=True)
        except PeerInstallError as error:
            print(f"{peer}: NOT INSTALLED: {error}", flush=True)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
