"""``ColumnBatch``: many rows as named numpy columns, the item of the record-batch path.

The engine moves objects; on the record-batch path each object is a whole batch of rows, so the
engine's cost (queues, tasklet calls, timestamps, snapshot barriers) is paid per batch, about 10 µs,
and nothing per row, while the stages work on whole columns with numpy (vectorised, in C).

A batch is a mapping of column names to one-dimensional numpy arrays of equal length, plus the
name of its *timestamp column* (event time in ms) when it has one. It is immutable by convention:
stages make new batches (:meth:`ColumnBatch.filter`, :meth:`ColumnBatch.with_columns`) and share
the arrays that did not change, so a filter or a new column costs only what numpy spends on it.

Event time: a source emits a batch with its highest timestamp as the item's native timestamp, so
the watermark that follows a batch is that highest timestamp less the allowed lag — one watermark
per batch, from the timestamp column. The rows of a batch are not sorted by time; window stages
read each row's own time from the column.

The engine counts a batch as its rows, not as one item (``__jetlet_rows__``): in queue
capacities (edges that carry batches have ``EdgeConfig.batch_queue_size`` rows) and the
``receivedCount`` and ``emittedCount`` metrics.

Batches pickle as their arrays, which is how they cross network edges and enter snapshots. With
pickle protocol 5 each column of a plain dtype is reduced to its dtype's name and a
``pickle.PickleBuffer`` of its bytes (:meth:`ColumnBatch.__reduce_ex__`): a pickler given a
``buffer_callback`` (the network edges, :mod:`jetlet._network.tasklets`) then sends the columns
out of band, never copied into the pickle, and the receiver rebuilds them with ``np.frombuffer`` on
the frame's own bytes (no copy; such columns are read-only, as batches are immutable anyway); any
other pickler writes the bytes in band. :func:`_from_buffers` checks what it is given (the column
count, each buffer's size against its dtype, one length for all) and names the problem in a
``ValueError``. Columns of Python objects go through numpy's own pickling.

:meth:`ColumnBatch.to_arrow` and :meth:`ColumnBatch.from_arrow` convert to and from a
``pyarrow.RecordBatch`` without copying where Arrow allows (pyarrow is imported only then: it is
an optional dependency).

>>> import numpy as np
>>> batch = ColumnBatch({"auction": np.array([7, 8, 9]), "date_time": np.array([5, 3, 4])}, "date_time")
>>> len(batch), batch.max_timestamp()
(3, 5)
>>> batch.filter(batch["auction"] % 2 == 1).rows()
[(7, 5), (9, 4)]
>>> batch.with_columns(auction=batch["auction"] * 10).rows()[0]
(70, 5)
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, SupportsIndex

import numpy as np
import numpy.typing as npt

Column = npt.NDArray[Any]
"""One column: a one-dimensional numpy array."""


class ColumnBatch:
    """Rows as named numpy columns of equal length, with an optional timestamp column."""

    __slots__ = ("_columns", "_length", "timestamp")

    def __init__(self, columns: Mapping[str, Column], timestamp: str | None = None) -> None:
        """A batch of ``columns`` (name -> 1-D array, one length); ``timestamp``: the event-time column."""
        arrays = {name: np.asarray(values) for name, values in columns.items()}
        lengths = {len(values) for values in arrays.values()}
        if len(lengths) > 1:
            raise ValueError(
                f"ColumnBatch columns differ in length: { {n: len(v) for n, v in arrays.items()} }"
            )
        if any(values.ndim != 1 for values in arrays.values()):
            raise ValueError("ColumnBatch columns must be one-dimensional arrays")
        if timestamp is not None and timestamp not in arrays:
            raise ValueError(f"ColumnBatch has no timestamp column {timestamp!r} among {list(arrays)}")
        self._columns = arrays
        self._length = lengths.pop() if lengths else 0
        self.timestamp = timestamp
        """The name of the event-time column (ms), or None."""

    @property
    def columns(self) -> Mapping[str, Column]:
        """The columns by name, in their order."""
        return self._columns

    @property
    def names(self) -> list[str]:
        """The column names, in order."""
        return list(self._columns)

    def __len__(self) -> int:
        return self._length

    def __jetlet_rows__(self) -> int:
        """The rows the engine counts this item as, in queue capacities and metrics (its length)."""
        return self._length

    def __getitem__(self, name: str) -> Column:
        return self._columns[name]

    def __getstate__(self) -> tuple[dict[str, Column], str | None]:
        return (self._columns, self.timestamp)

    def __setstate__(self, state: tuple[dict[str, Column], str | None]) -> None:
        self._columns, self.timestamp = state
        self._length = len(next(iter(self._columns.values()))) if self._columns else 0

    def __reduce_ex__(self, protocol: SupportsIndex) -> str | tuple[Any, ...]:
        """Protocol 5: the columns as dtype names and buffers (see the module doc); else the arrays."""
        if int(protocol) < 5:
            return super().__reduce_ex__(protocol)
        dtypes: list[str | None] = []
        buffers: list[pickle.PickleBuffer | Column] = []
        for values in self._columns.values():
            wire = _WIRE_DTYPES.get(values.dtype) or _wire_dtype(values.dtype)
            if wire.name is None or not values.flags.c_contiguous:
                dtypes.append(None)
                buffers.append(values)
            else:
                dtypes.append(wire.name)
                exported = values if wire.exports_buffer else values.view(np.uint8).data
                buffers.append(pickle.PickleBuffer(exported))  # type: ignore[arg-type]  # numpy exports buffers
        return (_from_buffers, (list(self._columns), dtypes, buffers, self.timestamp))

    def __repr__(self) -> str:
        return f"ColumnBatch({len(self)} rows, columns={self.names}, timestamp={self.timestamp!r})"

    def timestamps(self) -> Column:
        """The timestamp column (raises ``ValueError`` when the batch has none)."""
        if self.timestamp is None:
            raise ValueError("this ColumnBatch has no timestamp column")
        return self._columns[self.timestamp]

    def max_timestamp(self) -> int:
        """The highest event time of the batch: its native timestamp as an item of a stream."""
        return int(self.timestamps().max())

    def filter(self, mask: Column) -> ColumnBatch:
        """The rows where the boolean ``mask`` (one entry per row) is true."""
        mask = np.asarray(mask)
        if mask.dtype != np.bool_ or mask.shape != (self._length,):
            raise ValueError(f"a filter mask must be {self._length} booleans, got {mask.dtype} {mask.shape}")
        return ColumnBatch.unchecked(
            {name: values[mask] for name, values in self._columns.items()}, self.timestamp
        )

    def with_columns(self, **columns: Column) -> ColumnBatch:
        """This batch with columns replaced or added (the other arrays are shared, not copied)."""
        merged = dict(self._columns)
        for name, given in columns.items():
            values = np.asarray(given)
            if values.shape != (self._length,):
                raise ValueError(f"column {name!r} has shape {values.shape}, the batch {self._length} rows")
            merged[name] = values
        return ColumnBatch.unchecked(merged, self.timestamp)

    def select(self, *names: str) -> ColumnBatch:
        """Only the columns ``names``, in that order (keeps the timestamp column's name if selected)."""
        timestamp = self.timestamp if self.timestamp in names else None
        return ColumnBatch.unchecked({name: self._columns[name] for name in names}, timestamp)

    def rows(self) -> list[tuple[Any, ...]]:
        """The rows as tuples of Python values, in column order (for tests and small results)."""
        return list(zip(*(values.tolist() for values in self._columns.values()), strict=True))

    @staticmethod
    def concat(batches: Sequence[ColumnBatch]) -> ColumnBatch:
        """The rows of ``batches`` (same column names) one after another."""
        if not batches:
            raise ValueError("concat needs at least one batch")
        first = batches[0]
        return ColumnBatch.unchecked(
            {name: np.concatenate([b._columns[name] for b in batches]) for name in first._columns},
            first.timestamp,
        )

    @staticmethod
    def from_rows(
        names: Sequence[str], rows: Iterable[Sequence[Any]], timestamp: str | None = None
    ) -> ColumnBatch:
        """A batch of ``rows`` (tuples in the order of ``names``), e.g. from row-path items."""
        listed = list(rows)
        return ColumnBatch(
            {name: np.array([row[i] for row in listed]) for i, name in enumerate(names)}, timestamp
        )

    def to_arrow(self) -> Any:
        """This batch as a ``pyarrow.RecordBatch`` (needs pyarrow; numeric columns are not copied)."""
        import pyarrow  # optional: imported only for this conversion

        return pyarrow.RecordBatch.from_arrays(
            [pyarrow.array(values) for values in self._columns.values()], names=self.names
        )

    @staticmethod
    def from_arrow(record_batch: Any, timestamp: str | None = None) -> ColumnBatch:
        """A batch from a ``pyarrow.RecordBatch`` (numeric columns without nulls are not copied)."""
        return ColumnBatch(
            {
                name: record_batch.column(i).to_numpy(zero_copy_only=False)
                for i, name in enumerate(record_batch.schema.names)
            },
            timestamp,
        )

    @staticmethod
    def unchecked(columns: dict[str, Column], timestamp: str | None) -> ColumnBatch:
        """A batch of 1-D arrays of one length, as they are (no checks: for sources and derived batches)."""
        batch = ColumnBatch.__new__(ColumnBatch)
        batch._columns = columns
        batch._length = len(next(iter(columns.values()))) if columns else 0
        batch.timestamp = timestamp
        return batch


class _WireDtype(NamedTuple):
    """How a column of one dtype pickles out of band: its dtype's name (None: as an array) and whether
    the array itself exports a buffer (datetimes do not: their bytes are viewed as ``uint8``)."""

    name: str | None
    exports_buffer: bool


_WIRE_DTYPES: dict[np.dtype[Any], _WireDtype] = {}
_DTYPES: dict[str, np.dtype[Any]] = {}
_CACHE_LIMIT = 256


def _wire_dtype(dtype: np.dtype[Any]) -> _WireDtype:
    plain = not dtype.hasobject and dtype.fields is None and dtype.itemsize > 0
    wire = _WireDtype(dtype.str if plain else None, dtype.kind in "biufcSU")
    if len(_WIRE_DTYPES) < _CACHE_LIMIT:
        _WIRE_DTYPES[dtype] = wire
    return wire


def _dtype(column: str, name: str) -> np.dtype[Any]:
    """The plain dtype ``name`` of ``column`` (``ValueError`` for an unknown, object or empty one)."""
    try:
        dtype = np.dtype(name)
    except TypeError as exc:
        raise ValueError(f"corrupt ColumnBatch: column {column!r} has no dtype {name!r}") from exc
    if dtype.hasobject or dtype.fields is not None or not dtype.itemsize:
        raise ValueError(f"corrupt ColumnBatch: column {column!r} cannot be made of bytes as {name}")
    if len(_DTYPES) < _CACHE_LIMIT:
        _DTYPES[name] = dtype
    return dtype


def _from_buffers(
    names: list[str], dtypes: list[str | None], buffers: list[Any], timestamp: str | None
) -> ColumnBatch:
    """The batch :meth:`ColumnBatch.__reduce_ex__` reduced (columns of ``buffers`` without a copy).

    Raises ``ValueError`` naming the problem when the parts do not make a batch.
    """
    if not len(names) == len(dtypes) == len(buffers):
        raise ValueError(
            f"corrupt ColumnBatch: {len(names)} column names, {len(dtypes)} dtypes and {len(buffers)} buffers"
        )
    columns: dict[str, Column] = {}
    length = -1
    for name, dtype_name, buffer in zip(names, dtypes, buffers, strict=True):
        if dtype_name is None:
            values = buffer
            if type(values) is not np.ndarray or values.ndim != 1:
                raise ValueError(f"corrupt ColumnBatch: column {name!r} is not a one-dimensional array")
        else:
            dtype = _DTYPES.get(dtype_name) or _dtype(name, dtype_name)
            try:
                values = np.frombuffer(buffer, dtype=dtype)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"corrupt ColumnBatch: column {name!r} of {memoryview(buffer).nbytes} bytes "
                    f"is not a whole number of {dtype_name}: {exc}"
                ) from exc
        if len(values) != length and length >= 0:
            raise ValueError(f"corrupt ColumnBatch: columns {names} differ in length")
        length = len(values)
        columns[name] = values
    if len(columns) != len(names):
        raise ValueError(f"corrupt ColumnBatch: columns {names} repeat a name")
    if timestamp is not None and timestamp not in columns:
        raise ValueError(f"corrupt ColumnBatch: no timestamp column {timestamp!r} among {names}")
    return ColumnBatch.unchecked(columns, timestamp)
