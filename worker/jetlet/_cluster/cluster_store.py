"""A member's named lists and maps in the replicated grid, so user results survive a member's death.

:class:`ClusterDataStore` offers the operations of
:class:`jetlet._store.DataStore` on top of :class:`jetlet._cluster.grid.Grid`:

* a map ``name`` is the grid map ``map/<name>``; ``update_map`` puts its
  entries (each in its key's partition, on the primary and the backups);
  with a merge function, and in ``update_map_with``, the old values are
  read from the primaries first (a read-modify-write: two processors that
  update the *same* key at the same moment may race, as with any store
  without entry processors; the planner routes one key to one sink
  processor when the sink follows a keyed stage);
* a list ``name`` is the grid map ``list/<name>``, keyed ``(writer, sequence)``
  where the writer is one store of one member: reading sorts by key, so the
  items of one writer keep their order (the order between members is
  unspecified, as the order of arrival from several members is);
* observables stay on the member (the coordinator publishes them).

Every write returns once the backups have it, so the sinks that write here
are *blocking* and run on threads of their own.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Callable
from typing import Any

from jetlet import _store
from jetlet import observable as observable_mod
from jetlet._cluster import grid as grid_mod


class ClusterDataStore:
    """Lists and maps in the grid; observables local. See the module doc."""

    blocking = True

    def __init__(self, grid: grid_mod.Grid, local: _store.DataStore) -> None:
        self._grid = grid
        self._local = local
        self.lock = local.lock
        self._writer = f"{grid.member_name}/{uuid.uuid4().hex[:12]}"
        self._sequence = itertools.count()
        self._sequence_lock = threading.Lock()

    def append_list(self, name: str, items: list[Any]) -> None:
        with self._sequence_lock:
            keys = [(self._writer, next(self._sequence)) for _ in items]
        self._grid.put(_list(name), list(zip(keys, items, strict=True)))

    def update_map(
        self, name: str, entries: list[tuple[Any, Any]], merge: Callable[[Any, Any], Any] | None = None
    ) -> None:
        if merge is None:
            self._grid.put(_map(name), entries)
            return
        old = self._grid.get_many(_map(name), {key for key, _ in entries})
        merged: dict[Any, Any] = {}
        for key, value in entries:
            before = merged[key] if key in merged else old.get(key, _MISSING)
            merged[key] = value if before is _MISSING else merge(before, value)
        self._grid.put(_map(name), merged)

    def update_map_with(
        self, name: str, items: list[Any], key_fn: Callable[[Any], Any], update_fn: Callable[[Any, Any], Any]
    ) -> None:
        keyed = [(key_fn(item), item) for item in items]
        current = self._grid.get_many(_map(name), {key for key, _ in keyed})
        for key, item in keyed:
            current[key] = update_fn(current.get(key), item)
        self._grid.put(_map(name), current)

    def destroy_list(self, name: str) -> None:
        """Delete the named list everywhere: a later read finds it empty."""
        self._grid.delete_map(_list(name))

    def destroy_map(self, name: str) -> None:
        """Delete the named map everywhere: a later read finds it empty."""
        self._grid.delete_map(_map(name))

    def read_list(self, name: str) -> list[Any]:
        entries = self._grid.get_all(_list(name))
        return [entries[key] for key in sorted(entries)]

    def read_map(self, name: str) -> dict[Any, Any]:
        return self._grid.get_all(_map(name))

    def get_list(self, name: str) -> list[Any]:
        """A copy (the list lives in the grid): for reading only."""
        return self.read_list(name)

    def get_map(self, name: str) -> dict[Any, Any]:
        """A copy (the map lives in the grid): for reading only."""
        return self.read_map(name)

    def get_observable(self, name: str) -> observable_mod.Observable[Any]:
        return self._local.get_observable(name)


_MISSING = object()


def _list(name: str) -> str:
    return f"list/{_store.check_name(name)}"


def _map(name: str) -> str:
    return f"map/{_store.check_name(name)}"
