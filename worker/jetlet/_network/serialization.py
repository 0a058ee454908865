"""Items to bytes and back: msgpack for speed, exact round trips, pickles only when allowed.

``dumps(obj)`` writes msgpack. The types msgpack carries natively (``None``,
``bool``, ``int`` within 64 bits, ``float``, ``str``, ``bytes``, ``list`` and
``dict``) are packed by msgpack's C code with no Python call per item. The
packer runs with ``strict_types`` so that a subclass (a named tuple, an
``IntEnum``, a ``defaultdict``) is never silently flattened into its base
type; everything msgpack does not take reaches :func:`_default`, which maps
it to an extension type:

======================  ====================================================
ext code                content
======================  ====================================================
``TUPLE``               the tuple's elements, packed as an array
``TUPLE_ROWS``          a whole list of tuples, column by column (the fast
                        path for a batch of ``(key, value)`` pairs, see below)
``SET``/``FROZENSET``   the elements, packed as an array
``BIG_INT``             two's complement big-endian bytes of an int beyond 64
                        bits
``DATETIME``/``DATE``   ISO 8601 text (naive, or with a plain UTC offset)
``TIME``                ISO 8601 text
``TIMEDELTA``           ``[days, seconds, microseconds]``
``PICKLE``              a pickle of anything else (user classes, functions):
                        the C pickler's, or cloudpickle's where it fails
                        (:mod:`jetlet._pickling`)
======================  ====================================================

``loads(data, allow_pickle=...)`` reverses it with an ``ext_hook``; with
``allow_pickle=False`` (anything from a peer that has not proved it holds the
cluster secret) a ``PICKLE`` extension raises :class:`SerializationError`
before a single byte of it is unpickled. Corrupt input raises
:class:`SerializationError` too, never a bare msgpack exception.

Fast path. A batch is usually a list; when every element of a top-level list
is a plain tuple, :func:`dumps` packs it as one ``TUPLE_ROWS`` extension. Rows
of one width are transposed into columns (``zip(*rows)``, C code); a column
whose values are all tuples (``(timestamp, (key, value))``) is itself encoded
as rows, recursively, and every other column is a plain array that msgpack
packs natively. Rows of differing widths are sent as their lengths and the
flattened elements. :func:`loads` rebuilds rows with ``zip`` over the
columns, so neither side makes a Python call per row.

One exception to exactness: msgpack's C packer takes ``bytearray`` and
``memoryview`` as binary data, so they arrive as ``bytes``.

Nested extension values are packed by packers taken from a
small free list, so no packer is ever re-entered and no call builds a new
one; the free list is safe to share between threads because ``list.pop`` and
``list.append`` are atomic.
"""

from __future__ import annotations

import datetime as dt
import enum
import itertools
from collections.abc import Callable
from typing import Any

import cloudpickle
import msgpack

from jetlet import _pickling


class SerializationError(ValueError):
    """Bytes that cannot be decoded (corrupt, or a refused pickle), or an object that cannot be encoded."""


class ExtCode(enum.IntEnum):
    """msgpack extension type codes used by jetlet (stable: they are part of the wire format)."""

    TUPLE = 1
    TUPLE_ROWS = 2
    SET = 3
    FROZENSET = 4
    BIG_INT = 5
    DATETIME = 6
    DATE = 7
    TIME = 8
    TIMEDELTA = 9
    PICKLE = 127


_PACKER_POOL: list[msgpack.Packer] = []


def _pack(obj: Any) -> bytes:
    packer = _PACKER_POOL.pop() if _PACKER_POOL else _new_packer()
    packed: bytes = packer.pack(obj)
    _PACKER_POOL.append(packer)
    return packed


def _new_packer() -> msgpack.Packer:
    return msgpack.Packer(default=_default, strict_types=True, use_bin_type=True, datetime=False)


def _ext(code: ExtCode, obj: Any) -> msgpack.ExtType:
    return msgpack.ExtType(code, _pack(obj))


def _is_plain_timezone(tzinfo: dt.tzinfo | None) -> bool:
    """True when ISO text restores ``tzinfo`` exactly: none, or a ``timezone`` without a custom name."""
    if tzinfo is None:
        return True
    return type(tzinfo) is dt.timezone and tzinfo == dt.timezone(tzinfo.utcoffset(None))


def _encode_datetime(value: Any) -> msgpack.ExtType | None:
    kind = type(value)
    if kind is dt.datetime and not value.fold and _is_plain_timezone(value.tzinfo):
        return msgpack.ExtType(ExtCode.DATETIME, value.isoformat().encode())
    if kind is dt.date:
        return msgpack.ExtType(ExtCode.DATE, value.isoformat().encode())
    if kind is dt.time and not value.fold and _is_plain_timezone(value.tzinfo):
        return msgpack.ExtType(ExtCode.TIME, value.isoformat().encode())
    if kind is dt.timedelta:
        return _ext(ExtCode.TIMEDELTA, [value.days, value.seconds, value.microseconds])
    return None


