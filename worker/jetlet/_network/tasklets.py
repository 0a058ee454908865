"""Distributed edges: sender and receiver tasklets between members, with Jet's flow control.

On a cluster every member runs the whole DAG. A *distributed* edge connects
each producer with the consumers of every member; the consumers on this
member are fed through ordinary local queues, the ones on another member
through a pair of tasklets:

* producer ``p`` writes the share of remote consumer ``c`` of member ``m``
  into an outbound :class:`~jetlet._execution.queues.SpscQueue` (so the
  producer sees the same backpressure as on a local edge);
* one :class:`SenderTasklet` per (edge, remote member) drains those queues
  into :class:`Packet` objects of at most ``packet_size_limit`` items and
  hands them to ``send(member, message)`` (the member's network layer
  puts them onto the one TCP connection between the two members). A
  packet is serialized by the sender tasklet itself (:func:`bounded_packets`)
  so that it is bounded in bytes as well: one whose payload would exceed
  ``max_frame_bytes`` (the receiver's frame limit) is split, by chunks and
  then within a chunk's items, until every part fits; an item that alone
  exceeds the limit fails the job with :class:`FrameTooLargeError`, naming
  its size and the limit, instead of a frame that the receiver would refuse
  by dropping the whole connection;
* one :class:`ReceiverTasklet` per (edge, source member) takes the packets
  that the network thread :meth:`RemoteLinks.deliver`\\ s and puts each chunk
  into the inbound queue of the pair (remote producer ``p``, local consumer
  ``c``), which the consumer reads like any other input. Watermarks and the
  done marker travel as chunks of their own, in order with the data, so
  watermark coalescing and completion work exactly as on local edges.

The wire format of a packet (``DATA`` frame payload, protocol version 4) is
its route, then *one* pickle (protocol 5) of its chunks, with the pickle's
out-of-band buffers after it::

    +---------------------------------------+-----------------+-------------------------+--------+---------+
    | job (8 B) | edge (4 B) | source (4 B) | count (4 B, BE) | count lengths (8 B, BE) | pickle | buffers |
    +---------------------------------------+-----------------+-------------------------+--------+---------+

The route is all the network thread reads (:func:`packet_route`): it hands
the payload as it came to the receiver tasklet of that edge and source, and
the receiver decodes it (:func:`decode_chunks`) on the cooperative thread, as
Jet's ``ReceiverTasklet`` deserializes what its network thread enqueued. So
the records are made on the thread that processes them next, and the network
thread holds the GIL only to read frames: on NEXMark Q4 over two members it
had spent 0.4 µs per event unpickling, competing with the cooperative thread
for the GIL. A payload that does not decode fails the job with an error
naming the problem (the receiver tasklet raises, as a Jet job fails on a
deserialization error), instead of being dropped with a log line on the
network thread while the job went on without its items.

Out-of-band buffers are what a record batch's columns become: a
:class:`~jetlet.batches.ColumnBatch` reduces each plain-dtype column to its
dtype's name and a ``PickleBuffer`` of its bytes, so its rows are never
copied into the pickle nor visited one by one, and the receiver's columns are
``np.frombuffer`` views of the frame's payload (no copy; so a column kept in
state keeps its whole frame's payload alive while it lives). Row items have no
such buffers (``count`` is 0), and a packet may mix both. A table that does
not fit in the payload, or buffers that do not make the batch their pickle
describes (a size that is not a whole number of its dtype, columns of
different lengths), raise :class:`~jetlet._network.serialization.SerializationError`
naming the problem. Encode plus decode of a 1,024-row batch of four int64
columns measured 26 µs of CPU against 38-40 for protocol 2's in-band pickle
and 106-110 for an Arrow IPC stream through pyarrow's Python API (52, 480 and
199 µs at 16,384 rows; ``bench/batch_wire.py``). The C pickler
walks the whole packet (every chunk's list of items, the watermarks and
barriers between them) in one call, with no Python step per item in jetlet's
code, and memoizes each class reference once per packet; the receiver
decodes a frame with one ``pickle.loads``. Consecutive data chunks of one
producer and consumer travel as one (a queue holds one batch per element). A
data chunk of records that declare their fields (``__jetlet_fields__``) or of
plain tuples, bare or as ``(timestamp, record)`` events, travels as a ``ROWS``
chunk (:mod:`jetlet._network.rows`): tuples of the records' fields, plain
values as they are, so that the pickler writes plain values instead of
reducing every record (a NEXMark ``Bid``: 0.3-0.55 µs to encode instead of
0.8-1.6). Items the C pickler cannot pickle
by reference (lambdas, classes that exist only by value) make the whole
packet go through cloudpickle instead (:func:`jetlet._pickling.dumps`).
Issue 20 measured the per-item msgpack extensions this replaces at 9-16 µs
per event for encode plus decode, against about 1.7 for the packet's pickle.
Unpickling is safe here only because a ``DATA`` frame reaches
:func:`decode_message` after the transport has checked that it comes from an
authenticated member (its HMAC tag, or TLS): see
:mod:`jetlet._network.transport`. A payload that does not unpickle to a
packet of the right shape raises :class:`~jetlet._network.serialization.SerializationError`.
Acks stay msgpack (five ints, nothing to unpickle).

Flow control is Jet's adaptive receive window, counted in items
(:mod:`jetlet._network.flow_control`): the receiver acknowledges every
``flow_control_period_millis`` with the count of items it has delivered and
the limit up to which the sender may send (an :class:`Ack`); the window
adapts to the rate of delivery. A sender never sends past its limit, so a
slow consumer on one member slows the producers on every member, and only
them. A sender with ``max_in_flight_bytes`` (its share of the member's
``max_queued_bytes``) also keeps the payload bytes it sent beyond what the
receiver took in under that bound, so large items do not fill a window of
thousands of them: it estimates the items' weight from its last packets (the
first time, by :func:`~jetlet._execution.sizing.item_bytes`), and always
sends at least one item when nothing is in flight. Messages here are plain
Python objects; the member serializes them.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import pickle
import struct
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from jetlet import _pickling, config
from jetlet._execution import queues, sizing, snapshots
from jetlet._execution.progress import ProgressState, Tasklet, call_times
from jetlet._network import flow_control, frames, rows, serialization
from jetlet._network.frames import MessageType
from jetlet.core import watermark as wm

DATA = 0
WATERMARK = 1
DONE = 2
BARRIER = 3
ROWS = 4
"""On the wire only: a ``DATA`` chunk as :data:`jetlet._network.rows.Rows`."""


class FrameTooLargeError(ValueError):
    """One item of a distributed edge serializes to more bytes than a frame may carry."""


@dataclasses.dataclass(frozen=True, slots=True)
class Packet:
    """Items of one edge from one member to another: ``chunks`` of ``(producer, consumer, kind, payload)``."""

    job_id: int
    edge_id: int
    source_member: int
    chunks: list[tuple[int, int, int, Any]]
    encoded: bytes | None = dataclasses.field(default=None, compare=False, repr=False)
    """The frame payload, when the sender already serialized the packet (see :func:`bounded_packets`)."""


class LinkCounters(NamedTuple):
    """One sender's or receiver's totals: Jet's ``distributedItemsOut/In`` and ``distributedBytesOut/In``."""

    outbound: bool
    edge_id: int
    member: int
    """The member index at the other end."""
    items: int
    bytes: int


