"""Pipeline sources (Jet's ``Sources``): where a pipeline's items come from.

A source is a named processor meta supplier plus its kind: a
:class:`BatchSource` ends, a :class:`StreamSource` may not. Reading a source
with ``Pipeline.read_from`` gives a ``BatchStage`` or a
``StreamSourceStage``. File sources split the matching files among their
processors by global processor index; custom sources come from
:class:`~jetlet.pipeline.source_builder.SourceBuilder`.

The sources of collections, generators and files are replayable (see
:mod:`jetlet.core.processors.sources`). A file source saves, per processor,
how many lines of each of its files it has read; a restore merges the maps of
every processor, so each file resumes after its last emitted line whichever
processor reads it now (files are assigned by name and index, so a restore
into another parallelism is exact).
"""

from __future__ import annotations

import codecs
import dataclasses
import fnmatch
import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, Protocol, TextIO, TypeVar

from jetlet.core import processor as proc
from jetlet.core import processors
from jetlet.core.event_time import EventTimePolicy
from jetlet.core.processors import socket_source, sources, store
from jetlet.core.processors.chain import BatchStep

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class BatchSource(Generic[T]):
    """A finite source of items of type ``T``."""

    name: str
    supplier: proc.ProcessorMetaSupplier


class EventTimeSupplier(Protocol):
    """A source's processors with an event-time policy, and optionally the stateless steps right
    after it, planned into them."""

    def __call__(
        self, policy: EventTimePolicy, step: BatchStep | None = None, /
    ) -> proc.ProcessorMetaSupplier: ...


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
    event_time_supplier: EventTimeSupplier | None = None
    """The source with an event-time policy planned into it (it then drops late items and emits the
    watermarks itself, as Jet plans a policy into a source): the planner uses it instead of a
    separate ``add-timestamps`` vertex when the stage's timestamps are the source's only consumer,
    and plans the stateless stages that follow into it too. None: the source cannot."""


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

        def read(context: proc.ProcessorContext) -> _LinesReader:
            return _LinesReader(root, glob, encoding, _plain_line, context, "Sources.files")

        return BatchSource(
            f"filesSource({root}/{glob})", sources.replayable_source_p(read, cooperative=False)
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

        def read(context: proc.ProcessorContext) -> _LinesReader:
            return _LinesReader(root, glob, encoding, _json_line, context, "Sources.json")

        return BatchSource(f"jsonSource({root}/{glob})", sources.replayable_source_p(read, cooperative=False))

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
        generate: Callable[[proc.ProcessorContext], Iterable[T]], name: str, *, cooperative: bool = True
    ) -> BatchSource[T]:
        """Items that ``generate(context)`` yields on each source processor.

        ``cooperative=False`` for a generator that blocks (see :meth:`stream_from_generator`).
        A restore skips what each processor emitted; it needs the same total parallelism.
        """
        return BatchSource(
            name, processors.source_from_generator(generate, cooperative=cooperative, name=name)
        )

    @staticmethod
    def stream_from_generator(
        generate: Callable[[proc.ProcessorContext], Iterable[T]],
        name: str = "streamSource",
        *,
        cooperative: bool = True,
    ) -> StreamSource[T]:
        """A stream of what ``generate(context)`` yields on each source processor.

        Items are emitted as the generator yields them (what it yields within
        a millisecond goes out together), so a trickle of items shows at once.
        A generator that *waits* for its items (``time.sleep``, a socket, a
        blocking ``queue.get()``, an HTTP poll) must be declared
        ``cooperative=False``: it then runs on a thread of its own instead of
        holding up the cooperative thread that other processors share. A
        generator that only computes stays cooperative (the default).

        A restore skips what each processor emitted; it needs the same total parallelism.
        """
        return StreamSource(
            name, processors.source_from_generator(generate, cooperative=cooperative, name=name)
        )

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


class _LinesReader(sources.SourceReader):
    """This processor's share of the matching files, line by line, with the lines read per file.

    ``parse(line, path, number)`` makes a line (its line end still on) into an
    item, or None to skip it. The position is ``{file name: lines read}``.
    """

    def __init__(
        self,
        root: Path,
        glob: str,
        encoding: str,
        parse: Callable[[str, Path, int], Any],
        context: proc.ProcessorContext,
        what: str,
    ) -> None:
        self._root = root
        self._glob = glob
        self._encoding = encoding
        self._parse = parse
        self._context = context
        self._what = what
        self._files: Iterator[Path] | None = None
        self._path: Path | None = None
        self._handle: TextIO | None = None
        self._offsets: dict[str, int] = {}

    def read(self, limit: int) -> list[Any] | None:
        if self._files is None:
            self._files = iter(_my_files(self._root, self._glob, self._context, self._what))
        batch: list[Any] = []
        while len(batch) < limit:
            if self._handle is None or self._path is None:
                self._path = next(self._files, None)
                if self._path is None:
                    break
                self._handle = self._open(self._path)
            path, name = self._path, self._path.name
            number = self._offsets.get(name, 0)
            wanted = limit - len(batch)
            got = 0
            for line in itertools.islice(self._handle, wanted):
                got += 1
                item = self._parse(line, path, number + got)
                if item is not None:
                    batch.append(item)
            self._offsets[name] = number + got
            if got < wanted:
                self._handle.close()
                self._handle = None
        return batch or None

    def _open(self, path: Path) -> TextIO:
        """Open ``path`` and skip the lines read before the snapshot."""
        handle = path.open(encoding=self._encoding)
        done = self._offsets.get(path.name, 0)
        if sum(1 for _ in itertools.islice(handle, done)) < done:
            handle.close()
            raise ValueError(f"{self._what}: {path} has fewer lines than the {done} read before the snapshot")
        return handle

    def position(self) -> dict[str, int]:
        return dict(self._offsets)

    def restore(self, positions: list[Any]) -> None:
        # Each file was read by one processor; a processor restored before it read keeps the
        # merged map, so an older count of a file can come again: the higher one is the truth.
        for offsets in positions:
            for name, lines in offsets.items():
                self._offsets[name] = max(lines, self._offsets.get(name, 0))

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _plain_line(line: str, _path: Path, _number: int) -> str:
    return line.rstrip("\r\n")


def _json_line(line: str, path: Path, number: int) -> dict[str, Any] | None:
    return _json_object(line, path, number) if line.strip() else None


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
