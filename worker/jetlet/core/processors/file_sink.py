"""``write_file_p``: each sink processor writes its items as lines of its own files (Jet's ``WriteFileP``).

In ``init`` the processor creates the directory (with its parents). It
writes ``to_string(item)`` plus ``\\n`` per item, one inbox batch at a time.
Watermarks are ignored. Writing blocks, so the processor is non-cooperative.
The processors of a vertex never share a file: every name starts with the
processor's global index, so the union of the files holds every item.

**Without exactly-once** (``context.processing_guarantee`` NONE or
AT_LEAST_ONCE) each processor writes ``<directory>/<global processor index>``
and flushes after each batch, so a streaming job's output is visible as it
arrives. The file is opened at the first batch (or at ``complete()``); a
fresh job replaces an older file of that name, a job restored from a snapshot
appends to it (its lines from before the snapshot stay; with AT_LEAST_ONCE
the items after it may come twice). ``complete()`` and ``close()`` close
the file (``close()`` also after a failure or cancellation).

**With EXACTLY_ONCE** the files are transactions committed with the job's
snapshots, as Jet's ``WriteFileP`` with its transaction utility does:

* Items go to the *active* transaction, a temporary file
  ``<directory>/.<index>-<execution>-<sequence>.tmp`` begun at the first
  batch after the last snapshot. ``<execution>`` is the execution id in hex
  (``context.execution_id``; 0 in one process) and ``<sequence>`` the lowest
  number whose final or temporary file does not exist yet, so the names never
  repeat, also across executions. Two executions of a job can touch the
  directory at once — a stale one on a member paused past the failure
  timeout runs on until it notices, one being cancelled stops a moment after
  its successor starts, a split cluster runs the job on both sides — and a
  commit or a rollback acts on its file by name: with the execution in the
  name each commits or rolls back only its own. (With ``<index>-<sequence>``
  alone a newer execution deleted a stale one's temporary file as a leftover
  and began its own under the same name; the stale execution's late commit
  then renamed the newer one's open transaction into place — items visible
  before any snapshot covered them, replayed after the next restart — while
  its own items were silently gone. Now that commit fails: its file is
  missing.)
* At a snapshot, ``save_to_snapshot`` saves the names of the transactions
  that ``snapshot_commit_prepare`` is about to leave *pending* (the earlier
  pending ones and the active one) under a
  :class:`~jetlet.core.snapshot_keys.ProcessorKey`; ``snapshot_commit_prepare``
  flushes, fsyncs and closes the active file, which becomes pending: items
  before the barrier are in pending files, items after it go to a new one.
* ``snapshot_commit_finish(True)`` (the snapshot is complete everywhere)
  commits the pending transactions: each temporary file is renamed to its
  final name ``<index>-<execution>-<sequence>`` (atomic). After ``False`` they stay
  pending, as in Jet: the job goes on and their items are not replayed, so
  the next complete snapshot commits them (and a restart from an older
  snapshot deletes them, below).
* A restore means its snapshot was complete, so the processor commits the
  transactions that the snapshot lists, for every saving processor ``k``
  with ``k % total_parallelism == global_processor_index`` (a job failing
  between the two phases leaves them uncommitted). Later, before it begins
  its first transaction (or in ``complete()`` if it never does), it deletes
  the temporary files left in the directory by the same processors ``k``: no
  complete snapshot lists them, and their items will be replayed. (Not in
  ``close()``, unlike Jet: an execution that fails before its restore must
  not delete the files that the snapshot still lists.)
* ``complete()`` (the end of the input) commits the active transaction and
  every pending one. While a snapshot is between its two phases it returns
  False until ``snapshot_commit_finish`` has come (the engine runs that
  second phase before it calls ``complete()`` again), as Jet's tasklet waits
  for it before it ends: after a failed snapshot the pending transactions
  are still the job's output, and they commit with the rest. ``close()``
  deletes the active transaction's file (its items come after the last
  barrier) and keeps the pending ones for a restore to commit; it deletes
  that file only if its name still names it (a later run with the same
  execution id, in one process, may have deleted it as a leftover and begun
  its own under that name).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from jetlet import config
from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import processor, snapshot_keys
from jetlet.core import watermark as wm
from jetlet.core.processors.transaction_names import transaction_name, transaction_pattern

SNAPSHOT_TAG = "__jetlet_write_file__"
"""The tag of the :class:`~jetlet.core.snapshot_keys.ProcessorKey` the sink saves its transactions under."""

_TEMP_FILE = re.compile(rf"\.{transaction_pattern()}\.tmp")
"""A transaction's temporary file; group ``index`` is the index of the processor that began it."""


