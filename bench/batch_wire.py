"""Encode + decode CPU time of a record batch on a network edge: before, after, and Arrow IPC.

A packet of one NEXMark bid batch (1,024 rows by default, ``--rows``; auction, bidder, price,
date_time as int64), taken through the sender's encoding and the receiver's decoding, in
interleaved rounds:

* ``v2-inband``: the protocol-2 packet, one pickle with the columns pickled in band by numpy
  (``ColumnBatch``'s ``__getstate__``), decoded by ``pickle.loads``;
* ``v3-oob``: what :mod:`jetlet._network.tasklets` does now (protocol 3): the columns as
  out-of-band buffers after the pickle, decoded as views of the payload;
* ``arrow-ipc``: the batch as an Arrow IPC stream (``ColumnBatch.to_arrow``, one stream writer)
  and back (``open_stream``, ``ColumnBatch.from_arrow``), the batch alone, without a packet.

Prints the median, minimum and maximum CPU µs (``time.process_time``) per batch over the rounds
and checks every variant's decoded rows against the batch. Run ``python bench/batch_wire.py``
(``--rounds``, ``--iterations``, ``--rows``).
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from jetlet import _pickling
from jetlet._network import tasklets as remote
from jetlet.batches import ColumnBatch
from jetlet.nexmark.batch_source import bid_batch
from jetlet.nexmark.fast_generator import FastConfig


def _v2_round_trip(chunks: list[tuple[int, int, int, Any]]) -> ColumnBatch:
    """Protocol 2: ``_pickling.dumps`` of the packet with the batch's arrays in band, ``pickle.loads``."""
    reduce = ColumnBatch.__reduce_ex__
    ColumnBatch.__reduce_ex__ = object.__reduce_ex__  # type: ignore[method-assign]  # the v2 reduction
    try:
        payload = _pickling.dumps((7, 3, 1, chunks))
    finally:
        ColumnBatch.__reduce_ex__ = reduce  # type: ignore[method-assign]
    batch: ColumnBatch = pickle.loads(payload)[3][0][3][0]
    return batch


def _v3_round_trip(chunks: list[tuple[int, int, int, Any]]) -> ColumnBatch:
    batch: ColumnBatch = remote._decode_packet(remote._encode_packet(7, 3, 1, chunks)).chunks[0][3][0]
    return batch


def _arrow_round_trip(batch: ColumnBatch) -> ColumnBatch:
    record_batch = batch.to_arrow()
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, record_batch.schema) as writer:
        writer.write_batch(record_batch)
    payload = sink.getvalue().to_pybytes()
    return ColumnBatch.from_arrow(ipc.open_stream(pa.py_buffer(payload)).read_next_batch(), batch.timestamp)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (default 9)")
    parser.add_argument("--iterations", type=int, default=2000, help="round trips per variant and round")
    parser.add_argument("--rows", type=int, default=1024, help="rows of the batch (default 1,024)")
    args = parser.parse_args(argv)
    rows: int = args.rows
    batch = bid_batch(range(0, rows * 50 // 46 + 64), FastConfig(rate=100_000, keys=10_000))
    batch = ColumnBatch.unchecked(
        {name: values[:rows].copy() for name, values in batch.columns.items()}, "date_time"
    )
    assert len(batch) == rows
    chunks: list[tuple[int, int, int, Any]] = [(0, 0, remote.DATA, [batch])]
    variants: dict[str, Callable[[], ColumnBatch]] = {
        "v2-inband": lambda: _v2_round_trip(chunks),
        "v3-oob": lambda: _v3_round_trip(chunks),
        "arrow-ipc": lambda: _arrow_round_trip(batch),
    }
    for name, variant in variants.items():
        if variant().rows() != batch.rows():
            raise SystemExit(f"{name} did not round-trip the batch")
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, variant in variants.items():
            start = time.process_time()
            for _ in range(args.iterations):
                variant()
            times[name].append((time.process_time() - start) / args.iterations * 1e6)
    print(f"encode+decode of one {rows}-row batch ({batch.names}), CPU µs, {args.rounds} interleaved rounds")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:10} median {median:7.2f}  min {min(values):7.2f}  max {max(values):7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
