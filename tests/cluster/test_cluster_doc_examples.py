"""The >>> examples in the cluster modules' docstrings run and pass."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "name", ["jetlet._cluster.partition_table", "jetlet._cluster.settings", "jetlet._cluster.rest"]
)
def test_given_a_cluster_module_when_its_examples_run_then_all_pass(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