@dataclasses.dataclass(frozen=True, slots=True)
class Ack:
    """The receiver's flow-control message: it has processed ``processed`` data items (cumulative) and
    the sender may send up to ``limit``."""

    job_id: int
    edge_id: int
    receiver_member: int
    processed: int
    limit: int


@dataclasses.dataclass(frozen=True)
class FlowSettings:
    """Jet's names: the ack period, the window multiplier; the packet size and first window in items."""

    flow_control_period_millis: int = flow_control.DEFAULT_PERIOD_MILLIS
    receive_window_multiplier: int = flow_control.DEFAULT_MULTIPLIER
    packet_size_limit: int = 4096
    initial_window: int = 16_384
    max_frame_bytes: int = frames.DEFAULT_MAX_FRAME_SIZE
    """Largest packet payload in bytes: the receiving transport's frame limit."""
    buffer_timeout_millis: int = config.EdgeConfig.buffer_timeout_millis
    """Longest a partial packet waits for more items (:class:`SenderTasklet`); 0: none."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            least = 0 if field.name == "buffer_timeout_millis" else 1
            if not isinstance(value, int) or value < least:
                raise ValueError(f"FlowSettings.{field.name} must be an int >= {least}, got {value!r}")


Send = Callable[[int, object], None]
"""``send(member_index, message)``: hand a Packet or Ack to the network; must not block."""


_WAITING = ProgressState.of(False, False)
_LONG_AGO = float("-inf")


class SenderTasklet(Tasklet):
    """Drains one edge's outbound queues for one remote member into packets, within the flow-control limit.

    A partial packet waits, as Flink's output buffers do for their buffer timeout: the sender sends
    once its queues hold three quarters of what they can (or a full packet, or all the flow-control
    window allows), or once the first item queued has waited ``buffer_timeout_millis``, or at once
    when a control item (a watermark, a barrier, the done marker) is queued: the receiver cannot
    close a window, expire a key or align a snapshot before it has that item and everything sent
    before it, so holding the data ahead of it only delays the downstream. Each packet costs the
    member a fixed amount beyond its items (encoding, a frame, a wake-up of the network thread,
    which then takes the GIL from the cooperative thread, the same at the receiver): sending on
    every pass made packets of a pass's share of a chunk (about 500 NEXMark events, 17 on Q4's
    second edge); waiting up to 2 ms doubled them and made Q4 and Q6 on two members about 1.1
    times as fast, and the 10 ms default raised the median scaling of Q3, Q4, Q6 and Q8 by another
    3-7 % (bench/RESULTS.md).
    """

    def __init__(
        self,
        job_id: int,
        edge_id: int,
        member: int,
        dest_member: int,
        send: Send,
        settings: FlowSettings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = f"sender(edge {edge_id} -> member {dest_member})"
        self._job_id = job_id
        self._edge_id = edge_id
        self._member = member
        self._dest = dest_member
        self._send = send
        self._packet_limit = settings.packet_size_limit
        self._max_frame_bytes = settings.max_frame_bytes
        self.queues: list[tuple[int, int, queues.SpscQueue]] = []
        self._finished: set[int] = set()
        self.window = flow_control.SendWindow(settings.initial_window)
        self.sent_packets = 0
        self.sent_bytes = 0
        """Payload bytes of the packets sent (Jet's ``distributedBytesOut``)."""
        self.max_in_flight = 0
        """The most items ever sent beyond what the receiver had processed (bounded by the window)."""
        self.receiver_processed = 0
        self._held: dict[int, list[Any]] = {}
        self.max_in_flight_bytes = 0
        """Most payload bytes sent and not yet taken in by the receiver; 0: bounded in items only."""
        self._item_bytes = 0
        """Payload bytes per item, as the last packets had them (0: not known yet)."""
        self._marks: deque[tuple[int, int]] = deque()
        """``(items sent, bytes sent)`` after each call that sent data, until the receiver passes it."""
        self._acked_bytes = 0
        self._buffer_timeout_s = settings.buffer_timeout_millis / 1000
        self._clock = clock
        self._waiting_since: float | None = None
        """When the sender first saw data it has not sent (None: nothing waits)."""
        self._enough = 1
        """Items worth a packet without waiting: three quarters of the queues, at most a packet."""

    def add_queue(self, producer: int, consumer: int, queue: queues.SpscQueue) -> None:
        self.queues.append((producer, consumer, queue))
        capacity = sum(queue.capacity for _, _, queue in self.queues)
        self._enough = max(1, min(self._packet_limit, capacity * 3 // 4))

    def _should_wait(self) -> bool:
        """True while what is queued is a partial packet younger than the buffer timeout."""
        queued = sum(len(held) for held in self._held.values())
        for _, _, queue in self.queues:
            if queue.holds_control():  # what is behind it cannot be waited for: the receiver needs it now
                self._waiting_since = None
                return False
            queued += queue.size()
        if queued == 0:
            self._waiting_since = None
            return False
        if queued >= min(self._enough, self.window.room()):
            return False
        now = self._clock()
        if self._waiting_since is None:
            self._waiting_since = now
        return now - self._waiting_since < self._buffer_timeout_s

    @property
    def sent_items(self) -> int:
        return self.window.sent_seq

    def on_ack(self, ack: Ack) -> None:
        """Called from the network thread; plain int stores are atomic in CPython."""
        self.window.on_ack(ack.limit)
        self.receiver_processed = max(self.receiver_processed, ack.processed)

    def in_flight_bytes(self) -> int:
        """Payload bytes sent beyond what the receiver took in (an upper bound: whole calls' worth)."""
        marks, processed = self._marks, self.receiver_processed
        while marks and marks[0][0] <= processed:
            self._acked_bytes = marks.popleft()[1]
        return self.sent_bytes - self._acked_bytes

    def _byte_budget(self, first_item: Any) -> int:
        """Items that still fit within ``max_in_flight_bytes`` (at least 1 when nothing is in flight)."""
        weight = self._item_bytes or sizing.item_bytes(first_item) or 1
        in_flight = self.in_flight_bytes()
        if not in_flight:
            return max(1, self.max_in_flight_bytes // weight)
        return max(0, (self.max_in_flight_bytes - in_flight) // weight)

    def call(self) -> ProgressState:
        if self._buffer_timeout_s and self._should_wait():
            return _WAITING
        chunks: list[tuple[int, int, int, Any]] = []
        budget = min(self._packet_limit, self.window.room())
        bytes_checked = not self.max_in_flight_bytes
        taken = 0
        for index, (producer, consumer, queue) in enumerate(self.queues):
            if index in self._finished:
                continue
            held = self._held.pop(index, None)
            while True:
                element = held if held is not None else queue.poll()
                held = None
                if element is None:
                    break
                if type(element) is list:
                    if not bytes_checked:
                        budget = min(budget, self._byte_budget(element[0]))
                        bytes_checked = True
                    if budget - taken <= 0:
                        self._held[index] = element
                        break
                    room = budget - taken
                    if len(element) > room:
                        self._held[index] = element[room:]
                        element = element[:room]
                    chunks.append((producer, consumer, DATA, element))
                    taken += len(element)
                    if index in self._held:
                        break
                elif element is queues.DONE_ITEM:
                    chunks.append((producer, consumer, DONE, None))
                    self._finished.add(index)
                    break
                elif isinstance(element, wm.Watermark):
                    chunks.append((producer, consumer, WATERMARK, element.timestamp))
                elif type(element) is snapshots.SnapshotBarrier:
                    chunks.append((producer, consumer, BARRIER, [element.snapshot_id, element.terminal]))
                else:
                    raise TypeError(f"{self.name}: cannot send control item {element!r}")
        if chunks:
            packets = bounded_packets(
                self._job_id, self._edge_id, self._member, chunks, self._max_frame_bytes
            )
            sent_before = self.sent_bytes
            for packet in packets:
                self._send(self._dest, packet)
                self.sent_bytes += len(packet.encoded or b"")
            self.window.sent(taken)
            if taken and self.max_in_flight_bytes:
                self._item_bytes = max(1, (self.sent_bytes - sent_before) // taken)
                self._marks.append((self.window.sent_seq, self.sent_bytes))
            self.sent_packets += len(packets)
            in_flight = self.sent_items - self.receiver_processed
            if in_flight > self.max_in_flight:
                self.max_in_flight = in_flight
        # What the window or the byte bound held back has waited already: it goes on the next call.
        self._waiting_since = _LONG_AGO if self._held else None
        done = len(self._finished) == len(self.queues) and not self._held
        return ProgressState.of(bool(chunks), done)


class ReceiverTasklet(Tasklet):
    """Puts the packets of one edge from one source member into the local consumers' queues; sends acks."""

    def __init__(
        self,
        job_id: int,
        edge_id: int,
        member: int,
        source_member: int,
        send: Send,
        settings: FlowSettings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = f"receiver(edge {edge_id} <- member {source_member})"
        self._job_id = job_id
        self._edge_id = edge_id
        self._member = member
        self._source = source_member
        self._send = send
        self._clock = clock
        self._period = settings.flow_control_period_millis / 1000
        self._next_ack = 0.0
        self.window = flow_control.ReceiveWindow(
            settings.receive_window_multiplier,
            settings.initial_window,
            floor=min(settings.packet_size_limit, settings.initial_window),
            period_ms=settings.flow_control_period_millis,
        )
        self.max_window = settings.initial_window
        """The largest window this receiver ever granted."""
        self.incoming: deque[Packet | bytes] = deque()
        """Packets, or ``DATA`` payloads still to decode; appended by the network thread (deque.append is
        atomic), consumed here."""
        self.queues: dict[tuple[int, int], queues.SpscQueue] = {}
        self._pending: dict[tuple[int, int], deque[tuple[int, Any]]] = {}
        self._open = 0
        self.received_items = 0
        self.received_bytes = 0
        """Payload bytes of the packets received (Jet's ``distributedBytesIn``), counted by ``deliver``."""

    def add_queue(self, producer: int, consumer: int, queue: queues.SpscQueue) -> None:
        self.queues[(producer, consumer)] = queue
        self._pending[(producer, consumer)] = deque()
        self._open += 1

    def call(self) -> ProgressState:
        progress = False
        incoming = self.incoming
        while incoming:
            packet = incoming.popleft()
            chunks = packet.chunks if isinstance(packet, Packet) else decode_chunks(packet)
            for producer, consumer, kind, payload in chunks:
                self._pending[(producer, consumer)].append((kind, payload))
            progress = True
        delivered = 0
        for pair, pending in self._pending.items():
            if pending:
                moved, closed = self._deliver(self.queues[pair], pending)
                delivered += moved
                if closed:
                    self._open -= 1
                    progress = True
        if delivered:
            self.received_items += delivered
            self.window.processed(delivered)
            progress = True
        now = self._clock()
        if now >= self._next_ack:
            self._next_ack = now + self._period
            waiting = sum(len(pending) for pending in self._pending.values())
            limit = self.window.ack(now * 1000, waiting)
            self.max_window = max(self.max_window, self.window.window)
            self._send(self._source, Ack(self._job_id, self._edge_id, self._member, self.window.acked, limit))
        return ProgressState.of(progress, self._open == 0)

    @staticmethod
    def _deliver(queue: queues.SpscQueue, pending: deque[tuple[int, Any]]) -> tuple[int, bool]:
        """Move what fits of ``pending`` into ``queue`` in order; return (data items moved, done seen)."""
        moved = 0
        while pending:
            kind, payload = pending[0]
            if kind == DATA:
                taken = queue.offer_batch(payload)
                moved += taken
                if taken < len(payload):
                    pending[0] = (DATA, payload[taken:])
                    return moved, False
            elif kind == WATERMARK:
                queue.offer_control(wm.Watermark(payload))
            elif kind == BARRIER:
                queue.offer_control(snapshots.SnapshotBarrier(int(payload[0]), bool(payload[1])))
            else:
                queue.offer_control(queues.DONE_ITEM)
                pending.popleft()
                return moved, True
            pending.popleft()
        return moved, False


class RemoteLinks:
    """The distributed edges of one job on one member: their queues, tasklets and message routing."""

    def __init__(
        self,
        job_id: int,
        member_index: int,
        send: Send,
        settings: FlowSettings | None = None,
        edge_settings: Mapping[int, FlowSettings] | None = None,
    ) -> None:
        self.job_id = job_id
        self.member_index = member_index
        self._send = send
        self.settings = settings or FlowSettings()
        self._edge_settings = dict(edge_settings or {})
        self.senders: dict[tuple[int, int], SenderTasklet] = {}
        self.receivers: dict[tuple[int, int], ReceiverTasklet] = {}

    def settings_for(self, edge_id: int) -> FlowSettings:
        """The flow settings of edge ``edge_id``: its own (``edge_settings``), else the job's."""
        return self._edge_settings.get(edge_id, self.settings)

    def outbound_queue(
        self, edge_id: int, dest_member: int, producer: int, consumer: int, capacity: int, name: str
    ) -> queues.SpscQueue:
        """The queue from local ``producer`` to ``consumer`` of ``dest_member`` (drained by a sender)."""
        sender = self.senders.get((edge_id, dest_member))
        if sender is None:
            settings = self.settings_for(edge_id)
            sender = SenderTasklet(self.job_id, edge_id, self.member_index, dest_member, self._send, settings)
            self.senders[(edge_id, dest_member)] = sender
        queue = queues.SpscQueue(capacity, name)
        sender.add_queue(producer, consumer, queue)
        return queue

    def inbound_queue(
        self, edge_id: int, source_member: int, producer: int, consumer: int, capacity: int, name: str
    ) -> queues.SpscQueue:
        """The queue from ``producer`` of ``source_member`` to local ``consumer`` (fed by a receiver)."""
        receiver = self.receivers.get((edge_id, source_member))
        if receiver is None:
            settings = self.settings_for(edge_id)
            receiver = ReceiverTasklet(
                self.job_id, edge_id, self.member_index, source_member, self._send, settings
            )
            self.receivers[(edge_id, source_member)] = receiver
        queue = queues.SpscQueue(capacity, name)
        receiver.add_queue(producer, consumer, queue)
        return queue

    def tasklets(self) -> list[Tasklet]:
        return [*self.senders.values(), *self.receivers.values()]

    def sender_count(self) -> int:
        return len(self.senders)

    def bound_senders(self, max_in_flight_bytes: int) -> None:
        for sender in self.senders.values():
            sender.max_in_flight_bytes = max_in_flight_bytes

    def deliver(self, message: object, size: int = 0) -> None:
        """Route a message from the network (any thread) to its tasklet; ``size``: its payload's bytes."""
        if isinstance(message, Packet):
            self._receiver_of(message.edge_id, message.source_member, size).incoming.append(message)
        elif isinstance(message, Ack):
            sender = self.senders.get((message.edge_id, message.receiver_member))
            if sender is None:
                raise ValueError(
                    f"job {self.job_id}: an ack for edge {message.edge_id} from member "
                    f"{message.receiver_member}, to which this member sends nothing"
                )
            sender.on_ack(message)
        else:
            raise TypeError(f"job {self.job_id}: unknown network message {type(message).__qualname__}")

    def deliver_payload(self, edge_id: int, source_member: int, payload: bytes) -> None:
        """Hand a ``DATA`` payload (routed by :func:`packet_route`) to its receiver, which decodes it."""
        self._receiver_of(edge_id, source_member, len(payload)).incoming.append(payload)

    def _receiver_of(self, edge_id: int, source_member: int, size: int) -> ReceiverTasklet:
        receiver = self.receivers.get((edge_id, source_member))
        if receiver is None:
            raise ValueError(
                f"job {self.job_id}: a packet for edge {edge_id} from member "
                f"{source_member}, which sends nothing to this member"
            )
        receiver.received_bytes += size  # one thread (the network's) writes it
        return receiver

    def counters(self) -> list[LinkCounters]:
        """What each sender sent and each receiver received, by edge and remote member."""
        out = [
            LinkCounters(True, edge_id, member, sender.sent_items, sender.sent_bytes)
            for (edge_id, member), sender in self.senders.items()
        ]
        out.extend(
            LinkCounters(False, edge_id, member, receiver.received_items, receiver.received_bytes)
            for (edge_id, member), receiver in self.receivers.items()
        )
        return out

    def metrics(self) -> dict[str, dict[str, int]]:
        """Per sender and receiver: items and packets sent or received, the largest in-flight amount,
        and the call times as for processors (``busyTimeMicros``, ``longestCallMicros``)."""
        out: dict[str, dict[str, int]] = {}
        for sender in self.senders.values():
            out[sender.name] = {
                "distributedItemsOut": sender.sent_items,
                "distributedPacketsOut": sender.sent_packets,
                "maxInFlight": sender.max_in_flight,
                "window": sender.window.limit - sender.receiver_processed,
                **call_times(sender),
            }
        for receiver in self.receivers.values():
            out[receiver.name] = {
                "distributedItemsIn": receiver.received_items,
                "receiveWindow": receiver.window.window,
                "maxReceiveWindow": receiver.max_window,
                **call_times(receiver),
            }
        return out


_ROUTE = struct.Struct(">qII")
"""A ``DATA`` payload's first bytes: job id, edge id, source member."""
_BUFFER_COUNT = struct.Struct(">I")
_NO_BUFFERS = _BUFFER_COUNT.pack(0)


def _encode_packet(job_id: int, edge_id: int, source: int, chunks: list[tuple[int, int, int, Any]]) -> bytes:
    """One pickle of the whole packet and its out-of-band buffers (see the module doc): one encoding
    per chunk, none per item."""
    wire: list[tuple[int, int, int, Any]] = []
    for (producer, consumer, kind), run in itertools.groupby(chunks, _pair_and_kind):
        if kind == DATA:
            items = list(itertools.chain.from_iterable(chunk[3] for chunk in run))
            wire.append(_as_rows(producer, consumer, items))
        else:
            wire.extend(run)
    buffers: list[pickle.PickleBuffer] = []
    route = _ROUTE.pack(job_id, edge_id, source)
    try:
        pickled = _pickling.dumps(wire, buffers)
    except Exception as exc:
        raise serialization.SerializationError(
            f"cannot serialize the items of edge {edge_id}: {type(exc).__name__}: {exc}"
        ) from exc
    if not buffers:
        return b"".join([route, _NO_BUFFERS, pickled])
    raws = [buffer.raw() for buffer in buffers]
    table = struct.pack(f">I{len(raws)}Q", len(raws), *[raw.nbytes for raw in raws])
    return b"".join([route, table, pickled, *raws])


def _pair_and_kind(chunk: tuple[int, int, int, Any]) -> tuple[int, int, int]:
    return chunk[0], chunk[1], chunk[2]


def _as_rows(producer: int, consumer: int, items: list[Any]) -> tuple[int, int, int, Any]:
    encoded = rows.encode(items) if items else None
    return (producer, consumer, DATA, items) if encoded is None else (producer, consumer, ROWS, encoded)


def bounded_packets(
    job_id: int, edge_id: int, source: int, chunks: list[tuple[int, int, int, Any]], max_bytes: int
) -> list[Packet]:
    """``chunks`` as serialized packets, in order, each payload at most ``max_bytes``.

    A packet that does not fit is cut: its chunks in halves first, then the
    items of a single data chunk into as many equal parts as its size needs
    (each part is encoded again and cut further should it still not fit); a
    single item that does not fit raises :class:`FrameTooLargeError` naming its
    size and the limit.

    >>> items = [bytes([i]) * 100 for i in range(4)]
    >>> [len(p.chunks[0][3]) for p in bounded_packets(1, 0, 0, [(0, 0, 0, items)], 300)]
    [2, 2]
    """
    encoded = _encode_packet(job_id, edge_id, source, chunks)
    if len(encoded) <= max_bytes:
        return [Packet(job_id, edge_id, source, chunks, encoded)]
    if len(chunks) > 1:
        halves = [chunks[: len(chunks) // 2], chunks[len(chunks) // 2 :]]
    else:
        producer, consumer, kind, items = chunks[0]
        if kind != DATA or len(items) < 2:
            item = items[0] if kind == DATA else items
            size = len(_pickling.dumps(item))
            raise FrameTooLargeError(
                f"an item of edge {edge_id} serializes to {size:,} bytes, more than a network frame may "
                f"carry ({max_bytes:,} bytes): make the items smaller (or send references to them)"
            )
        parts = min(len(items), max(2, math.ceil(len(encoded) / max_bytes)))
        step = math.ceil(len(items) / parts)
        halves = [[(producer, consumer, kind, items[i : i + step])] for i in range(0, len(items), step)]
    return [packet for half in halves for packet in bounded_packets(job_id, edge_id, source, half, max_bytes)]


def encode_message(message: object) -> tuple[MessageType, bytes]:
    """A Packet or an Ack as a frame type and payload."""
    if isinstance(message, Packet):
        if message.encoded is not None:
            return MessageType.DATA, message.encoded
        return MessageType.DATA, _encode_packet(
            message.job_id, message.edge_id, message.source_member, message.chunks
        )
    if isinstance(message, Ack):
        return MessageType.FLOW_ACK, serialization.dumps(
            [message.job_id, message.edge_id, message.receiver_member, message.processed, message.limit]
        )
    raise TypeError(f"not a network message: {type(message).__qualname__}")


def decode_message(msg_type: MessageType, payload: bytes) -> Packet | Ack:
    """The Packet or Ack of a frame from an authenticated member (see the module doc).

    Raises :class:`~jetlet._network.serialization.SerializationError` for a payload of the wrong shape.
    """
    if msg_type is MessageType.DATA:
        return _decode_packet(payload)
    fields = serialization.loads(payload, allow_pickle=False)
    try:
        job_id, edge_id, receiver, processed, limit = fields
    except (TypeError, ValueError) as exc:
        raise serialization.SerializationError(f"corrupt flow-control ack: {exc}") from exc
    return Ack(job_id, edge_id, receiver, processed, limit)


def packet_route(payload: bytes) -> tuple[int, int, int]:
    """``(job_id, edge_id, source_member)`` of a ``DATA`` payload: its first bytes, nothing unpickled.

    Raises :class:`~jetlet._network.serialization.SerializationError` for a payload too short to hold one.
    """
    if len(payload) < _ROUTE.size:
        raise serialization.SerializationError(f"corrupt data packet: {len(payload)} bytes, no route")
    job_id, edge_id, source = _ROUTE.unpack_from(payload)
    return job_id, edge_id, source


def _split_buffers(payload: bytes) -> tuple[memoryview, list[memoryview]]:
    """The pickle and the out-of-band buffers of a ``DATA`` payload, as views of it (no copy)."""
    start = _ROUTE.size
    if len(payload) < start + _BUFFER_COUNT.size:
        raise serialization.SerializationError(f"corrupt data packet: {len(payload)} bytes, no buffer table")
    (count,) = _BUFFER_COUNT.unpack_from(payload, start)
    pickle_start = start + _BUFFER_COUNT.size + 8 * count
    if pickle_start > len(payload):
        raise serialization.SerializationError(
            f"corrupt data packet: a table of {count:,} out-of-band buffers does not fit "
            f"in {len(payload):,} bytes"
        )
    lengths = struct.unpack_from(f">{count}Q", payload, start + _BUFFER_COUNT.size)
    pickle_end = offset = len(payload) - sum(lengths)
    if pickle_end < pickle_start:
        raise serialization.SerializationError(
            f"corrupt data packet: out-of-band buffers of {sum(lengths):,} bytes do not fit in "
            f"{len(payload) - pickle_start:,} bytes after their table"
        )
    view = memoryview(payload)
    buffers = []
    for length in lengths:
        buffers.append(view[offset : offset + length])
        offset += length
    return view[pickle_start:pickle_end], buffers


def decode_chunks(payload: bytes) -> list[tuple[int, int, int, Any]]:
    """The chunks of a ``DATA`` payload, records rebuilt (see the module doc; its route is not read).

    Raises :class:`~jetlet._network.serialization.SerializationError` for a payload of the wrong shape.
    """
    pickled, buffers = _split_buffers(payload)
    try:
        wire = pickle.loads(pickled, buffers=buffers)
    except Exception as exc:
        raise serialization.SerializationError(
            f"corrupt data packet ({len(payload)} bytes): {type(exc).__name__}: {exc}"
        ) from exc
    if type(wire) is not list:
        raise serialization.SerializationError("corrupt data packet: its chunks are not a list")
    chunks: list[tuple[int, int, int, Any]] = []
    for chunk in wire:
        if type(chunk) is not tuple or len(chunk) != 4 or (chunk[2] == DATA and type(chunk[3]) is not list):
            raise serialization.SerializationError(
                "corrupt data packet: a chunk is not (p, c, kind, payload)"
            )
        chunks.append(_from_rows(chunk) if chunk[2] == ROWS else chunk)
    return chunks


def _decode_packet(payload: bytes) -> Packet:
    job_id, edge_id, source = packet_route(payload)
    return Packet(job_id, edge_id, source, decode_chunks(payload))


def _from_rows(chunk: tuple[int, int, int, Any]) -> tuple[int, int, int, Any]:
    producer, consumer, _, encoded = chunk
    try:
        return producer, consumer, DATA, rows.decode(encoded)
    except Exception as exc:
        raise serialization.SerializationError(
            f"corrupt data packet: a rows chunk: {type(exc).__name__}: {exc}"
        ) from exc
