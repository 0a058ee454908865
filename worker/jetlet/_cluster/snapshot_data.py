"""Snapshot data: a member's saved state as checked chunks in the grid, and back.

When a member's part of snapshot ``N`` is complete it holds, per vertex, the
``(key, value)`` entries its processors saved. :func:`chunks_of` splits them
by where they must be restored (:mod:`jetlet.core.snapshot_keys`): entries of
ordinary keys by partition, broadcast entries (and every entry of a vertex
that runs as one processor in the whole cluster) together. Each chunk is
pickled and framed as ``magic, version, entry count, CRC-32, length,
payload``, so that a truncated or corrupted chunk is detected when it is
read, never restored from silently.

A value reaches a chunk either frozen (bytes the tasklet or the store
thread pickled, :func:`jetlet.core.snapshot_writer.freeze`) or as a
:class:`~jetlet.core.snapshot_writer.Copied` private copy. Format version 2
keeps the frozen ones as they are and pickles the copies together, a few
hundred per pickle (:data:`LIVE_GROUP`), not one pickle each: for Q4's
10,000 open auctions the store thread's work per snapshot fell from
about 103 to 65 ms in a quiet microbenchmark (``bench/snapshot_store_bench.py``),
and in the member that work competes with the processing thread for the GIL.
A group is one pickle call, which holds the GIL, so groups are kept small.
Version 1 chunks (every value frozen), as older snapshot files on disk
hold, are still read. Damage raises :class:`SnapshotDataError`,
the one error for damaged snapshot data, in the grid or on disk.

In the grid a snapshot is two maps: ``<prefix>/data`` holds partition
chunks under the partition they belong to, keyed ``(vertex, member, partition)``;
``<prefix>/broadcast`` holds the broadcast chunks, which every member reads
whole. :func:`route` turns what a member read back into each local
processor's share.

Before an execution starts from a snapshot the coordinator checks it:
:func:`state_mismatch` names stages that hold state the job does not have,
and once the members restored their shares :func:`incomplete_restore` names
stages whose entries do not add up to what was stored. Broadcast entries are
counted there once (by member 0), but every member reads the whole broadcast
map, so each member also reports what it read (:func:`broadcast_counts`, from
the chunks' headers) and :func:`short_broadcast_reads` names the members that
read less than another did: a read that raced a partition move (a member that
joined, a table installed late) found some chunks missing. Such a member
would restore a window stage's ``next_win`` (or a watermark) as the minimum
over fewer processors than saved it — higher than it should be — and drop
the items of a window as late: a count wrong without a word. The
coordinator starts the execution again instead.
"""

from __future__ import annotations

import pickle
import struct
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jetlet import _pickling, errors
from jetlet.core import snapshot_keys, snapshot_writer

Entries = list[tuple[Any, Any]]

_MAGIC = b"JLSN"
_VERSION = 2
_READABLE_VERSIONS = (1, 2)
_HEADER = struct.Struct(">4sHIII")  # magic, version, entry count, crc32, payload length
LIVE_GROUP = 256
"""Copied values pickled per call by :func:`encode` (a call holds the GIL: 1-2 ms for 256 Q4 states)."""


def _no_pacing(entries: int) -> None:
    """The default ``done`` of :func:`encode` and :func:`chunks_of`: go straight on."""


