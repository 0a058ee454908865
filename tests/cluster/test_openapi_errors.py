"""The served OpenAPI document declares each route's error answers, and the real answers keep to it.

Issue 15 item 8: the document omitted its 404, 409 and 413 answers. Each
route now lists the errors it can give with the ``Error`` schema; the real
answers of a member are checked against the route's declared statuses and
that schema.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from test_rest_and_client import Member, _word_count

ERROR_REF = {"$ref": "#/components/schemas/Error"}


@pytest.fixture
def member() -> Iterator[Member]:
    m = Member(max_body=1 << 16)
    yield m
    m.close()


def _declared(document: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    responses: dict[str, Any] = document["paths"][path][method.lower()]["responses"]
    return responses


def test_every_route_declares_its_error_answers_with_the_error_schema(member: Member) -> None:
    status, document = member.raw("GET", "/openapi.json", None, token="")
    assert status == 200
    cancel = _declared(document, "POST", "/jobs/{job}/cancel")
    assert {"400", "401", "404", "409", "413", "429", "503"} <= cancel.keys()
    assert cancel["404"]["content"]["application/json"]["schema"] == ERROR_REF
    assert {"404", "409"}.isdisjoint(_declared(document, "GET", "/jobs"))
    assert "404" in _declared(document, "GET", "/jobs/{job}") and "409" not in _declared(
        document, "GET", "/jobs/{job}"
    )
    assert "409" in _declared(document, "POST", "/jobs") and "413" in _declared(document, "POST", "/jobs")
    assert "404" in _declared(document, "DELETE", "/snapshots/{name}")
    assert "401" not in _declared(document, "GET", "/health")
    assert document["components"]["schemas"]["Error"]["required"] == ["error"]
    kinds = collections.Counter(
        s for ops in document["paths"].values() for op in ops.values() for s in op["responses"]
    )
    assert kinds["404"] >= 8 and kinds["409"] >= 6 and kinds["413"] >= 8


def test_real_error_answers_are_declared_for_their_route_and_fit_the_schema(member: Member) -> None:
    _, document = member.raw("GET", "/openapi.json", None, token="")
    schema = document["components"]["schemas"]["Error"]
    job = member.client.new_job(_word_count("counts"))
    job.join(30)
    cases = [
        ("GET", "/jobs/{job}", "/jobs/999999", None, 404),
        ("POST", "/jobs/{job}/cancel", "/jobs/999999/cancel", b"{}", 404),
        ("POST", "/jobs/{job}/cancel", f"/jobs/{job.id}/cancel", b"{}", 409),
        ("POST", "/jobs/{job}/suspend", f"/jobs/{job.id}/suspend", b"{}", 409),
        ("POST", "/jobs", "/jobs", b'{"definition": "' + b"A" * (1 << 17) + b'"}', 413),
        ("POST", "/jobs/{job}/join", f"/jobs/{job.id}/join", b'{"timeout": "soon"}', 400),
        ("DELETE", "/snapshots/{name}", "/snapshots/none", None, 404),
    ]
    for method, route, path, body, expected in cases:
        status, answer = member.raw(method, path, body)
        assert status == expected, (method, path, answer)
        assert str(status) in _declared(document, method, route), (
            f"{method} {route} does not declare {status}"
        )
        jsonschema.validate(answer, schema)
