"""Names of a two-phase file sink's transactions: ``<index>-<execution>-<sequence>``.

Theory of operation
-------------------
An exactly-once file sink (:mod:`jetlet.core.processors.file_sink`, the
Parquet sink of :mod:`jetlet.spark.parquet_sink`) writes each transaction
into a temporary file and commits it by renaming it to its final name; a
commit, a rollback and a restore all act on a transaction *by name*. Two
executions of one job can touch the directory at once: a stale one on a
member paused past the failure timeout runs on until it notices, one being
cancelled stops a moment after its successor starts, a split cluster runs
the job on both sides. The newer execution deletes the temporary files no
complete snapshot lists (the stale one's among them) and picks the lowest
free sequence, so with ``<index>-<sequence>`` alone it began its own
transaction under the very name of the stale one's, and the stale
execution's late commit published the newer one's open file (or its
rollback deleted it). With the execution id (hex) in the name each
execution commits or rolls back only its own transactions.

:func:`transaction_name` makes the name, :func:`transaction_pattern` the
regular expression that reads it back (named groups ``index``,
``execution`` and ``sequence``; ``execution`` is optional, so names written
before the execution was part of them still read). The digit counts let a
sink pad the numbers so that names sort by them.
"""

from __future__ import annotations


def transaction_name(
    index: int, execution: int, sequence: int, *, index_digits: int = 0, sequence_digits: int = 0
) -> str:
    """``<index>-<execution in hex>-<sequence>``, the numbers zero-padded to the digits given.

    >>> transaction_name(3, 0x5a, 7)
    '3-5a-7'
    >>> transaction_name(3, 0x5a, 7, index_digits=5, sequence_digits=8)
    '00003-5a-00000007'
    """
    return f"{index:0{index_digits}d}-{execution:x}-{sequence:0{sequence_digits}d}"


def transaction_pattern(*, index_digits: int = 0, sequence_digits: int = 0) -> str:
    r"""The regular expression (source) of :func:`transaction_name`'s names; no digit count means any.

    >>> import re
    >>> re.fullmatch(transaction_pattern(), "3-5a-7").groupdict()
    {'index': '3', 'execution': '5a', 'sequence': '7'}
    >>> re.fullmatch(transaction_pattern(), "3-7").groupdict()  # a name from before the execution
    {'index': '3', 'execution': None, 'sequence': '7'}
    """
    index = rf"\d{{{index_digits}}}" if index_digits else r"\d+"
    sequence = rf"\d{{{sequence_digits}}}" if sequence_digits else r"\d+"
    return rf"(?P<index>{index})-(?:(?P<execution>[0-9a-f]+)-)?(?P<sequence>{sequence})"