def temp_name(name: str) -> str:
    """The name of the temporary file of the transaction that commits as ``name``."""
    return f".{name}.tmp"


class _Transaction:
    """One temporary file that commits by being renamed to its final name."""

    def __init__(self, directory: Path, name: str, encoding: str) -> None:
        self.name = name
        self.final = directory / name
        self.temp = directory / temp_name(name)
        self.file: TextIO | None = self.temp.open("w", encoding=encoding)
        created = os.fstat(self.file.fileno())
        self._identity = (created.st_dev, created.st_ino)

    def prepare(self) -> None:
        """Make the file durable and close it; after this it only commits."""
        if self.file is not None:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            self.file = None

    def commit(self) -> None:
        self.prepare()
        os.replace(self.temp, self.final)

    def release(self) -> None:
        """Close the file, neither committing nor deleting it."""
        if self.file is not None:
            self.file.close()
            self.file = None

    def discard(self) -> None:
        """Close the file and delete it, if its name still names it.

        A later run with the same execution id may have deleted it as a
        leftover and begun its own file under the same name: that file is not
        this transaction's to delete. The check runs while the file is still
        open, so that its inode cannot have been reused for the newer file.
        """
        try:
            found = os.stat(self.temp)
        except FileNotFoundError:
            found = None
        if found is not None and (found.st_dev, found.st_ino) == self._identity:
            self.temp.unlink(missing_ok=True)
        self.release()


