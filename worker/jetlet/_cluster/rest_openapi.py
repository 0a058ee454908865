"""The REST API's OpenAPI 3 document, generated from the route table so that it lists every route.

:func:`document` is given the routes (method, path, summary) and the paths
served without a token; it adds each route's path parameters, its security
and its ``401`` unless public, and the schema of the JSON body of the
``POST`` routes that take one (:data:`BODIES`).
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


def document(routes: Iterable[tuple[str, str, str]], public_paths: Collection[str]) -> dict[str, Any]:
    """The OpenAPI 3 description of ``routes``: ``(method, path, summary)`` each."""
    paths: dict[str, dict[str, Any]] = {}
    for method, path, summary in routes:
        operation: dict[str, Any] = {
            "summary": summary,
            "responses": {
                "200": {"description": "OK"},
                "400": {"description": "Invalid request; names the field"},
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
            operation["responses"]["401"] = {"description": "Missing or wrong bearer token"}
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
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "paths": paths,
    }
