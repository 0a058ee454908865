"""A schemathesis run against the served OpenAPI document: generated requests never get a 5xx.

Issue 15: 2,028 generated REST cases once found 500s (a non-ASCII
Authorization header, deeply nested JSON, bad ``/membership`` bodies). This
runs a few generated cases per route (seeded, so it is the same run every
time) with the token against a one-member local cluster, and asserts no
answer is a server error. ``/membership`` is left out: a generated message
that happens to be well formed would change the member list under the test.
"""

from __future__ import annotations

import collections
import time
from typing import Any

import hypothesis
import schemathesis
from schemathesis.core.result import Ok

from jetlet.local_cluster import local_cluster

EXAMPLES_PER_ROUTE = 4
SKIPPED = frozenset({"/membership"})


def test_generated_requests_to_every_route_never_get_a_server_error() -> None:
    with local_cluster(1) as client:
        base_url = f"http://{client.address}"
        schema = schemathesis.openapi.from_dict(client.request("GET", "/openapi.json"))
        headers = {"Authorization": f"Bearer {client.token}"}
        server_errors: list[str] = []
        calls: list[int] = []
        started = time.monotonic()
        for result in schema.get_all_operations():
            assert isinstance(result, Ok), f"the document has an invalid operation: {result}"
            operation = result.ok()
            if operation.path in SKIPPED:
                continue

            @hypothesis.seed(15)
            @hypothesis.settings(
                max_examples=EXAMPLES_PER_ROUTE,
                deadline=None,
                database=None,
                phases=[hypothesis.Phase.generate],
                suppress_health_check=list(hypothesis.HealthCheck),
            )
            @hypothesis.given(case=operation.as_strategy())
            def call(case: Any) -> None:
                response = case.call(base_url=base_url, headers=headers, timeout=35)
                calls.append(response.status_code)
                if response.status_code >= 500:
                    server_errors.append(f"{case.method} {case.formatted_path}: {response.status_code}")

            call()
        answers = sorted(collections.Counter(calls).items())
        print(f"{len(calls)} generated requests in {time.monotonic() - started:.1f} s, answers {answers}")
    assert len(calls) >= 2 * (len(schema.raw_schema["paths"]) - len(SKIPPED))
    assert not server_errors, server_errors
