"""The grid's map files: a whole map in one checked file, written atomically, read back whole or not at all.

Durable offload (:mod:`jetlet._cluster.durable`) writes a job's snapshot maps
and record with these: :meth:`jetlet._cluster.grid.Grid.write_map_to_directory`
writes a map of the grid, :func:`write_entries_to_directory` a dictionary,
and :func:`read_map_from_directory` reads either back.

Theory of operation
-------------------
A map's file is :func:`map_file_path` (its name percent-encoded, so any
name is safe, plus :data:`MAP_FILE_SUFFIX`). It is written under a
temporary name, flushed to disk and atomically renamed, and the directory
is flushed too, so a reader sees the old file or the new one, never half of
one. Its layout (big-endian)::

    magic   8 bytes  b"JLTMAP\\r\\n"
    version u16      1
    name    u16      length of the map name in bytes
    count   u64      number of entries
    payload u64      length of the payload in bytes
    crc32   u32      of everything above, the name and the payload
    the map name (UTF-8), then the payload: serialization.dumps([keys, values])

Reading checks every one of these; a missing, truncated, corrupted or
foreign file raises :class:`~jetlet._cluster.snapshot_data.SnapshotDataError`
naming the file (its ``path``) and what is wrong (its ``reason``), never
partial data. Files come from this cluster's own members, so values are
unpickled (user objects are stored as cloudpickles).
"""

from __future__ import annotations

import os
import struct
import urllib.parse
import uuid
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jetlet._cluster import grid_store, snapshot_data
from jetlet._network import serialization

MAP_FILE_SUFFIX = ".jlmap"


def _unusable(path: Path, reason: str) -> snapshot_data.SnapshotDataError:
    return snapshot_data.SnapshotDataError(f"map file {path} is unusable: {reason}", path, reason)


def write_entries_to_directory(map_name: str, entries: Mapping[Any, Any], directory: Path | str) -> Path:
    """Write ``entries`` as the map file of ``map_name`` in ``directory`` (created if missing)."""
    path = map_file_path(directory, grid_store.checked_map_name(map_name))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_map_file(path, map_name, {key: serialization.dumps(value) for key, value in entries.items()})
    return path


_MAGIC = b"JLTMAP\r\n"
_VERSION = 1
_FIELDS = struct.Struct(">8sHHQQ")
_CRC = struct.Struct(">I")
_HEADER_SIZE = _FIELDS.size + _CRC.size


def map_file_path(directory: Path | str, map_name: str) -> Path:
    """The file that holds ``map_name`` in ``directory`` (the name percent-encoded, so any name is safe)."""
    return Path(directory) / (
        urllib.parse.quote(grid_store.checked_map_name(map_name), safe="") + MAP_FILE_SUFFIX
    )


def write_map_file(path: Path, map_name: str, entries: Mapping[Any, bytes]) -> None:
    """Write ``entries`` (values already serialized) as the map file ``path`` of ``map_name``, atomically."""
    name = map_name.encode()
    payload = serialization.dumps([list(entries), list(entries.values())])
    fields = _FIELDS.pack(_MAGIC, _VERSION, len(name), len(entries), len(payload))
    crc = zlib.crc32(payload, zlib.crc32(name, zlib.crc32(fields)))
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "wb") as file:
            file.write(fields + _CRC.pack(crc) + name)
            file.write(payload)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # makes the rename itself durable
    finally:
        os.close(directory)


def read_map_from_directory(directory: Path | str, map_name: str) -> dict[Any, Any]:
    """The entries of ``map_name`` as :meth:`~jetlet._cluster.grid.Grid.write_map_to_directory` or
    :func:`write_entries_to_directory` wrote them to ``directory``.

    Raises :class:`~jetlet._cluster.snapshot_data.SnapshotDataError` if the file is missing, truncated,
    corrupted or holds another map.
    """
    path = map_file_path(directory, map_name)
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise _unusable(path, "the file does not exist") from exc
    except OSError as exc:
        raise _unusable(path, f"the file cannot be read: {exc}") from exc
    return _decode_map_file(path, data, map_name)


def _decode_map_file(path: Path, data: bytes, map_name: str) -> dict[Any, Any]:
    if len(data) < _HEADER_SIZE:
        raise _unusable(path, f"truncated: {len(data)} bytes, less than the {_HEADER_SIZE}-byte header")
    magic, version, name_size, count, payload_size = _FIELDS.unpack_from(data)
    if magic != _MAGIC:
        raise _unusable(path, f"not a jetlet map file (magic {magic!r}, expected {_MAGIC!r})")
    if version != _VERSION:
        raise _unusable(path, f"format version {version} is not supported (only {_VERSION})")
    expected = _HEADER_SIZE + name_size + payload_size
    if len(data) < expected:
        raise _unusable(path, f"truncated: {len(data)} bytes where the header announces {expected}")
    if len(data) > expected:
        raise _unusable(path, f"{len(data) - expected} bytes follow the announced end of the file")
    (stored,) = _CRC.unpack_from(data, _FIELDS.size)
    computed = zlib.crc32(data[_HEADER_SIZE:], zlib.crc32(data[: _FIELDS.size]))
    if stored != computed:
        raise _unusable(path, f"CRC32 mismatch: stored {stored:08x}, computed {computed:08x}")
    name = data[_HEADER_SIZE : _HEADER_SIZE + name_size].decode(errors="replace")
    if name != map_name:
        raise _unusable(path, f"the file holds map {name!r}, not {map_name!r}")
    try:
        keys, values = serialization.loads(data[_HEADER_SIZE + name_size :])
        entries = {key: serialization.loads(value) for key, value in zip(keys, values, strict=True)}
    except (serialization.SerializationError, TypeError, ValueError) as exc:
        raise _unusable(path, f"the entries cannot be decoded: {exc}") from exc
    if len(entries) != count:
        raise _unusable(path, f"{len(entries)} distinct entries where the header announces {count}")
    return entries
