"""Fixtures for the pipeline source and sink tests: a fresh embedded instance per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import jetlet


@pytest.fixture
def jet() -> Iterator[jetlet.EmbeddedInstance]:
    with jetlet.embedded() as instance:
        yield instance
