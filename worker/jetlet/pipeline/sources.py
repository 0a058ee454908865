"""Pipeline sources (Jet's ``Sources``): where a pipeline's items come from.

A source is a named processor meta supplier plus its kind: a
:class:`BatchSource` ends, a :class:`StreamSource` may not. Reading a source
with ``Pipeline.read_from`` gives a ``BatchStage`` or a
``StreamSourceStage``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

from jetlet.core import processor as proc
from jetlet.core import processors
from jetlet.core.processors import store

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
        root = Path(directory)

        def read(context: proc.ProcessorContext) -> Iterator[str]:
            if not root.is_dir():
                raise FileNotFoundError(f"Sources.files: {str(root)!r} is not a directory")
            names = sorted(p for p in root.iterdir() if p.is_file() and fnmatch.fnmatch(p.name, glob))
            mine = names[context.global_processor_index :: context.total_parallelism]
            for path in mine:
                with path.open(encoding=encoding) as handle:
                    for line in handle:
                        yield line.rstrip("\r\n")

        return BatchSource(
            f"filesSource({root}/{glob})", processors.source_from_generator(read, cooperative=False)
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
