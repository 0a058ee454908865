"""Tests of the benchmark scripts' own logic (``bench/``): ``load_bench`` imports one of them by name.

The scripts are not a package: each is loaded from its file, with ``bench/`` on
``sys.path`` for their shared ``_common`` module, and registered in
``sys.modules`` as an import would (dataclasses look a class's module up there).
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from collections.abc import Callable
from types import ModuleType

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"


def _load(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def load_bench() -> Callable[[str], ModuleType]:
    """``load_bench("kube_bench")``: the module of ``bench/kube_bench.py``."""
    return _load
