"""A member's named data structures: lists, maps and observables.

``Sources.list(name)``, ``Sinks.list(name)``, ``Sinks.map(name)`` and
``Sinks.observable(name)`` read and write these; clients reach them with
``instance.get_list(name)`` and friends. Structures are created on first
use. Writes of one batch to a map happen under the store's lock, so merging
sinks on several processors never lose an update.
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
            return self._lists.setdefault(_checked(name), [])

    def get_map(self, name: str) -> dict[Any, Any]:
        with self.lock:
            return self._maps.setdefault(_checked(name), {})

    def get_observable(self, name: str) -> observable_mod.Observable[Any]:
        with self.lock:
            found = self._observables.get(_checked(name))
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


def _checked(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a data structure name must be a non-empty string, got {name!r}")
    return name