class SnapshotDataError(errors.JetletError):
    """Snapshot data is missing, truncated, corrupted or does not fit the job.

    Raised for a chunk in the grid (here) and for a map file on disk
    (:mod:`jetlet._cluster.grid_files`); ``path`` names the file (None for a chunk),
    ``reason`` says what is wrong.
    """

    def __init__(self, message: str, path: Path | str | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.path = None if path is None else Path(path)
        self.reason = reason or message


def encode(entries: Entries, done: Callable[[int], None] = _no_pacing) -> bytes:
    """One chunk of entries whose values are frozen bytes or :class:`~jetlet.core.snapshot_writer.Copied`.

    The payload is ``(frozen entries, [pickled group of copied entries, ...])`` behind a header with
    the entry count and checksum (see the module doc). ``done(n)`` is told of the ``n`` frozen
    entries, then of each group of ``n`` copied entries pickled (the store paces itself by it,
    :mod:`jetlet._execution.gil_yield`).
    """
    frozen: Entries = []
    live: Entries = []
    for key, value in entries:
        if type(value) is bytes:
            frozen.append((key, value))
        elif type(value) is snapshot_writer.Copied:
            live.append((key, value.value))
        else:
            raise TypeError(
                f"snapshot entry {key!r}: a value must be frozen or copied, not {type(value).__name__}"
            )
    done(len(frozen))
    groups = []
    for start in range(0, len(live), LIVE_GROUP):
        group = live[start : start + LIVE_GROUP]
        groups.append(_dumps(group))
        done(len(group))
    payload = _dumps((frozen, groups))
    return _HEADER.pack(_MAGIC, _VERSION, len(entries), zlib.crc32(payload), len(payload)) + payload


def _dumps(value: Any) -> bytes:
    try:
        return pickle.dumps(value, protocol=5)
    except (pickle.PicklingError, AttributeError, TypeError):
        return _pickling.cloudpickle_dumps(value)


def decode(chunk: bytes, where: str) -> Entries:
    """The entries of a chunk, their values read back; :class:`SnapshotDataError` naming ``where`` if
    the chunk is damaged or a value cannot be read."""
    if not isinstance(chunk, bytes | bytearray) or len(chunk) < _HEADER.size:
        raise SnapshotDataError(
            f"snapshot chunk {where} is truncated: {len(chunk)} bytes, no complete header"
        )
    magic, version, count, crc, length = _HEADER.unpack_from(chunk)
    if magic != _MAGIC:
        raise SnapshotDataError(f"snapshot chunk {where} is not jetlet snapshot data (magic {magic!r})")
    if version not in _READABLE_VERSIONS:
        readable = " or ".join(str(v) for v in _READABLE_VERSIONS)
        raise SnapshotDataError(f"snapshot chunk {where} has format version {version}, expected {readable}")
    payload = bytes(chunk[_HEADER.size :])
    if len(payload) != length:
        raise SnapshotDataError(
            f"snapshot chunk {where} is truncated: {len(payload)} of {length} payload bytes"
        )
    if zlib.crc32(payload) != crc:
        raise SnapshotDataError(f"snapshot chunk {where} is corrupted: its checksum does not match")
    try:
        frozen, groups = (pickle.loads(payload), []) if version == 1 else pickle.loads(payload)
        thaw = snapshot_writer.thaw
        entries: Entries = [(key, thaw(value)) for key, value in frozen]
        for group in groups:
            entries.extend(pickle.loads(group))
    except Exception as exc:
        raise SnapshotDataError(
            f"snapshot chunk {where}: a saved value cannot be read back: {type(exc).__name__}: {exc}"
        ) from exc
    if len(entries) != count:
        raise SnapshotDataError(
            f"snapshot chunk {where} holds {len(entries)} entries, its header says {count}"
        )
    return entries


def chunks_of(
    entries_by_vertex: Mapping[str, Entries],
    partition_count: int,
    single_processor: Iterable[str],
    done: Callable[[int], None] = _no_pacing,
) -> tuple[dict[int, list[tuple[str, bytes]]], list[tuple[str, bytes]], dict[str, int]]:
    """Split a member's part into ``(partition chunks, broadcast chunks, entry count per vertex)``.

    ``single_processor`` names the vertices that run as one processor in the
    whole cluster: all their state is broadcast (that processor gets all).
    ``done(n)`` is told of the entries encoded as :func:`encode` tells it.
    """
    singles = set(single_processor)
    by_partition: dict[int, list[tuple[str, bytes]]] = {}
    broadcast: list[tuple[str, bytes]] = []
    counts: dict[str, int] = {}
    for vertex, entries in entries_by_vertex.items():
        counts[vertex] = len(entries)
        if vertex in singles:
            broadcast.append((vertex, encode(entries, done)))
            continue
        split: dict[int | None, Entries] = {}
        for entry in entries:
            split.setdefault(snapshot_keys.partition_or_broadcast(entry[0], partition_count), []).append(
                entry
            )
        for partition, part in split.items():
            if partition is None:
                broadcast.append((vertex, encode(part, done)))
            else:
                by_partition.setdefault(partition, []).append((vertex, encode(part, done)))
    return by_partition, broadcast, counts


def route(
    partition_chunks: Mapping[int, Mapping[Any, bytes]],
    broadcast_chunks: Mapping[Any, bytes],
    parallelism: Mapping[str, int],
    single_processor: Iterable[str],
    member_index: int,
) -> tuple[dict[str, list[Entries]], dict[str, int]]:
    """Each local processor's share: ``(state[vertex][local index], entries read per vertex)``.

    ``partition_chunks[p]`` holds this member's partitions' chunks keyed
    ``(vertex, saving member)``; partition ``p`` goes to local processor
    ``p % local parallelism``. Broadcast chunks go to every processor of
    their vertex, except that a single-processor vertex's go to member 0's
    processor only. State of a vertex the job does not have is counted
    under its name, and left out.
    """
    singles = set(single_processor)
    state: dict[str, list[Entries]] = {v: [[] for _ in range(n)] for v, n in parallelism.items()}
    counts: dict[str, int] = {}
    for partition, chunks in partition_chunks.items():
        for key, chunk in chunks.items():
            vertex = _vertex_of(key)
            entries = decode(chunk, f"{vertex!r} partition {partition}")
            counts[vertex] = counts.get(vertex, 0) + len(entries)
            shares = state.get(vertex)
            if shares:
                shares[partition % len(shares)].extend(entries)
    for key, chunk in broadcast_chunks.items():
        vertex = _vertex_of(key)
        entries = decode(chunk, f"{vertex!r} (state of every processor)")
        shares = state.get(vertex)
        if vertex in singles:
            if member_index == 0:
                counts[vertex] = counts.get(vertex, 0) + len(entries)
                if shares:
                    shares[0].extend(entries)
            continue
        if member_index == 0:  # counted once in the cluster, although every member reads it
            counts[vertex] = counts.get(vertex, 0) + len(entries)
        for share in shares or []:
            share.extend(entries)
    return state, counts


def broadcast_counts(broadcast_chunks: Mapping[Any, bytes]) -> dict[str, int]:
    """The entries per vertex in the broadcast chunks a member read, from the chunks' headers."""
    counts: dict[str, int] = {}
    for key, chunk in broadcast_chunks.items():
        vertex = _vertex_of(key)
        entries = _HEADER.unpack_from(chunk)[2] if len(chunk) >= _HEADER.size else 0
        counts[vertex] = counts.get(vertex, 0) + entries
    return counts


def short_broadcast_reads(read: Mapping[str, Mapping[str, int]]) -> dict[str, str]:
    """Per member, why its read of the broadcast entries (``read[member]``, :func:`broadcast_counts`)
    falls short of another member's, for the members whose read does.

    >>> short_broadcast_reads({"a": {"src": 3, "win": 6}, "b": {"src": 3, "win": 4}})
    {'b': "member b read only part of the snapshot's broadcast state ('win': 4 of 6 entries)"}
    """
    most: dict[str, int] = {}
    for counts in read.values():
        for vertex, count in counts.items():
            most[vertex] = max(most.get(vertex, 0), count)
    problems: dict[str, str] = {}
    for member, counts in read.items():
        short = [
            f"{v!r}: {counts.get(v, 0)} of {n} entries"
            for v, n in sorted(most.items())
            if counts.get(v, 0) < n
        ]
        if short:
            problems[member] = (
                f"member {member} read only part of the snapshot's broadcast state ({'; '.join(short)})"
            )
    return problems


def _vertex_of(key: Any) -> str:
    if not (isinstance(key, Sequence) and len(key) in (2, 3) and isinstance(key[0], str)):
        raise SnapshotDataError(f"snapshot data has a chunk under a malformed key {key!r}")
    return key[0]


def state_mismatch(
    source: Mapping[str, Any], vertex_names: frozenset[str], allow_dropping: bool
) -> list[str]:
    """Stages that hold state in the snapshot but are not in the job (their state would be lost)."""
    missing = sorted(v for v, count in source["counts"].items() if count and v not in vertex_names)
    if not missing or allow_dropping:
        return []
    label = f"snapshot {source.get('name') or source['id']} of job {source.get('job_name', '?')!r}"
    return [
        f"{label} holds state of stage {name!r}, which this job does not have; keep the stage's name, "
        "or set JobConfig.allow_dropping_state to start without that state"
        for name in missing
    ]


def incomplete_restore(source: Mapping[str, Any], restored: Mapping[str, int]) -> list[str]:
    """Vertices whose restored entries do not add up to what the snapshot stored."""
    label = f"snapshot {source.get('name') or source['id']} of job {source.get('job_name', '?')!r}"
    return [
        f"{label} is incomplete: stage {vertex!r} stored {count} entries "
        f"but {restored.get(vertex, 0)} were found"
        for vertex, count in sorted(source["counts"].items())
        if restored.get(vertex, 0) != count
    ]
