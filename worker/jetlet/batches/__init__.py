"""The record-batch path: stages over numpy columns, paying the engine's cost per batch, not per row.

* :class:`ColumnBatch` (:mod:`~jetlet.batches.column_batch`): rows as named numpy columns with a
  timestamp column, the item that flows;
* ``StreamStage.map_batches(fn)`` and ``StreamStage.filter_batches(fn)`` (in
  :mod:`jetlet.pipeline.stages`): a function of a whole batch;
* :func:`aggregate_windows` (:mod:`~jetlet.batches.windows`): vectorised tumbling and sliding
  window count, sum, min and max keyed by a column, and :func:`top_k` of a window's result;
* :func:`~jetlet.batches.parquet.parquet_batches`: Parquet files as a batch source of batches
  (needs pyarrow);
* :func:`jetlet.nexmark.batch_source.batch_nexmark_source`: NEXMark bids as batches, and
  :mod:`jetlet.nexmark.batch_queries`: queries 1, 2 and 5 on them.

This package needs numpy (``pip install 'jetlet[batches]'``); pyarrow only for
:meth:`ColumnBatch.to_arrow` and :meth:`ColumnBatch.from_arrow`.
"""

from jetlet.batches.column_batch import ColumnBatch

__all__ = ["ColumnBatch"]
