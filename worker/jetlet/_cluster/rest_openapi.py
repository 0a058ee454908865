"""The REST API's OpenAPI 3 document, generated from the route table so that it lists every route.

:func:`document` is given the routes (method, path, summary) and the paths
served without a token; it adds each route's path parameters, its security,
the schema of the JSON body of the ``POST`` routes that take one
(:data:`BODIES`), and the error answers the route can give
(:func:`error_answers`), each a JSON object of the ``Error`` schema:
``400`` for a bad field or parameter; unless public ``401`` (token),
``429`` (too many failed tokens) and ``503`` (a coordinator take-over, with
``Retry-After``); ``404`` for an unknown job or snapshot; ``409`` for an
operation the job's state does not allow; ``413`` for a body too large.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

BODIES: dict[str, dict[str, Any]] = {
    "/jobs": {
        "type": "object",
        "properties": {
            "definition": {"type": "string", "format": "byte", "description": "base64 cloudpickle of a DAG"},
            "entrypoint": {
                "type": "string",
                "description": "package.module:function in the worker image; with source, a function of it",
            },
            "source": {"type": "string", "description": "Python source that defines the entrypoint"},
            "arguments": {"type": "object", "description": "keyword arguments of the entrypoint"},
            "config": {"type": "object"},
        },
        "oneOf": [{"required": ["definition"]}, {"required": ["entrypoint"]}],
    },
    "/jobs/{job}/export-snapshot": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}, "cancel": {"type": "boolean"}},
    },
    "/jobs/{job}/join": {"type": "object", "properties": {"timeout": {"type": "number", "minimum": 0}}},
}


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string", "description": "what went wrong"},
        "code": {"type": "string", "description": "the error's type (jetlet.errors), when typed"},
        "message": {"type": "string"},
        "field": {"type": "string", "description": "the field or parameter at fault"},
        "retry_after_s": {"type": "number", "description": "with 503: when to ask again"},
    },
}
_ERRORS = {
    "400": "Invalid request; field names the field or parameter at fault",
    "401": "Missing or wrong bearer token",
    "403": "A membership message not signed with the cluster secret",
    "404": "No such job or snapshot",
    "409": "The job's state does not allow this operation (or a job of that name is active)",
    "413": "The request body is larger than the member's max_request_bytes",
    "429": "Too many failed authentications from this address; wait Retry-After seconds",
    "503": "The cluster cannot answer now (a coordinator take-over); ask again after Retry-After seconds",
}
_STATEFUL_OPERATIONS = ("cancel", "suspend", "resume", "restart", "export-snapshot")


def error_answers(method: str, path: str, public: bool) -> list[str]:
    """The error statuses that ``method path`` can answer (see the module doc).

    >>> error_answers("POST", "/jobs/{job}/cancel", public=False)
    ['400', '401', '404', '409', '413', '429', '503']
    """
    found = ["400"]
    if not public:
        found += ["401", "429", "503"]
    if "{job}" in path or (method == "DELETE" and path.startswith("/snapshots/")) or path == "/membership":
        found.append("404")
    if path == "/membership":
        found.append("403")
    if method == "POST" and (path == "/jobs" or path.rpartition("/")[2] in _STATEFUL_OPERATIONS):
        found.append("409")
    if method == "POST":
        found.append("413")
    return sorted(found)


def document(routes: Iterable[tuple[str, str, str]], public_paths: Collection[str]) -> dict[str, Any]:
    """The OpenAPI 3 description of ``routes``: ``(method, path, summary)`` each."""
    paths: dict[str, dict[str, Any]] = {}
    for method, path, summary in routes:
        error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
        operation: dict[str, Any] = {
            "summary": summary,
            "responses": {
                "200": {"description": "OK"},
                **{
                    status: {"description": _ERRORS[status], **error}
                    for status in error_answers(method, path, path in public_paths)
                },
            },
        }
        parameters = [
            {"name": part[1:-1], "in": "path", "required": True, "schema": {"type": "string"}}
            for part in path.split("/")
            if part.startswith("{")
        ]
        if parameters:
            operation["parameters"] = parameters
        if path not in public_paths:
            operation["security"] = [{"bearer": []}]
        if path == "/ready":
            operation["responses"] = {
                "200": {"description": "Ready"},
                "503": {"description": "Not ready; missing names what is missing"},
            }
        if method == "POST" and path in BODIES:
            operation["requestBody"] = {"content": {"application/json": {"schema": BODIES[path]}}}
        paths.setdefault(path, {})[method.lower()] = operation
    return {
        "openapi": "3.0.3",
        "info": {"title": "jetlet member REST API", "version": "1"},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": ERROR_SCHEMA},
        },
        "paths": paths,
    }
