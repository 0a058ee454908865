"""``write_file_p``: each sink processor writes its items as lines of its own file (Jet's ``WriteFileP``).

In ``init`` the processor creates the directory (with its parents) and opens
``<directory>/<global processor index>`` for writing, replacing an older
file of that name, so the processors of a vertex never share a file and the
union of the files holds every item exactly once. For each inbox batch it
writes ``to_string(item)`` plus ``\\n`` per item and flushes, so a streaming
job's output is visible as it arrives. ``complete()`` and ``close()`` close
the file (``close()`` also after a failure or cancellation). Watermarks are
ignored. Writing blocks, so the processor is non-cooperative.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import processor
from jetlet.core import watermark as wm


class WriteFileP(processor.Processor):
    """See the module doc."""

    def __init__(self, directory: str, to_string: Callable[[Any], str], encoding: str) -> None:
        self._directory = directory
        self._to_string = to_string
        self._encoding = encoding
        self._file: TextIO | None = None

    def is_cooperative(self) -> bool:
        return False

    def init(self, outbox: outbox_mod.Outbox, context: processor.ProcessorContext) -> None:
        super().init(outbox, context)
        directory = Path(self._directory)
        directory.mkdir(parents=True, exist_ok=True)
        self._file = (directory / str(context.global_processor_index)).open("w", encoding=self._encoding)

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        if self._file is None:
            raise RuntimeError(f"{self.context.vertex_name}: received items after its file was closed")
        to_string = self._to_string
        self._file.write("".join(f"{to_string(item)}\n" for item in inbox.take_all()))
        self._file.flush()

    def try_process_watermark(self, watermark: wm.Watermark) -> bool:
        return True

    def complete(self) -> bool:
        self._close_file()
        return True

    def close(self) -> None:
        self._close_file()

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def write_file_p(
    directory: str, to_string: Callable[[Any], str] = str, encoding: str = "utf-8"
) -> processor.ProcessorFactory:
    """A factory of processors that write ``to_string(item)`` lines to ``directory/<global index>``."""
    return lambda: WriteFileP(directory, to_string, encoding)
