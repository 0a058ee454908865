"""A job's definition from the body of ``POST /jobs``: a pickled DAG, or code by reference, planned once.

Theory of operation
-------------------
A job reaches a member in one of three forms, and leaves this module in one:
the cloudpickle of a validated :class:`~jetlet.core.dag.DAG`, which is what
the job service stores in the job record and ships to the members.

* ``{"definition": "<base64>"}``: the cloudpickle of a DAG (what
  ``Client.new_job`` sends: it plans in the user's process) or, from older
  clients, of a ``Pipeline``, which is planned here.
* ``{"entrypoint": "package.module:function", "arguments": {...}}``: code
  already in the worker image. The module is imported, the function called
  with ``**arguments``.
* ``{"source": "<Python source>", "entrypoint": "function", "arguments":
  {...}}``: code carried in a manifest. The source is executed as a fresh
  module with a unique name (``jetlet_source_<hex>``), registered in
  ``sys.modules`` while it runs and while the DAG is pickled, and marked for
  cloudpickle to pickle *by value*: the members unpickle its functions and
  classes without having the source.

The function returns a ``Pipeline`` or a ``DAG``. A Pipeline is recognised
by its ``to_dag()`` method (duck typing: ``_cluster`` never imports the
Pipeline API or the planner) and planned with it. Everything happens before
the job service sees the job, so a bad request registers nothing. Each bad
case raises :class:`~jetlet._cluster.job_service.InvalidJobRequestError`
naming the field at fault (the REST API answers ``400`` with it): neither or
both of ``definition`` and ``entrypoint``; a malformed entrypoint; a module
that is not found; a syntax error in ``source`` (its line number and text);
a missing or non-callable function; ``arguments`` that do not fit the
function's signature; a function (or the import, the source, the planning)
that raises, with its traceback once, jetlet's own frames left out; a
result that is neither a Pipeline nor a DAG (named); a DAG that does not
validate or cannot be pickled.

Resolving code runs it in the member process that received the request, on
the REST API's thread pool; the entrypoint's module must be importable on
every member (the same image), since its functions travel by reference.

>>> import cloudpickle
>>> dag = cloudpickle.loads(definition_from_request({
...     "source": "from jetlet.core import DAG, processors\\n"
...               "def build(n):\\n"
...               "    dag = DAG()\\n"
...               "    dag.new_vertex('numbers', processors.source_from_iterable(range(n)))\\n"
...               "    return dag\\n",
...     "entrypoint": "build",
...     "arguments": {"n": 3},
... }))
>>> [v.name for v in dag.vertices()]
['numbers']
>>> definition_from_request({"entrypoint": "no_such_module_here:build"})
Traceback (most recent call last):
...
jetlet...Error: entrypoint: module 'no_such_module_here' not found ...
"""

from __future__ import annotations

import base64
import binascii
import importlib
import inspect
import linecache
import os
import sys
import traceback
import types
import uuid
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import cloudpickle

from jetlet import _pickling
from jetlet._cluster import job_service
from jetlet.core import dag as dag_mod

SOURCE_MODULE_PREFIX = "jetlet_source_"
"""Prefix of the unique module name under which a request's ``source`` runs."""

_JETLET_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_VALUE_PREVIEW = 80
_KEYWORD_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def definition_from_request(body: Mapping[str, Any]) -> bytes:
    """The cloudpickle of the validated DAG that a ``POST /jobs`` body defines.

    Raises :class:`~jetlet._cluster.job_service.InvalidJobRequestError` naming
    the field at fault; nothing is registered anywhere before it returns.
    """
    given = {name for name in ("definition", "entrypoint", "source") if name in body}
    if "definition" in given and given & {"entrypoint", "source"}:
        extra = " and ".join(sorted(given - {"definition"}))
        _invalid("definition", f"give either definition or entrypoint, not both (got definition and {extra})")
    if not given:
        _invalid(
            "definition",
            "is required: give definition (a base64 cloudpickle of a DAG), entrypoint "
            '("package.module:function" in the worker image), or source and entrypoint',
        )
    if "definition" in given:
        if "arguments" in body:
            _invalid("arguments", "go with entrypoint only: a pickled definition takes no arguments")
        return _from_pickle(_string(body, "definition"))
    if "entrypoint" not in given:
        _invalid("entrypoint", "is required with source: the name of the function in the source to call")
    entrypoint = _string(body, "entrypoint")
    arguments = _arguments(body.get("arguments", {}))
    if "source" in given:
        return _from_source(_string(body, "source"), entrypoint, arguments)
    return _from_entrypoint(entrypoint, arguments)


