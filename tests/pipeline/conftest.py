"""Fixtures for Pipeline API tests: where the pipelines run.

``jet`` is parametrized: every test that takes it runs twice, on a fresh
embedded instance (one member, in this process) and on a fresh 3-member
local cluster (member processes on loopback, distributed edges over TCP),
and must give the same, independently checked answer on both. ``jet_embedded``
is for the few tests that need this process's objects inside the job.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import jetlet
from jetlet.local_cluster import local_cluster


@pytest.fixture(params=["embedded", "cluster-of-3"])
def jet(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "embedded":
        with jetlet.embedded() as instance:
            yield instance
    else:
        with local_cluster(3) as client:
            yield client


@pytest.fixture
def jet_embedded() -> Iterator[jetlet.EmbeddedInstance]:
    with jetlet.embedded() as instance:
        yield instance


@pytest.fixture
def jet2() -> Iterator[jetlet.EmbeddedInstance]:
    """An instance with two cooperative threads."""
    with jetlet.embedded(cooperative_thread_count=2) as instance:
        yield instance
