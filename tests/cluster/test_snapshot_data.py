"""Snapshot chunks: split by partition, checked when read, routed to the processors that own them now."""

from __future__ import annotations

import pickle
import struct
import zlib
from typing import Any

import pytest

from jetlet._cluster import snapshot_data
from jetlet.core import snapshot_keys
from jetlet.core.snapshot_keys import ProcessorKey
from jetlet.core.snapshot_writer import Copied, freeze, thaw

PARTITIONS = 13


def _frozen(entries: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    return [(key, freeze(value)) for key, value in entries]


def test_a_chunk_reads_back_what_was_written() -> None:
    entries = _frozen([("a", 1), (("k", 2), [1, 2, 3])])
    assert snapshot_data.decode(snapshot_data.encode(entries), "here") == [("a", 1), (("k", 2), [1, 2, 3])]


def test_a_chunk_of_frozen_and_copied_values_reads_back_every_one_across_groups() -> None:
    # given more copied values than one pickle group holds, between frozen ones
    n = 2 * snapshot_data.LIVE_GROUP + 3
    copied = [((i, "k"), Copied({"n": i})) for i in range(n)]
    entries = [("first", freeze([0])), *copied, ("last", freeze("z"))]
    # then every entry reads back, each once
    back = snapshot_data.decode(snapshot_data.encode(entries), "here")
    expected = [("first", [0]), ("last", "z"), *(((i, "k"), {"n": i}) for i in range(n))]
    assert sorted(back, key=repr) == sorted(expected, key=repr)


def test_a_version_1_chunk_as_older_snapshot_files_hold_is_still_read() -> None:
    payload = pickle.dumps([("a", freeze(1)), ("b", freeze([2]))], protocol=5)
    chunk = struct.pack(">4sHIII", b"JLSN", 1, 2, zlib.crc32(payload), len(payload)) + payload
    assert snapshot_data.decode(chunk, "old") == [("a", 1), ("b", [2])]


def test_a_chunk_of_an_unknown_format_version_is_refused_naming_the_versions_read() -> None:
    payload = pickle.dumps(([], []), protocol=5)
    chunk = struct.pack(">4sHIII", b"JLSN", 3, 0, zlib.crc32(payload), len(payload)) + payload
    with pytest.raises(snapshot_data.SnapshotDataError, match="'p' 1 has format version 3, expected 1 or 2"):
        snapshot_data.decode(chunk, "'p' 1")


def test_a_value_neither_frozen_nor_copied_is_refused_naming_its_key() -> None:
    with pytest.raises(TypeError, match="snapshot entry 'k': a value must be frozen or copied, not list"):
        snapshot_data.encode([("k", [1])])


def test_a_copied_value_that_cannot_be_read_back_is_damage_naming_the_chunk() -> None:
    chunk = snapshot_data.encode([("k", Copied(_Unreadable()))])
    with pytest.raises(
        snapshot_data.SnapshotDataError, match="chunk 'p' 3: a saved value cannot be read back"
    ):
        snapshot_data.decode(chunk, "'p' 3")


class _Unreadable:
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (_refuse, ())


def _refuse() -> None:
    raise ValueError("no")


@pytest.mark.parametrize("cut", [0, 5, 19, -1])
def test_a_truncated_chunk_is_refused_naming_where_it_came_from(cut: int) -> None:
    chunk = snapshot_data.encode(_frozen([("a", 1), ("b", 2)]))
    with pytest.raises(snapshot_data.SnapshotDataError, match="'count' partition 4 is truncated"):
        snapshot_data.decode(chunk[:cut], "'count' partition 4")


def test_every_flipped_byte_of_a_chunk_is_detected() -> None:
    chunk = snapshot_data.encode(_frozen([("a", 1), ("b", 2)]))
    for position in range(len(chunk)):
        damaged = bytearray(chunk)
        damaged[position] ^= 0x01
        with pytest.raises(snapshot_data.SnapshotDataError):
            snapshot_data.decode(bytes(damaged), "x")


def test_state_saved_by_three_members_is_routed_to_two_exactly_once() -> None:
    # given the state of a keyed stage and a source's offsets, saved on three members
    saved: dict[str, list[tuple[Any, Any]]] = {"count": [], "source": []}
    chunks_by_member = []
    for member in range(3):
        part = {
            "count": _frozen([((member, i), i) for i in range(50)]),
            "source": _frozen([(ProcessorKey("offset", member), member * 10)]),
        }
        for vertex, entries in part.items():
            saved[vertex] += entries
        chunks_by_member.append(snapshot_data.chunks_of(part, PARTITIONS, single_processor=()))
    data: dict[int, dict[Any, bytes]] = {}
    broadcast: dict[Any, bytes] = {}
    for member, (by_partition, broadcast_chunks, counts) in enumerate(chunks_by_member):
        assert counts == {"count": 50, "source": 1}
        for partition, chunks in by_partition.items():
            for vertex, chunk in chunks:
                data.setdefault(partition, {})[(vertex, f"m{member}", partition)] = chunk
        for vertex, chunk in broadcast_chunks:
            broadcast[(vertex, f"m{member}")] = chunk
    # when two members restore it, each owning half of the partitions
    owners = [p % 2 for p in range(PARTITIONS)]
    parallelism = {"count": 2, "source": 1}
    states, totals = [], {"count": 0, "source": 0}
    for member in range(2):
        mine = {p: chunks for p, chunks in data.items() if owners[p] == member}
        state, counts = snapshot_data.route(mine, broadcast, parallelism, (), member)
        states.append(state)
        for vertex, count in counts.items():
            totals[vertex] += count
    # then every keyed entry reaches exactly one processor: the one that owns its key's partition
    restored = [e for state in states for share in state["count"] for e in share]
    assert sorted(restored) == sorted(_plain(saved["count"]))
    for member, state in enumerate(states):
        for index, share in enumerate(state["count"]):
            for key, _ in share:
                partition = snapshot_keys.partition_of(key, PARTITIONS)
                assert owners[partition] == member and partition % 2 == index
    # and every processor of the source gets every offset; the counts add up to what was saved
    for state in states:
        assert sorted(state["source"][0]) == sorted(_plain(saved["source"]))
    assert totals == {"count": 150, "source": 3}


def _plain(entries: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    return [(key, thaw(value)) for key, value in entries]


def test_a_single_processor_vertex_is_restored_on_the_first_member_only() -> None:
    part = {"sort": _frozen([("chunk-a", [3, 1]), ("chunk-b", [2])])}
    _, broadcast_chunks, _ = snapshot_data.chunks_of(part, PARTITIONS, single_processor=("sort",))
    broadcast = {(vertex, "m0"): chunk for vertex, chunk in broadcast_chunks}
    first, first_counts = snapshot_data.route({}, broadcast, {"sort": 1}, ("sort",), 0)
    other, other_counts = snapshot_data.route({}, broadcast, {"sort": 1}, ("sort",), 1)
    assert sorted(first["sort"][0]) == [("chunk-a", [3, 1]), ("chunk-b", [2])]
    assert other["sort"] == [[]] and first_counts == {"sort": 2} and other_counts == {}


def test_a_chunk_under_a_malformed_key_is_refused() -> None:
    with pytest.raises(snapshot_data.SnapshotDataError, match="malformed key"):
        snapshot_data.route({0: {"not-a-key": b""}}, {}, {}, (), 0)


def test_encoding_tells_of_every_entry_it_encoded_and_writes_the_same_chunks() -> None:
    # given 2,000 copied entries over 13 partitions, and a single-processor vertex's 600 in one chunk
    # of frozen and copied values (more copies than one pickle group holds)
    told: list[int] = []
    parts = {
        "keyed": [(ProcessorKey(("k", i), i % PARTITIONS), Copied(i)) for i in range(2000)],
        "single": [((i, "s"), Copied(-i) if i % 3 else freeze(i)) for i in range(600)],
    }

    def chunks(done: Any) -> Any:
        return snapshot_data.chunks_of(parts, PARTITIONS, ["single"], done)

    paced = chunks(told.append)
    # then every entry was told of once, the copies a pickle group at most at a time (the store paces
    # itself by it; this data's frozen entries, told of at once, are fewer than a group)
    assert sum(told) == 2600 and max(told) <= snapshot_data.LIVE_GROUP
    # and the chunks are those encoded without pacing
    assert paced == chunks(lambda n: None)
