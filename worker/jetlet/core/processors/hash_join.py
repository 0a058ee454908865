"""Hash join: enrich a stream with the matching items of batch inputs (Jet's ``HashJoinP``).

Theory of operation. Input ordinal 0 is the *probe* side (any stream);
ordinals ``1..n`` are the *build* sides, one per :class:`JoinClause`. Build
side ``i`` is loaded into a hash table ``right_key_fn(item) ->
[right_projection_fn(item), ...]``; a key seen several times keeps every
value, so a many-to-many join emits one output per combination, as Jet 4.x
does.

For each probe item and each clause the processor looks up
``left_key_fn(item)``. The outer join (the default, Jet's ``hashJoin``) uses
``None`` where a clause has no match; the inner join (``inner=True``, Jet's
``innerHashJoin``) drops the item when any clause has no match. Each
combination of matches becomes ``map_to_output_fn(item, right_1, ...,
right_n)``: positional arguments, one per clause, for any ``n`` (the
pipeline's ``hash_join_builder`` wraps them into an ``ItemsByTag``). A None
output is skipped. With ``timestamped=True`` probe items are ``(ts, item)``
events: the key functions and the mapping see ``item``, and outputs are
re-wrapped as ``(ts, output)``.

Ordering: the tables must be complete before the first probe item is
looked up. As in Jet, that is the DAG's job: the build edges get a lower
priority number (``Edge.priority(-1)``), and the engine exhausts them before
it reads the probe edge. A probe item cannot be held back inside the
processor (the engine would never read the build edges while the inbox holds
probe items), so, like Jet's assertion, a build item that arrives after a
probe item was joined fails the job with an error naming the fix.

Probing works a chunk at a time, as the chain processor does: it takes as
many probe items as the outbox has room for the outputs of (sized by the
last chunk's outputs per item, :mod:`~jetlet.core.processors.chunking`),
joins them in one pass (one
clause, the common case, in a loop with no per-item calls of its own) and
offers the outputs with one ``offer_batch``. The chunk stays in the inbox
until all of its outputs are out (a key with several values emits several
items), so an empty inbox still means "everything taken in is out", which
is when snapshots are taken.

Snapshots: every processor saves its own tables (all processors hold the
same tables, since build edges are broadcast) under
:class:`HashJoinTableKey` entries of at most :data:`SNAPSHOT_CHUNK` keys.
These are broadcast keys (:mod:`jetlet.core.snapshot_keys`): a restore gives
every processor every copy, whatever the new parallelism, and each keeps the
entries of the lowest processor index it receives, so it loads one copy.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

from jetlet.core import inbox as inbox_mod
from jetlet.core import processor, snapshot_keys, snapshot_writer
from jetlet.core.processors import chunking
from jetlet.errors import require_callable

KeyFn = Callable[[Any], Hashable]

SNAPSHOT_CHUNK = 1024
"""How many keys of one table a snapshot entry holds."""

_NO_MATCH: tuple[None] = (None,)


def _identity(item: Any) -> Any:
    return item


def _entry_key(entry: Any) -> Hashable:
    key: Hashable = entry[0]
    return key


def _entry_value(entry: Any) -> Any:
    return entry[1]


@dataclasses.dataclass(frozen=True)
class JoinClause:
    """How a build side joins the probe side (Jet's ``JoinClause``).

    A probe item ``p`` matches a build item ``b`` when
    ``left_key_fn(p) == right_key_fn(b)``; the match contributes
    ``right_projection_fn(b)`` to the output.

    >>> clause = JoinClause.on_keys(lambda order: order["user"], lambda user: user["id"])
    >>> clause.project_right(lambda user: user["name"]).right_projection_fn({"id": 1, "name": "Ann"})
    'Ann'
    """

    left_key_fn: KeyFn
    right_key_fn: KeyFn
    right_projection_fn: Callable[[Any], Any] = _identity

    @staticmethod
    def on_keys(left_key_fn: KeyFn, right_key_fn: KeyFn) -> JoinClause:
        """Join where ``left_key_fn(probe item) == right_key_fn(build item)``."""
        return JoinClause(left_key_fn, right_key_fn)

    @staticmethod
    def join_map_entries(left_key_fn: KeyFn) -> JoinClause:
        """Join against ``(key, value)`` build items on their key, contributing the value."""
        return JoinClause(left_key_fn, _entry_key, _entry_value)

    def project_right(self, fn: Callable[[Any], Any]) -> JoinClause:
        """The same clause contributing ``fn(build item)`` instead of the build item."""
        return dataclasses.replace(self, right_projection_fn=fn)


@dataclasses.dataclass(frozen=True, order=True)
class HashJoinTableKey(snapshot_keys.BroadcastKey):
    """Snapshot key of one chunk of one clause's table (restored to every processor)."""

    processor_index: int
    clause: int
    chunk: int


class HashJoinP(processor.Processor):
    """Joins probe items (ordinal 0) with hash tables of the build sides; see the module doc."""

    def __init__(
        self,
        clauses: Sequence[JoinClause],
        map_to_output_fn: Callable[..., Any],
        inner: bool,
        timestamped: bool,
    ) -> None:
        self._clauses = list(clauses)
        self._map_to_output = map_to_output_fn
        self._inner = inner
        self._timestamped = timestamped
        self._tables: list[dict[Any, list[Any]]] = [{} for _ in self._clauses]
        self._probed = False
        self._pending: list[Any] = []
        self._sizer = chunking.ChunkSizer()
        self._chunk_size = 0
        """How many inbox items' outputs are pending (they leave the inbox once those are out)."""
        self._snapshot = snapshot_writer.SnapshotWriter()
        self._restored: dict[HashJoinTableKey, list[tuple[Any, list[Any]]]] = {}

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        if ordinal == 0:
            self._probe(inbox)
        else:
            self._build(ordinal, inbox)

    # -- build side --------------------------------------------------------
    def _build(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        if ordinal > len(self._clauses):
            raise ValueError(f"hash join has {len(self._clauses)} clauses but got items on input {ordinal}")
        if self._probed:
            raise RuntimeError(
                f"hash join got a build item on input {ordinal} after it joined probe items: give the "
                "build edges a lower priority number than the probe edge (Edge.priority(-1))"
            )
        clause = self._clauses[ordinal - 1]
        table = self._tables[ordinal - 1]
        key_fn, project = clause.right_key_fn, clause.right_projection_fn
        for item in inbox.take_all():
            key = key_fn(item)
            values = table.get(key)
            if values is None:
                table[key] = [project(item)]
            else:
                values.append(project(item))

    # -- probe side --------------------------------------------------------
    def _probe(self, inbox: inbox_mod.Inbox) -> None:
        outbox = self.outbox
        if self._pending:
            taken = outbox.offer_batch(self._pending)
            if taken < len(self._pending):
                self._pending = self._pending[taken:]
                return
            self._pending = []
            inbox.discard(self._chunk_size)  # the chunk, held back until its outputs were out
        self._probed = True
        join = self._join_one if len(self._clauses) == 1 else self._join_many
        sizer = self._sizer
        while inbox:
            room = outbox.room()
            if room <= 0:
                return
            available = len(inbox)
            count = sizer.inputs_for(room, available)
            outputs = join(list(inbox) if count == available else list(itertools.islice(inbox, count)))
            sizer.observed(count, len(outputs))
            if outputs:
                taken = outbox.offer_batch(outputs)
                if taken < len(outputs):
                    self._pending = outputs[taken:]
                    self._chunk_size = count
                    return
            inbox.discard(count)

    def _join_one(self, events: list[Any]) -> list[Any]:
        """The outputs of a chunk joined with the one clause's table."""
        key_fn = self._clauses[0].left_key_fn
        lookup: Callable[[Any], Sequence[Any] | None] = self._tables[0].get
        shape = self._map_to_output
        inner = self._inner
        timestamped = self._timestamped
        outputs: list[Any] = []
        emit = outputs.append
        for event in events:
            item = event[1] if timestamped else event
            found = lookup(key_fn(item))
            if found is None:
                if inner:
                    continue
                found = _NO_MATCH
            for right in found:
                out = shape(item, right)
                if out is not None:
                    emit((event[0], out) if timestamped else out)
        return outputs

    def _join_many(self, events: list[Any]) -> list[Any]:
        """The outputs of a chunk joined with several clauses: every combination of their matches."""
        outputs: list[Any] = []
        for event in events:
            timestamp, item = event if self._timestamped else (0, event)
            matches: list[Sequence[Any]] = []
            for clause, table in zip(self._clauses, self._tables, strict=True):
                found: Sequence[Any] | None = table.get(clause.left_key_fn(item))
                if found is None:
                    if self._inner:
                        break
                    found = _NO_MATCH
                matches.append(found)
            else:
                for rights in itertools.product(*matches):
                    out = self._map_to_output(item, *rights)
                    if out is not None:
                        outputs.append((timestamp, out) if self._timestamped else out)
        return outputs

    # -- snapshots ---------------------------------------------------------
    def save_to_snapshot(self) -> bool:
        return self._snapshot.write(self.outbox, self._table_chunks)

    def _table_chunks(self) -> Iterator[tuple[HashJoinTableKey, snapshot_writer.Copied]]:
        index = self.context.global_processor_index
        chunks = []
        for clause, table in enumerate(self._tables):
            entries = [(key, list(values)) for key, values in table.items()]
            for chunk, start in enumerate(range(0, len(entries), SNAPSHOT_CHUNK)):
                # a chunk is a copy already (new lists of the items): the member pickles it
                copy = snapshot_writer.Copied(entries[start : start + SNAPSHOT_CHUNK])
                chunks.append((HashJoinTableKey(index, clause, chunk), copy))
        return iter(chunks)

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        for key, entries in inbox.take_all():
            self._restored[key] = entries

    def finish_snapshot_restore(self) -> bool:
        if self._restored:
            source = min(key.processor_index for key in self._restored)
            for key in sorted(self._restored):
                if key.processor_index == source:
                    self._tables[key.clause].update((k, list(v)) for k, v in self._restored[key])
            self._restored = {}
        return True


def hash_join_p(
    clauses: JoinClause | Sequence[JoinClause],
    map_to_output_fn: Callable[..., Any],
    inner: bool = False,
    timestamped: bool = False,
) -> processor.ProcessorFactory:
    """Jet's ``Processors.hashJoinP``: ordinal 0 probes, ordinals ``1..n`` build; see the module doc.

    ``map_to_output_fn(item, right_1, ..., right_n)`` gets one match per
    clause (None for a missing match of an outer join).

    >>> from jetlet.testing import verify_processor
    >>> clause = JoinClause.join_map_entries(lambda order: order[1])
    >>> p = hash_join_p(clause, lambda order, user: (order[0], user))
    >>> _ = verify_processor(p).inputs([[("o1", 7), ("o2", 8)], [(7, "ann")]], priorities=[0, -1]) \\
    ...     .expect_output([("o1", "ann"), ("o2", None)])
    """
    clause_list = [clauses] if isinstance(clauses, JoinClause) else list(clauses)
    if not clause_list:
        raise ValueError("hash_join_p needs at least one JoinClause")
    for clause in clause_list:
        if not isinstance(clause, JoinClause):
            raise TypeError(f"hash_join_p: expected JoinClause, got {clause!r}")
    require_callable(map_to_output_fn, "hash_join_p: map_to_output_fn")
    return lambda: HashJoinP(clause_list, map_to_output_fn, inner, timestamped)
