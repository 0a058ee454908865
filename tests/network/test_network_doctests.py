"""The examples in the data port's modules (framing, handshake, packets, admission, TLS files) run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "jetlet._network.frames",
    "jetlet._network.handshake",
    "jetlet._network.tasklets",
    "jetlet._cluster.admission",
    "jetlet._cluster.tls",
]


@pytest.mark.parametrize("name", MODULES)
def test_given_a_module_with_examples_when_doctest_runs_them_then_every_one_passes(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