def _invalid(field: str, message: str) -> NoReturn:
    raise job_service.InvalidJobRequestError(field, message)


def _string(body: Mapping[str, Any], field: str) -> str:
    value = body[field]
    if not isinstance(value, str):
        _invalid(field, f"must be a string, got {type(value).__name__}")
    if not value.strip():
        _invalid(field, "must not be empty")
    return value


def _arguments(value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        _invalid(
            "arguments", f"must be an object of the function's keyword arguments, got {type(value).__name__}"
        )
    return dict(value)


def _from_pickle(text: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        _invalid("definition", "must be base64 text")
    try:
        loaded = cloudpickle.loads(raw)
    except Exception as exc:
        _invalid("definition", f"cannot be unpickled: {type(exc).__name__}: {exc}")
    if isinstance(loaded, dag_mod.DAG):
        _validated(loaded, "definition")
        return raw
    if not callable(getattr(loaded, "to_dag", None)):
        _invalid("definition", f"holds {_describe(loaded)}, not a DAG or a Pipeline")
    return _pickled_dag(loaded, "definition", "the definition", None)


def _from_entrypoint(entrypoint: str, arguments: dict[str, Any]) -> bytes:
    module_name, colon, attribute = entrypoint.partition(":")
    if not colon or not module_name.strip() or not attribute.strip() or ":" in attribute:
        _invalid("entrypoint", f'must be "package.module:function", got {entrypoint!r}')
    module_name, attribute = module_name.strip(), attribute.strip()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            _invalid(
                "entrypoint",
                f"module {module_name!r} not found (no module named {exc.name!r} in the worker image)",
            )
        _invalid("entrypoint", f"importing module {module_name!r} raised:\n{_user_traceback(exc)}")
    except SyntaxError as exc:
        _invalid("entrypoint", f"module {module_name!r} has a {_syntax_error(exc)}")
    except Exception as exc:
        _invalid("entrypoint", f"importing module {module_name!r} raised:\n{_user_traceback(exc)}")
    function: object = module
    for part in attribute.split("."):
        if not hasattr(function, part):
            _invalid("entrypoint", f"module {module_name!r} has no function {attribute!r}")
        function = getattr(function, part)
    built = _call(function, entrypoint, arguments)
    return _pickled_dag(built, "entrypoint", entrypoint, None)


def _from_source(source: str, entrypoint: str, arguments: dict[str, Any]) -> bytes:
    name = entrypoint.strip()
    if not name.isidentifier():
        _invalid("entrypoint", f"with source must be the name of a function in it, got {entrypoint!r}")
    module_name = f"{SOURCE_MODULE_PREFIX}{uuid.uuid4().hex}"
    filename = f"<source {module_name}>"
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as exc:
        _invalid("source", f"has a {_syntax_error(exc)}")
    except ValueError as exc:  # e.g. a NUL character
        _invalid("source", f"cannot be compiled: {exc}")
    module = types.ModuleType(module_name)
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    sys.modules[module_name] = module
    try:
        try:
            exec(code, module.__dict__)
        except Exception as exc:
            _invalid("source", f"raised while it ran:\n{_user_traceback(exc)}")
        if name not in module.__dict__:
            defined = sorted(
                k for k, v in module.__dict__.items() if inspect.isfunction(v) and not k.startswith("_")
            )
            _invalid("entrypoint", f"the source defines no function {name!r} (it defines: {defined})")
        built = _call(module.__dict__[name], name, arguments)
        return _pickled_dag(built, "entrypoint", name, module)
    finally:
        del sys.modules[module_name]
        linecache.cache.pop(filename, None)


def _call(function: object, name: str, arguments: dict[str, Any]) -> object:
    if not callable(function):
        _invalid("entrypoint", f"{name} is not a function: it is {_describe(function)}")
    _check_arguments(function, name, arguments)
    try:
        return function(**arguments)
    except Exception as exc:
        _invalid("entrypoint", f"{name} raised:\n{_user_traceback(exc)}")


def _check_arguments(function: Callable[..., Any], name: str, arguments: dict[str, Any]) -> None:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # some callables have none to read: let the call decide
        return
    parameters = signature.parameters.values()
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        accepted = {p.name for p in parameters if p.kind in _KEYWORD_KINDS}
        unknown = sorted(set(arguments) - accepted)
        if unknown:
            _invalid("arguments", f"{name}{signature} takes no argument {', '.join(map(repr, unknown))}")
    try:
        signature.bind(**arguments)
    except TypeError as exc:
        _invalid("arguments", f"do not fit {name}{signature}: {exc}")


def _pickled_dag(built: object, field: str, what: str, by_value: types.ModuleType | None) -> bytes:
    """Plan ``built`` (a DAG, or anything with ``to_dag()``), validate it and cloudpickle it."""
    if isinstance(built, dag_mod.DAG):
        dag = built
    else:
        to_dag = getattr(built, "to_dag", None)
        if not callable(to_dag):
            _invalid(field, f"{what} returned {_describe(built)}, not a Pipeline or a DAG")
        try:
            dag = to_dag()
        except Exception as exc:
            _invalid(field, f"planning the pipeline of {what} raised:\n{_user_traceback(exc)}")
        if not isinstance(dag, dag_mod.DAG):
            _invalid(field, f"{what}'s to_dag() returned {_describe(dag)}, not a DAG")
    _validated(dag, field)
    if by_value is not None:
        cloudpickle.register_pickle_by_value(by_value)
    try:
        return _pickling.cloudpickle_dumps(dag)
    except Exception as exc:
        _invalid(field, f"the DAG of {what} cannot be pickled: {type(exc).__name__}: {exc}")
    finally:
        if by_value is not None:
            cloudpickle.unregister_pickle_by_value(by_value)


def _validated(dag: dag_mod.DAG, field: str) -> None:
    try:
        dag.validate()
    except dag_mod.DagValidationError as exc:
        _invalid(field, f"the DAG is not valid: {exc}")


def _describe(value: object) -> str:
    kind = type(value)
    text = repr(value)
    if len(text) > _VALUE_PREVIEW:
        text = text[: _VALUE_PREVIEW - 3] + "..."
    return f"a {kind.__module__}.{kind.__qualname__} ({text})"


def _syntax_error(exc: SyntaxError) -> str:
    line = (exc.text or "").rstrip("\n")
    where = f"line {exc.lineno}" if exc.lineno is not None else "an unknown line"
    text = f"syntax error at {where}: {exc.msg}"
    if line.strip():
        text += f"\n    {line.strip()}"
        if exc.offset is not None:
            indent = len(line) - len(line.lstrip())
            text += "\n    " + " " * max(0, exc.offset - 1 - indent) + "^"
    return text


def _is_user_frame(frame: traceback.FrameSummary) -> bool:
    filename = frame.filename
    if filename.startswith("<frozen importlib"):
        return False
    return not os.path.abspath(filename).startswith(_JETLET_ROOT + os.sep) or filename.startswith("<")


def _user_traceback(exc: BaseException) -> str:
    """``exc``'s traceback with jetlet's and importlib's frames left out (all of them if none is left)."""
    error = traceback.TracebackException.from_exception(exc)
    seen: set[int] = set()
    pending: list[traceback.TracebackException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        user = [frame for frame in current.stack if _is_user_frame(frame)]
        if user:
            current.stack = traceback.StackSummary.from_list(user)
        pending += [current.__cause__, current.__context__]
    return "".join(error.format()).rstrip("\n")
