"""Network benchmark: what one member-to-member connection carries, and what frame authentication costs.

* one connection alone: two :class:`~jetlet._network.transport.Transport`\\ s
  in this process on loopback, one sending ``count`` frames of a given
  payload size to the other; wall time from the first ``send`` until the
  receiver's ``on_message`` has seen the last frame, and the CPU time of the
  process (both ends: they share one GIL, as the members of a 2-core machine
  share its cores). Every frame after the handshake carries a 16-byte
  HMAC-SHA256 tag (computed by the sender's network thread, checked by the
  receiver's before the frame is handed on);
* the tag alone: the CPU time of sealing and checking one frame of each size
  (``FrameSealer.seal`` and ``FrameDecoder`` with ``authenticate``), in
  microseconds and as a share of the connection's CPU time per frame;
* a distributed edge with 1 KB items on 2 member processes (``local_cluster``):
  the items per second that crossed to the other member (best run) and the
  CPU time both member processes spent per run (median; needs psutil).

Run: ``python bench/network_bench.py [--repeats N] [--parts connection,edge]``.
Run against two trees (``PYTHONPATH=<tree>/worker``) for a before/after
comparison: the column that needs the tags shows a dash when the tree has none.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import _common
from jetlet._network import frames
from jetlet._network.frames import MessageType
from jetlet._network.transport import Transport
from jetlet.core import DAG, Edge, processors
from jetlet.local_cluster import local_cluster

SIZES = ((100, 100_000), (16 * 1024, 4_000), (1024 * 1024, 64))
"""(payload bytes, frames) per connection measurement: 10 MB of small frames, 64 MB of larger ones."""
EDGE_ITEMS = 200_000
EDGE_PAYLOAD = b"x" * 1000
SECRET = "network-bench-secret"


class _Receiver:
    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.frames = 0
        self.done = threading.Event()

    def on_message(self, peer: str, msg_type: MessageType, payload: bytes) -> None:
        self.frames += 1
        if self.frames == self.expected:
            self.done.set()


def _connection(size: int, count: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) to move ``count`` frames of ``size`` bytes over one connection."""
    receiver = _Receiver(count)
    a = Transport("a", SECRET, lambda *_: None, lambda _: None)
    b = Transport("b", SECRET, receiver.on_message, lambda _: None)
    try:
        a.start()
        address = b.start()
        a.connect("b", *address)
        payload = b"\x01" * size
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(count):
            a.send("b", MessageType.DATA, payload)
        if not receiver.done.wait(300):
            raise AssertionError(f"only {receiver.frames} of {count} frames arrived")
        return time.perf_counter() - wall, time.process_time() - cpu
    finally:
        a.close()
        b.close()


def _tag_cost_us(size: int) -> float | None:
    """CPU microseconds to seal and check one frame of ``size`` bytes; None without tags."""
    if not hasattr(frames, "FrameSealer"):
        return None
    key = bytes(range(32))
    count = max(50, min(20_000, 50_000_000 // max(size, 1)))
    frame = frames.encode_frame(MessageType.DATA, b"\x01" * size)
    sealer, decoder = frames.FrameSealer(key), frames.FrameDecoder()
    decoder.authenticate(key)
    started = time.process_time()
    for _ in range(count):
        decoder.feed(frame + sealer.seal(frame))
    sealed = (time.process_time() - started) / count
    plain_decoder = frames.FrameDecoder()
    started = time.process_time()
    for _ in range(count):
        plain_decoder.feed(frame)
    plain = (time.process_time() - started) / count
    return max(0.0, sealed - plain) * 1e6


def _identity_key(item: tuple[int, bytes]) -> int:
    return item[0]


def _members_cpu_s() -> float | None:
    """CPU seconds used so far by this process's child processes (the members), or None without psutil."""
    try:
        import psutil
    except ImportError:
        return None
    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def _edge(client: Any) -> tuple[float, int]:
    dag = DAG()
    source = dag.new_vertex(
        "source", processors.source_from_iterable([(i, EDGE_PAYLOAD) for i in range(EDGE_ITEMS)])
    )
    sink = dag.new_vertex("sink", processors.noop_p(), 1)
    dag.edge(Edge.between(source, sink).partitioned(_identity_key).distributed())
    started = time.perf_counter()
    job = client.new_job(dag)
    job.join()
    seconds = time.perf_counter() - started
    crossed = sum(v.get("distributedItemsOut", 0) for v in job.metrics().values())
    return seconds, crossed


def _connection_table(repeats: int) -> str:
    rows = []
    for size, count in SIZES:
        best_wall, best_cpu = float("inf"), float("inf")
        for _ in range(repeats):
            wall, cpu = _connection(size, count)
            best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
        tag = _tag_cost_us(size)
        cpu_per_frame_us = best_cpu / count * 1e6
        rows.append(
            [
                f"{size:,} B",
                f"{count:,}",
                f"{count / best_wall:,.0f}",
                f"{size * count / best_wall / 1e6:,.0f}",
                f"{cpu_per_frame_us:,.1f}",
                "—" if tag is None else f"{tag:,.1f} ({tag / cpu_per_frame_us:.0%})",
            ]
        )
    authenticated = hasattr(frames, "FrameSealer")
    tags = "carry a 16-byte HMAC-SHA256 tag" if authenticated else "carry no tag"
    return (
        f"Frames after the handshake {tags}. One connection between two transports in one process; best of "
        f"{repeats}; CPU is the process's (sender and receiver); the tag column is sealing plus checking one "
        "frame alone, and its share of the connection's CPU per frame.\n\n"
        + _common.markdown_table(
            ["payload", "frames", "frames/s", "MB/s", "CPU µs/frame", "tag µs/frame (share)"], rows
        )
    )


def _edge_line(repeats: int) -> str:
    with local_cluster(2, ["--flow-control-period-millis", "10"]) as client:
        _edge(client)  # warm-up: the members import and connect
        best_seconds, crossed, cpus = float("inf"), 0, []
        for _ in range(repeats):
            before = _members_cpu_s()
            seconds, crossed = _edge(client)
            after = _members_cpu_s()
            best_seconds = min(best_seconds, seconds)
            if before is not None and after is not None:
                cpus.append(after - before)
    items_per_s = crossed / best_seconds
    cpu = f"; the members used {statistics.median(cpus):.2f} CPU-seconds per run (median)" if cpus else ""
    return (
        f"A distributed edge: 2 member processes, {EDGE_ITEMS:,} items of {len(EDGE_PAYLOAD):,} bytes "
        f"partitioned over both (flow-control period 10 ms); {crossed:,} crossed at {items_per_s:,.0f} "
        f"items/s (best of {repeats}){cpu}.\n"
    )


def main(argv: Sequence[str] = ()) -> str:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--parts", default="connection,edge")
    known, rest = parser.parse_known_args(list(argv))
    parts = set(known.parts.split(","))
    repeats = _common.parse_repeats(rest, "Network benchmark (one connection; a distributed edge)")
    text = "## Network (one connection on loopback; a distributed edge)\n\n"
    if "connection" in parts:
        text += _connection_table(repeats) + "\n"
    if "edge" in parts:
        text += _edge_line(repeats)
    return text


if __name__ == "__main__":
    print(main(sys.argv[1:]))
