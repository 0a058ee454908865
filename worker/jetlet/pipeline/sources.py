"""Pipeline sources (Jet's ``Sources``): where a pipeline's items come from.

A source is a named processor meta supplier plus its kind: a
:class:`BatchSource` ends, a :class:`StreamSource` may not. Reading a source
with ``Pipeline.read_from`` gives a ``BatchStage`` or a
``StreamSourceStage``. File sources split the matching files among their
processors by global processor index; custom sources come from
:class:`~jetlet.pipeline.source_builder.SourceBuilder`.
"""

from __future__ import annotations

import codecs
import dataclasses
import fnmatch
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

from jetlet.core import processor as proc
from jetlet.core import processors
from jetlet.core.processors import socket_source, store

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class BatchSource(Generic[T]):
    """A finite source of items of type ``T``."""

    name: str
    supplier: proc.ProcessorMetaSupplier


@dataclasses.dataclass(frozen=True)
class StreamSource(Generic[T]):
    """A possibly infinite source; ``native_timestamps`` extracts a timestamp from an item, if it can."""

    name: str
    supplier: proc.ProcessorMetaSupplier
    native_timestamps: Callable[[T], int] | None = None
    emits_events: bool = False
    """True if the source emits ``(timestamp, item)`` events (``SourceBuilder.timestamped_stream``):
    ``native_timestamps`` then reads an event's timestamp, and the stage keeps the events as they are
    for native timestamps and unwraps them to the items otherwise."""


class Sources:
    """Factories of the built-in sources."""

    @staticmethod
    def items(*items: T) -> BatchSource[T]:
        """The given items (split among the source's processors)."""
        frozen = list(items)
        return BatchSource("items", processors.source_from_iterable(frozen))

    @staticmethod
    def list(name: str) -> BatchSource[Any]:
        """The items of the instance's named list (``instance.get_list(name)``)."""
        return BatchSource(f"listSource({name})", store.list_source_p(name))

    @staticmethod
    def from_iterable(iterable: Iterable[T], name: str = "iterable") -> BatchSource[T]:
        """The items of an iterable of this process (re-iterable, for restarts: a list, a range)."""
        return BatchSource(name, processors.source_from_iterable(iterable))

    @staticmethod
    def files(
        directory: str | os.PathLike[str], glob: str = "*", encoding: str = "utf-8"
    ) -> BatchSource[str]:
        """The lines of the files in ``directory`` whose names match ``glob``, without line ends.

        Files are assigned to the source's processors by index (sorted by
        name), so each line is read exactly once across the cluster.
        """
        root = _checked_directory("Sources.files", directory, glob, encoding)

        def read(context: proc.ProcessorContext) -> Iterator[str]:
            for path in _my_files(root, glob, context, "Sources.files"):
                with path.open(encoding=encoding) as handle:
                    for line in handle:
                        yield line.rstrip("\r\n")

        return BatchSource(
            f"filesSource({root}/{glob})", processors.source_from_generator(read, cooperative=False)
        )

    @staticmethod
    def json(
        directory: str | os.PathLike[str], glob: str = "*.json", encoding: str = "utf-8"
    ) -> BatchSource[dict[str, Any]]:
        """The JSON objects in the files in ``directory`` matching ``glob``, one per line (JSON Lines).

        Files are split among the source's processors as in :meth:`files`.
        Blank lines are skipped; a line that is not a JSON object fails the
        job with an error naming the file and the line number.
        """
        root = _checked_directory("Sources.json", directory, glob, encoding)

        def read(context: proc.ProcessorContext) -> Iterator[dict[str, Any]]:
            for path in _my_files(root, glob, context, "Sources.json"):
                with path.open(encoding=encoding) as handle:
                    for number, line in enumerate(handle, start=1):
                        if line.strip():
                            yield _json_object(line, path, number)

        return BatchSource(
            f"jsonSource({root}/{glob})", processors.source_from_generator(read, cooperative=False)
        )

    @staticmethod
    def socket(host: str, port: int, encoding: str = "utf-8") -> StreamSource[str]:
        """The lines (without line ends) a TCP server at ``host:port`` sends, until it closes.

        Each source processor (one per member) opens its own connection.
        """
        if not isinstance(host, str) or not host:
            raise ValueError(f"Sources.socket: host must be a non-empty string, got {host!r}")
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            raise ValueError(f"Sources.socket: port must be an int in 1..65535, got {port!r}")
        _check_encoding("Sources.socket", encoding)
        return StreamSource(
            f"socketSource({host}:{port})", socket_source.stream_socket_p(host, port, encoding)
        )

    @staticmethod
    def batch_from_generator(
        generate: Callable[[proc.ProcessorContext], Iterable[T]], name: str
    ) -> BatchSource[T]:
        """Items that ``generate(context)`` yields on each source processor."""
        return BatchSource(name, processors.source_from_generator(generate))

    @staticmethod
    def stream_from_generator(
        generate: Callable[[proc.ProcessorContext], Iterable[T]], name: str = "streamSource"
    ) -> StreamSource[T]:
        """A stream of what ``generate(context)`` yields on each source processor."""
        return StreamSource(name, processors.source_from_generator(generate))

    @staticmethod
    def test_stream(
        items_per_second: float, create: Callable[[int], Any], count: int | None = None
    ) -> StreamSource[Any]:
        """``create(sequence)`` at a fixed total rate (for ``count`` items, or forever)."""
        return StreamSource("testStream", processors.source_rate(items_per_second, create, count))


def _check_encoding(what: str, encoding: str) -> None:
    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError) as exc:
        raise ValueError(f"{what}: encoding {encoding!r} is not a known codec") from exc


def _checked_directory(what: str, directory: str | os.PathLike[str], glob: str, encoding: str) -> Path:
    """``directory`` as a path, once the arguments of a file source are checked."""
    if not isinstance(directory, str | os.PathLike) or not os.fspath(directory):
        raise ValueError(f"{what}: directory must be a non-empty path, got {directory!r}")
    if not isinstance(glob, str):
        raise TypeError(f"{what}: glob must be a string, got {glob!r}")
    _check_encoding(what, encoding)
    return Path(directory)


def _my_files(root: Path, glob: str, context: proc.ProcessorContext, what: str) -> list[Path]:
    """This processor's share of the matching files: every ``total_parallelism``-th, sorted by name."""
    if not root.is_dir():
        raise FileNotFoundError(f"{what}: {str(root)!r} is not a directory")
    names = sorted(p for p in root.iterdir() if p.is_file() and fnmatch.fnmatch(p.name, glob))
    return names[context.global_processor_index :: context.total_parallelism]


def _json_object(line: str, path: Path, number: int) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"Sources.json: {path}, line {number}: invalid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ValueError(
            f"Sources.json: {path}, line {number}: expected a JSON object, got {type(value).__name__}"
        )
    return value
