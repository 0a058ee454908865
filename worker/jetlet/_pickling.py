"""Pickling any object, fast when it can be: the C pickler first, cloudpickle when that fails.

``pickle.dumps`` (C code) handles every object whose class and functions can be found by name; it
costs about 1.5 µs for a small dataclass. cloudpickle handles the rest (lambdas, closures, classes
defined in a script's ``__main__`` or received by value from another process) but builds a
Python-level pickler per call: about 5.7 µs for the same object. Both write the same protocol, and
``pickle.loads`` reads either. The C pickler refuses what it cannot pickle by reference (a
function or class it cannot find under its name, or finds as a different object) with
``PicklingError``, ``AttributeError`` or ``TypeError``, so falling back then never sends a reference
the other side could resolve to something else.

cloudpickle 3.1.3 writes every code object's file name as ``<dynamic-code>`` (for deterministic
pickles); a user's traceback from a member would then name no file of theirs. Our cloudpickle
writes code objects with :mod:`marshal` instead, which keeps the file name (and every other field,
nested code included); both sides run the same Python, as cloudpickle's code pickles already need.
"""

from __future__ import annotations

import io
import marshal
import pickle
import types
from collections import ChainMap
from typing import Any, ClassVar

import cloudpickle


def _code_from_marshal(data: bytes) -> types.CodeType:
    code: types.CodeType = marshal.loads(data)
    return code


def _reduce_code(code: types.CodeType) -> tuple[Any, tuple[bytes]]:
    return _code_from_marshal, (marshal.dumps(code),)


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]
    """cloudpickle's pickler, but a code object keeps its file name (see the module doc)."""

    # cloudpickle's own maps, not its ChainMap inside ours: the C pickler looks every object's type
    # up here, and a ChainMap in a ChainMap raises and catches a KeyError per miss
    dispatch_table: ClassVar[ChainMap[Any, Any]] = ChainMap(
        {types.CodeType: _reduce_code}, *cloudpickle.Pickler.dispatch_table.maps
    )


def cloudpickle_dumps(value: Any, buffer_callback: Any = None) -> bytes:
    """``value`` pickled by cloudpickle (protocol 5), its functions' code keeping its file names."""
    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=buffer_callback).dump(value)
    return out.getvalue()


def dumps(value: Any, buffers: list[pickle.PickleBuffer] | None = None) -> bytes:
    """``value`` pickled (protocol 5), by the C pickler if it can, else by cloudpickle.

    With a ``buffers`` list, objects that offer out-of-band buffers (numpy arrays, the columns of a
    ``ColumnBatch``) append them to it instead of copying their bytes into the pickle; the reader then
    passes the same buffers, in order, to ``pickle.loads(data, buffers=...)``.
    """
    callback = None if buffers is None else buffers.append
    try:
        return pickle.dumps(value, protocol=5, buffer_callback=callback)
    except (pickle.PicklingError, AttributeError, TypeError):
        if buffers is not None:
            buffers.clear()  # the C pickler may have handed out some before it failed
        return cloudpickle_dumps(value, callback)
