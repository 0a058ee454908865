"""Fixtures for Pipeline API tests: a fresh embedded instance per test, shut down after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import jetlet


@pytest.fixture
def jet() -> Iterator[jetlet.EmbeddedInstance]:
    with jetlet.embedded() as instance:
        yield instance


@pytest.fixture
def jet2() -> Iterator[jetlet.EmbeddedInstance]:
    """An instance with two cooperative threads."""
    with jetlet.embedded(cooperative_thread_count=2) as instance:
        yield instance
