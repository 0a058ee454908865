"""A member's named data structures: lists, maps and observables.

``Sources.list(name)``, ``Sinks.list(name)``, ``Sinks.map(name)`` and
``Sinks.observable(name)`` read and write these through the operations of
:class:`DataStore` (``append_list``, ``update_map``, ``update_map_with``,
``read_list``, ``read_map``, ``get_observable``); clients reach them with
``instance.get_list(name)`` and friends. Structures are created on first
use. Writes of one batch to a map happen under the store's lock, so merging
sinks on several processors never lose an update.

This store keeps everything in this process (an embedded instance). On a
cluster the lists and maps live in the replicated grid instead
(:class:`jetlet._cluster.cluster_store.ClusterDataStore`, the same
operations), so they survive a member's death; its writes wait for the
backups, so its sinks run on threads of their own (``blocking``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from jetlet import observable as observable_mod


class DataStore:
    """Named lists, maps and observables of one member (or one embedded instance)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._lists: dict[str, list[Any]] = {}
        self._maps: dict[str, dict[Any, Any]] = {}
        self._observables: dict[str, observable_mod.Observable[Any]] = {}

    def get_list(self, name: str) -> list[Any]:
        with self.lock:
            return self._lists.setdefault(check_name(name), [])

    def get_map(self, name: str) -> dict[Any, Any]:
        with self.lock:
            return self._maps.setdefault(check_name(name), {})

    def get_observable(self, name: str) -> observable_mod.Observable[Any]:
        with self.lock:
            found = self._observables.get(check_name(name))
            if found is None:
                found = self._observables[name] = observable_mod.Observable(name)
            return found

    def update_map(
        self, name: str, entries: list[tuple[Any, Any]], merge: Callable[[Any, Any], Any] | None = None
    ) -> None:
        """Put ``(key, value)`` entries; with ``merge``, ``merge(old, new)`` where a key exists."""
        with self.lock:
            target = self.get_map(name)
            if merge is None:
                target.update(entries)
                return
            for key, value in entries:
                target[key] = merge(target[key], value) if key in target else value

    blocking = False
    """Whether writes wait on other members (then the sinks that write here get threads of their own)."""

    def append_list(self, name: str, items: list[Any]) -> None:
        with self.lock:
            self.get_list(name).extend(items)

    def update_map_with(
        self, name: str, items: list[Any], key_fn: Callable[[Any], Any], update_fn: Callable[[Any, Any], Any]
    ) -> None:
        """``map[key_fn(item)] = update_fn(old value or None, item)`` for each item, in order."""
        with self.lock:
            target = self.get_map(name)
            for item in items:
                key = key_fn(item)
                target[key] = update_fn(target.get(key), item)

    def read_list(self, name: str) -> list[Any]:
        """A copy of the named list."""
        with self.lock:
            return list(self.get_list(name))

    def read_map(self, name: str) -> dict[Any, Any]:
        """A copy of the named map."""
        with self.lock:
            return dict(self.get_map(name))

    def destroy_list(self, name: str) -> None:
        """Forget the named list: a later read finds it empty."""
        with self.lock:
            self._lists.pop(check_name(name), None)

    def destroy_map(self, name: str) -> None:
        """Forget the named map: a later read finds it empty."""
        with self.lock:
            self._maps.pop(check_name(name), None)


def check_name(name: str) -> str:
    """``name`` if it is a usable data structure name; ValueError naming it otherwise."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a data structure name must be a non-empty string, got {name!r}")
    return name