def _default(obj: Any) -> Any:
    """msgpack's hook for every object it does not pack natively (see the module docstring)."""
    kind = type(obj)
    if kind is tuple:
        return _ext(ExtCode.TUPLE, list(obj))
    if kind is int:
        return msgpack.ExtType(ExtCode.BIG_INT, obj.to_bytes(obj.bit_length() // 8 + 1, "big", signed=True))
    if kind is set:
        return _ext(ExtCode.SET, list(obj))
    if kind is frozenset:
        return _ext(ExtCode.FROZENSET, list(obj))
    encoded = _encode_datetime(obj)
    if encoded is not None:
        return encoded
    try:
        return msgpack.ExtType(ExtCode.PICKLE, _pickling.dumps(obj))
    except Exception as exc:
        raise SerializationError(f"cannot serialize {kind.__qualname__} object {obj!r:.200}: {exc}") from exc


def _all_tuples(values: list[Any] | tuple[Any, ...]) -> bool:
    return type(values[0]) is tuple and set(map(type, values)) == {tuple}


def _tuple_rows(rows: list[tuple[Any, ...]] | tuple[tuple[Any, ...], ...]) -> msgpack.ExtType:
    """Rows of one width as columns (a column of tuples is itself rows); otherwise lengths and elements."""
    lengths = list(map(len, rows))
    width = lengths[0]
    if lengths.count(width) != len(lengths):
        return _ext(ExtCode.TUPLE_ROWS, [len(rows), lengths, list(itertools.chain.from_iterable(rows))])
    columns = [
        _tuple_rows(column) if _all_tuples(column) else list(column) for column in zip(*rows, strict=True)
    ]
    return _ext(ExtCode.TUPLE_ROWS, [len(rows), width, columns])


def dumps(obj: Any) -> bytes:
    """Serialize ``obj`` to bytes that :func:`loads` turns back into an equal object of the same types.

    >>> loads(dumps([("a", 1), ("b", 2)]))
    [('a', 1), ('b', 2)]
    """
    try:
        if type(obj) is list and obj and _all_tuples(obj):
            return _pack(_tuple_rows(obj))
        return _pack(obj)
    except SerializationError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise SerializationError(f"cannot serialize {type(obj).__qualname__} object: {exc}") from exc


def _rows_from(fields: Any) -> list[tuple[Any, ...]]:
    count, shape, data = fields
    if isinstance(shape, int):
        if len(data) != shape or any(len(column) != count for column in data):
            raise SerializationError(f"corrupt data: tuple rows are not {count} rows of {shape} columns")
        rows = list(zip(*data, strict=True)) if shape else [()] * count
    else:
        values = iter(data)
        rows = [tuple(itertools.islice(values, length)) for length in shape]
        if next(values, _END) is not _END:
            raise SerializationError("corrupt data: tuple rows longer than their lengths")
    if len(rows) != count:
        raise SerializationError(f"corrupt data: {len(rows)} tuple rows where {count} were announced")
    return rows


_END = object()


def _decode_time(text: bytes) -> dt.time:
    return dt.time.fromisoformat(text.decode())


def _decode_big_int(data: bytes) -> int:
    return int.from_bytes(data, "big", signed=True)


def _refuse_pickle(data: bytes) -> Any:
    raise SerializationError(
        f"refused to unpickle {len(data)} bytes: pickles are accepted only from authenticated members"
    )


_RAW_DECODERS: dict[int, Callable[[bytes], Any]] = {
    ExtCode.BIG_INT: _decode_big_int,
    ExtCode.DATETIME: lambda text: dt.datetime.fromisoformat(text.decode()),
    ExtCode.DATE: lambda text: dt.date.fromisoformat(text.decode()),
    ExtCode.TIME: _decode_time,
}

_PACKED_DECODERS: dict[int, Callable[[Any], Any]] = {
    ExtCode.TUPLE: tuple,
    ExtCode.TUPLE_ROWS: _rows_from,
    ExtCode.SET: set,
    ExtCode.FROZENSET: frozenset,
    ExtCode.TIMEDELTA: lambda parts: dt.timedelta(*parts),
}


def _make_ext_hook(allow_pickle: bool) -> Callable[[int, bytes], Any]:
    unpickle: Callable[[bytes], Any] = cloudpickle.loads if allow_pickle else _refuse_pickle

    def ext_hook(code: int, data: bytes) -> Any:
        packed = _PACKED_DECODERS.get(code)
        if packed is not None:
            return packed(_unpack(data, ext_hook))
        raw = _RAW_DECODERS.get(code)
        if raw is not None:
            return raw(data)
        if code == ExtCode.PICKLE:
            return unpickle(data)
        raise SerializationError(f"corrupt data: unknown extension type {code}")

    return ext_hook


def _unpack(data: bytes | bytearray | memoryview, ext_hook: Callable[[int, bytes], Any]) -> Any:
    return msgpack.unpackb(data, ext_hook=ext_hook, raw=False, strict_map_key=False, use_list=True)


_EXT_HOOK_WITH_PICKLE = _make_ext_hook(allow_pickle=True)
_EXT_HOOK_WITHOUT_PICKLE = _make_ext_hook(allow_pickle=False)


def loads(data: bytes | bytearray | memoryview, allow_pickle: bool = True) -> Any:
    """Deserialize what :func:`dumps` wrote.

    ``allow_pickle=False`` refuses any object that would need unpickling (raises
    :class:`SerializationError` without unpickling it): use it for every byte from a
    peer that has not authenticated. Corrupt data raises :class:`SerializationError`.
    """
    try:
        return _unpack(data, _EXT_HOOK_WITH_PICKLE if allow_pickle else _EXT_HOOK_WITHOUT_PICKLE)
    except SerializationError:
        raise
    except Exception as exc:
        raise SerializationError(f"corrupt data ({len(data)} bytes): {type(exc).__name__}: {exc}") from exc
