"""Given the operator's modules, then the examples in their docstrings run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["jetlet_operator.settings", "jetlet_operator.conditions", "jetlet_operator.specs"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