class WriteFileP(processor.Processor):
    """See the module doc."""

    def __init__(self, directory: str, to_string: Callable[[Any], str], encoding: str) -> None:
        self._directory = Path(directory)
        self._to_string = to_string
        self._encoding = encoding
        self._exactly_once = False
        # without exactly-once
        self._file: TextIO | None = None
        self._restored = False
        # with exactly-once
        self._active: _Transaction | None = None
        self._pending: list[_Transaction] = []
        self._sequence = 0
        self._leftovers_deleted = False
        self._snapshot_in_progress = False

    def is_cooperative(self) -> bool:
        return False

    def init(self, outbox: outbox_mod.Outbox, context: processor.ProcessorContext) -> None:
        super().init(outbox, context)
        self._exactly_once = context.processing_guarantee is config.ProcessingGuarantee.EXACTLY_ONCE
        self._directory.mkdir(parents=True, exist_ok=True)

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        to_string = self._to_string
        text = "".join(f"{to_string(item)}\n" for item in inbox.take_all())
        if self._exactly_once:
            self._active_file().write(text)
            return
        file = self._plain_file()
        file.write(text)
        file.flush()

    def try_process_watermark(self, watermark: wm.Watermark) -> bool:
        return True

    def complete(self) -> bool:
        if not self._exactly_once:
            self._plain_file()
            self._close_file()
            return True
        if self._snapshot_in_progress:
            return False  # the second phase decides about what is pending: wait for it
        self._delete_leftovers()
        if self._active is not None:
            self._active.prepare()
            self._pending.append(self._active)
        self._active = None
        self._commit_pending()
        return True

    def close(self) -> None:
        self._close_file()
        if self._exactly_once:
            if self._active is not None:
                self._active.discard()
                self._active = None
            for transaction in self._pending:
                transaction.release()
            self._pending = []

    # -- without exactly-once ------------------------------------------------
    def _plain_file(self) -> TextIO:
        if self._file is None:
            path = self._directory / str(self.context.global_processor_index)
            if self._restored:
                self._file = path.open("a", encoding=self._encoding)
            else:
                self._file = path.open("w", encoding=self._encoding)
        return self._file

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    # -- transactions --------------------------------------------------------
    def _active_file(self) -> TextIO:
        if self._active is None:
            self._delete_leftovers()
            self._active = _Transaction(self._directory, self._new_name(), self._encoding)
        assert self._active.file is not None
        return self._active.file

    def _new_name(self) -> str:
        """The next ``<index>-<execution>-<sequence>`` whose final and temporary files do not exist."""
        index, execution = self.context.global_processor_index, self.context.execution_id
        while True:
            name = transaction_name(index, execution, self._sequence)
            self._sequence += 1
            if not (self._directory / name).exists() and not (self._directory / temp_name(name)).exists():
                return name

    def _commit_pending(self) -> None:
        for transaction in self._pending:
            transaction.commit()
        self._pending = []

    def _owns(self, saver_index: int) -> bool:
        """True if this processor recovers what processor ``saver_index`` left (Jet's rule)."""
        context = self.context
        return saver_index % context.total_parallelism == context.global_processor_index

    def _delete_leftovers(self) -> None:
        """Delete the temporary files that no complete snapshot lists (see the module doc), once."""
        if self._leftovers_deleted:
            return
        self._leftovers_deleted = True
        for path in self._directory.iterdir():
            match = _TEMP_FILE.fullmatch(path.name)
            if match is not None and self._owns(int(match.group("index"))):
                path.unlink(missing_ok=True)

    def _recover_and_commit(self, name: str) -> None:
        temp, final = self._directory / temp_name(name), self._directory / name
        if temp.exists():
            os.replace(temp, final)
        elif not final.exists():
            self.context.logger.warning(
                "%s: neither the temporary nor the final file of %s exists; its items may be lost",
                self.context.vertex_name,
                name,
            )

    # -- snapshots -------------------------------------------------------------
    def save_to_snapshot(self) -> bool:
        key = snapshot_keys.ProcessorKey(SNAPSHOT_TAG, self.context.global_processor_index)
        names = [transaction.name for transaction in self._pending]
        if self._active is not None:
            names.append(self._active.name)
        return self.outbox.offer_to_snapshot(key, tuple(names) if self._exactly_once else ())

    def snapshot_commit_prepare(self) -> bool:
        if self._exactly_once:
            if self._active is not None:
                self._active.prepare()
                self._pending.append(self._active)
                self._active = None
            self._snapshot_in_progress = True
        return True

    def snapshot_commit_finish(self, success: bool) -> bool:
        self._snapshot_in_progress = False
        if self._exactly_once and success:
            self._commit_pending()
        return True

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        self._restored = True
        for key, names in inbox.take_all():
            if not (isinstance(key, snapshot_keys.ProcessorKey) and key.tag == SNAPSHOT_TAG):
                raise ValueError(f"{self.context.vertex_name}: a file sink cannot restore the entry {key!r}")
            if self._exactly_once and self._owns(key.processor_index):
                for name in names:
                    self._recover_and_commit(name)


def write_file_p(
    directory: str, to_string: Callable[[Any], str] = str, encoding: str = "utf-8"
) -> processor.ProcessorFactory:
    """A factory of processors that write ``to_string(item)`` lines to files in ``directory``.

    Without exactly-once, processor ``i`` writes ``directory/i``; with it,
    ``directory/i-<execution>-<sequence>`` files committed at each snapshot (see the
    module doc).
    """
    return lambda: WriteFileP(directory, to_string, encoding)
