"""The ``>>>`` examples in ``jetlet.spark``'s docstrings run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

pytestmark = pytest.mark.spark


@pytest.mark.parametrize(
    "module_name",
    ["jetlet.spark.parquet_source", "jetlet.spark.sources", "jetlet.spark.sinks", "jetlet.spark.datasource"],
)
def test_docstring_examples(module_name: str) -> None:
    result = doctest.testmod(importlib.import_module(module_name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module_name} has no examples to run"
    assert result.failed == 0
