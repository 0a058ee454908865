"""Given the user docs and the docstring examples, when they are run, then they work as written."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
MODULES_WITH_EXAMPLES = [
    "jetlet._embedded",
    "jetlet.aggregate",
    "jetlet.batches.column_batch",
    "jetlet.batches.partitioning",
    "jetlet.batches.windows",
    "jetlet.nexmark.batch_source",
    "jetlet.core.dag",
    "jetlet.core.edge",
    "jetlet.core.partitioning",
    "jetlet.core.snapshot_writer",
    "jetlet.core.snapshot_keys",
    "jetlet._cluster.grid_store",
    "jetlet._cluster.member_flags",
    "jetlet._cluster.seed_watch",
    "jetlet.testing",
    "jetlet.core.processors.hash_join",
    "jetlet.core.processors.session",
    "jetlet.core.processors.sort",
    "jetlet.aggregate.operations",
    "jetlet.datamodel",
    "jetlet.observable",
    "jetlet.pipeline.window",
    "jetlet",
    "jetlet.core.traverser",
    "jetlet.progress",
    "jetlet._cluster.logs",
    "jetlet._cluster.job_records",
]


def _blocks() -> list[tuple[str, str]]:
    found = []
    for path in DOC_FILES:
        for index, match in enumerate(PYTHON_BLOCK.finditer(path.read_text(encoding="utf-8"))):
            found.append((f"{path.relative_to(ROOT)}#{index}", match.group(1)))
    return found


def test_docs_have_examples() -> None:
    """Given the docs folder, then it holds runnable Python examples (so the next test checks something)."""
    assert len(_blocks()) >= 2


@pytest.mark.parametrize(("where", "code"), _blocks(), ids=[where for where, _ in _blocks()])
def test_doc_example_runs(where: str, code: str) -> None:
    """Given a ```python block of the docs, when it runs, then it raises nothing (its asserts hold)."""
    exec(compile(code, where, "exec"), {"__name__": f"doc_example_{where}"})


@pytest.mark.parametrize("module_name", MODULES_WITH_EXAMPLES)
def test_docstring_examples(module_name: str) -> None:
    """Given a module with >>> examples, when doctest runs them, then every one passes."""
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module_name} has no examples to run"
    assert result.failed == 0
