"""Transports over real TCP on 127.0.0.1: exchange, one connection per pair, refusal, loss, clean close."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jetlet._network import frames, handshake, serialization
from jetlet._network.frames import MessageType
from jetlet._network.transport import PeerUnavailableError, Transport
from jetlet.testing import wait_until

SECRET = "test-cluster-secret"
DEADLINE_S = 10.0
UNPICKLED: list[str] = []


def _mark_unpickled() -> str:
    UNPICKLED.append("unpickled")
    return "x"


class Booby:
    def __reduce__(self) -> tuple[Any, ...]:
        return (_mark_unpickled, ())


class Member:
    """A transport with recording callbacks."""

    def __init__(self, name: str, secret: str = SECRET, **options: Any) -> None:
        self.messages: list[tuple[str, MessageType, bytes]] = []
        self.lost: list[str] = []
        self.lost_event = threading.Event()
        self.changed = threading.Condition()
        """Notified whenever a message is recorded."""
        self.transport = Transport(name, secret, self._on_message, self._on_peer_lost, **options)
        self.address = self.transport.start("127.0.0.1", 0)

    def _on_message(self, peer: str, msg_type: MessageType, payload: bytes) -> None:
        serialization.loads(payload)
        with self.changed:
            self.messages.append((peer, msg_type, payload))
            self.changed.notify_all()

    def _on_peer_lost(self, peer: str) -> None:
        self.lost.append(peer)
        self.lost_event.set()

    def payloads_from(self, peer: str) -> list[Any]:
        return [serialization.loads(p) for source, _, p in list(self.messages) if source == peer]


@pytest.fixture
def members() -> Iterator[Callable[..., Member]]:
    made: list[Member] = []

    def make(name: str, **options: Any) -> Member:
        member = Member(name, **options)
        made.append(member)
        return member

    yield make
    for member in made:
        member.transport.close()


def _raw_connect(address: tuple[str, int]) -> socket.socket:
    return socket.create_connection(address, timeout=DEADLINE_S)


def _read_frames_until_closed(sock: socket.socket) -> list[frames.Frame]:
    decoder, received = frames.FrameDecoder(), []
    while chunk := sock.recv(65536):
        received += decoder.feed(chunk)
    return received


def test_given_two_members_when_connected_then_frames_flow_both_ways(members: Callable[..., Member]) -> None:
    a, b = members("a"), members("b")
    a.transport.connect("b", *b.address)
    assert a.transport.peers() == ["b"] and b.transport.peers() == ["a"]
    a.transport.send("b", MessageType.DATA, serialization.dumps(("from a", 1)))
    b.transport.send("a", MessageType.CONTROL, serialization.dumps({"from": "b"}))
    wait_until(lambda: b.messages, "b received", DEADLINE_S, b.changed)
    wait_until(lambda: a.messages, "a received", DEADLINE_S, a.changed)
    assert b.payloads_from("a") == [("from a", 1)] and b.messages[0][1] is MessageType.DATA
    assert a.payloads_from("b") == [{"from": "b"}] and a.messages[0][1] is MessageType.CONTROL
    counters_a, counters_b = a.transport.counters()["b"], b.transport.counters()["a"]
    assert counters_a.frames_out == counters_b.frames_in == 1
    assert counters_a.bytes_out == counters_b.bytes_in > frames.HEADER_SIZE


def test_given_three_members_when_fully_connected_then_every_pair_exchanges(
    members: Callable[..., Member],
) -> None:
    group = {name: members(name) for name in "xyz"}
    group["x"].transport.connect("y", *group["y"].address)
    group["x"].transport.connect("z", *group["z"].address)
    group["y"].transport.connect("z", *group["z"].address)
    for source, member in group.items():
        for target in group:
            if target != source:
                member.transport.send(target, MessageType.DATA, serialization.dumps([(source, target)]))
    for name, member in group.items():
        wait_until(
            lambda m=member: len(m.messages) == 2, f"{name} received from both", DEADLINE_S, member.changed
        )
        assert sorted(member.payloads_from(p)[0][0] for p in group if p != name) == sorted(
            (p, name) for p in group if p != name
        )
        assert member.transport.open_connections == 2


@pytest.mark.parametrize("round_", range(5))
def test_given_two_members_dialing_each_other_at_once_then_one_connection_remains(
    members: Callable[..., Member], round_: int
) -> None:
    a, b = members(f"a{round_}"), members(f"b{round_}")
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def dial(source: Member, target: Member) -> None:
        barrier.wait()
        try:
            source.transport.connect(target.transport.member_name, *target.address)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=dial, args=pair) for pair in ((a, b), (b, a))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S)
    assert errors == []
    wait_until(
        lambda: a.transport.open_connections == b.transport.open_connections == 1, "one connection each"
    )
    local_a, remote_a = a.transport.connection_endpoints(b.transport.member_name) or ((), ())
    local_b, remote_b = b.transport.connection_endpoints(a.transport.member_name) or ((), ())
    assert (local_a, remote_a) == (remote_b, local_b)
    a.transport.send(b.transport.member_name, MessageType.DATA, serialization.dumps("ping"))
    wait_until(lambda: b.messages, "the kept connection carries data", DEADLINE_S, b.changed)
    assert a.lost == b.lost == []


def test_given_a_peer_with_the_wrong_secret_when_it_dials_then_refused_counted_and_never_delivered(
    members: Callable[..., Member], caplog: pytest.LogCaptureFixture
) -> None:
    b = members("b")
    intruder = members("intruder", secret="not-the-secret")
    with pytest.raises(handshake.HandshakeError, match="refused the handshake: authentication failed"):
        intruder.transport.connect("b", *b.address)
    assert b.transport.refused_handshakes == 1
    assert b.transport.peers() == [] and b.messages == []
    assert "refused the connection" in caplog.text and "wrong proof" in caplog.text
    with pytest.raises(PeerUnavailableError):
        intruder.transport.send("b", MessageType.DATA, b"")


def test_given_a_raw_intruder_that_sends_pickles_with_its_hello_then_nothing_is_unpickled(
    members: Callable[..., Member],
) -> None:
    UNPICKLED.clear()
    b = members("b")
    hello = handshake.Handshake(handshake.Role.INITIATOR, "intruder", b"guessed").start()
    pickled = serialization.dumps([Booby()])
    stream = frames.encode_frame(*hello[0]) + b"".join(
        frames.encode_frame(t, pickled) for t in (MessageType.DATA, MessageType.CONTROL, MessageType.AUTH)
    )
    with _raw_connect(b.address) as sock:
        sock.sendall(stream)
        replies = _read_frames_until_closed(sock)
    assert [f.msg_type for f in replies] == [MessageType.CHALLENGE, MessageType.AUTH_REFUSED]
    assert b.messages == [] and UNPICKLED == []
    assert b.transport.refused_handshakes == 1


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00\x01\x07\x01x",
        b"\x00\x00\x00\x01\x01\xc8x",
        b"\xff\xff\xff\xff\x01\x01",
        frames.encode_frame(MessageType.HELLO, b"\xc1"),
    ],
    ids=["wrong version", "unknown type", "oversized", "malformed hello"],
)
def test_given_garbage_from_an_unknown_peer_then_refused_and_the_member_keeps_working(
    members: Callable[..., Member], garbage: bytes
) -> None:
    a, b = members("a"), members("b")
    with _raw_connect(b.address) as sock:
        sock.sendall(garbage)
        replies = _read_frames_until_closed(sock)
    assert [f.msg_type for f in replies] == [MessageType.AUTH_REFUSED]
    assert b.transport.refused_handshakes == 1
    a.transport.connect("b", *b.address)
    a.transport.send("b", MessageType.DATA, serialization.dumps(1))
    wait_until(lambda: b.messages, "the member still serves others", DEADLINE_S, b.changed)


def test_given_a_peer_that_never_finishes_the_handshake_then_it_is_timed_out_and_counted(
    members: Callable[..., Member],
) -> None:
    b = members("b", handshake_timeout_s=0.2)
    with _raw_connect(b.address) as sock:
        replies = _read_frames_until_closed(sock)
    assert replies[0].msg_type is MessageType.AUTH_REFUSED and b"no complete handshake" in replies[0].payload
    assert b.transport.refused_handshakes == 1


def _authenticate_raw(sock: socket.socket, name: str, peer: str) -> frames.FrameSealer:
    """Complete a real handshake over a raw socket, as member ``name``; return the sealer of its frames."""
    shake = handshake.Handshake(handshake.Role.INITIATOR, name, SECRET.encode(), expected_peer=peer)
    decoder = frames.FrameDecoder()
    outgoing = shake.start()
    while not shake.is_done:
        sock.sendall(b"".join(frames.encode_frame(t, p) for t, p in outgoing))
        outgoing = []
        for frame in decoder.feed(sock.recv(65536)):
            outgoing += shake.receive(frame.msg_type, frame.payload)
    return frames.FrameSealer(shake.frame_keys()[0])


def test_given_a_trusted_peer_that_closes_mid_frame_then_the_loss_is_reported(
    members: Callable[..., Member],
) -> None:
    b = members("b")
    with _raw_connect(b.address) as sock:
        sealer = _authenticate_raw(sock, "raw", "b")
        wait_until(lambda: b.transport.peers() == ["raw"], "the raw peer is trusted")
        whole = frames.encode_frame(MessageType.DATA, serialization.dumps("complete"))
        sock.sendall(whole + sealer.seal(whole) + frames.encode_frame(MessageType.DATA, b"0123456789")[:9])
    assert b.lost_event.wait(DEADLINE_S)
    assert b.lost == ["raw"] and b.payloads_from("raw") == ["complete"]
    assert b.transport.peers() == []


def test_given_a_trusted_peer_that_sends_an_unknown_type_then_it_is_disconnected(
    members: Callable[..., Member],
) -> None:
    b = members("b")
    with _raw_connect(b.address) as sock:
        _authenticate_raw(sock, "raw", "b")
        sock.sendall(b"\x00\x00\x00\x00\x01\xc8")
        assert _read_frames_until_closed(sock) == []
    assert b.lost_event.wait(DEADLINE_S) and b.lost == ["raw"]


def test_given_a_connected_peer_when_it_closes_then_on_peer_lost_fires_once(
    members: Callable[..., Member],
) -> None:
    a, b = members("a"), members("b")
    a.transport.connect("b", *b.address)
    wait_until(lambda: b.transport.peers() == ["a"], "b trusts a")
    a.transport.close()
    assert b.lost_event.wait(DEADLINE_S)
    assert b.lost == ["a"] and a.lost == []
    assert b.transport.peers() == []
    with pytest.raises(PeerUnavailableError, match="no connection to member 'a'"):
        b.transport.send("a", MessageType.DATA, b"")


def test_given_a_busy_transport_when_closed_then_no_thread_socket_or_port_is_left() -> None:
    before = {t.name for t in threading.enumerate()}
    a = Member("closer-a")
    b = Member("closer-b")
    a.transport.connect("closer-b", *b.address)
    for _ in range(100):
        a.transport.send("closer-b", MessageType.DATA, b"x" * 1000)
    assert "jetlet-network-closer-a" in {t.name for t in threading.enumerate()}
    a.transport.close()
    b.transport.close()
    b.transport.close()
    assert {t.name for t in threading.enumerate()} <= before
    assert a.transport.open_connections == b.transport.open_connections == 0
    for address in (a.address, b.address):
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
            probe.listen()


def test_given_ten_thousand_frames_when_sent_then_all_arrive_in_order(members: Callable[..., Member]) -> None:
    a, b = members("a"), members("b")
    a.transport.connect("b", *b.address)
    for index in range(10_000):
        a.transport.send("b", MessageType.DATA, serialization.dumps(index))
    wait_until(lambda: len(b.messages) == 10_000, "all frames arrived", DEADLINE_S, b.changed)
    assert b.payloads_from("a") == list(range(10_000))
    assert b.transport.counters()["a"].frames_in == 10_000


def _send_one_at_a_time(a: Member, b: Member, kinds: list[MessageType]) -> None:
    """From ``a`` to ``b``, frame ``i`` of type ``kinds[i]`` with payload ``i``, each once the one
    before arrived (so nothing is ever queued behind another)."""
    for index, kind in enumerate(kinds):
        a.transport.send("b", kind, serialization.dumps(index))
        wait_until(
            lambda count=index + 1: len(b.messages) == count, "the frame arrived", DEADLINE_S, b.changed
        )


def test_given_an_idle_connection_then_a_frame_goes_straight_to_the_socket_and_arrives(
    members: Callable[..., Member],
) -> None:
    # given two connected members with nothing queued between them
    a, b = members("a"), members("b")
    a.transport.connect("b", *b.address)
    # when frames are sent one at a time, each after the previous arrived
    _send_one_at_a_time(a, b, [MessageType.DATA] * 20)
    # then the sending thread wrote every one itself (the loop thread was not woken for them)
    # and they arrived sealed and in order
    assert b.payloads_from("a") == list(range(20))
    counters = a.transport.counters()["b"]
    assert counters.frames_out_direct == counters.frames_out == 20


def test_given_control_frames_then_the_loop_writes_them_never_the_sending_thread(
    members: Callable[..., Member],
) -> None:
    a, b = members("a"), members("b")
    a.transport.connect("b", *b.address)
    _send_one_at_a_time(a, b, [MessageType.CONTROL, MessageType.HEARTBEAT, MessageType.FLOW_ACK] * 4)
    assert b.payloads_from("a") == list(range(12))
    # (the loop counts a frame just after writing it: the peer may have it first)
    wait_until(lambda: a.transport.counters()["b"].frames_out == 12, "all frames counted", DEADLINE_S)
    assert a.transport.counters()["b"].frames_out_direct == 0


def test_given_a_socket_that_takes_part_of_a_frame_then_the_loop_writes_the_rest_in_order(
    members: Callable[..., Member],
) -> None:
    # given a connection whose socket buffer holds a few kilobytes (so direct writes fall short)
    a, b = members("a"), members("b")
    a.transport.connect("b", *b.address)
    connection = a.transport._peers["b"].connection
    assert connection is not None and connection.transport is not None
    connection.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    # when frames of 64 KB are sent back to back from two threads
    blob = "x" * 65_536

    def send_from(start: int) -> None:
        for index in range(start, start + 100):
            a.transport.send("b", MessageType.DATA, serialization.dumps((index, blob)))

    senders = [threading.Thread(target=send_from, args=(start,)) for start in (0, 100)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(DEADLINE_S)
    wait_until(lambda: len(b.messages) == 200, "all frames arrived", DEADLINE_S, b.changed)
    # then every frame arrived whole, authenticated, and in each thread's order
    got = [index for index, text in b.payloads_from("a") if text == blob]
    assert sorted(got) == list(range(200))
    assert [i for i in got if i < 100] == list(range(100))
    assert [i for i in got if i >= 100] == list(range(100, 200))
    # and some went straight out, the rest through the loop (a short write queues what follows;
    # the loop counts a frame just after writing it: the peer may have it first)
    wait_until(lambda: a.transport.counters()["b"].frames_out == 200, "all frames counted", DEADLINE_S)
    assert 0 < a.transport.counters()["b"].frames_out_direct < 200
    assert b.transport.rejected_frames == 0 and not b.lost


def test_given_a_large_frame_when_sent_then_it_arrives_whole(members: Callable[..., Member]) -> None:
    a, b = members("a"), members("b")
    a.transport.connect("b", *b.address)
    big = [("k" * 100, index) for index in range(20_000)]
    a.transport.send("b", MessageType.DATA, serialization.dumps(big))
    wait_until(lambda: b.messages, "the large frame arrived", DEADLINE_S, b.changed)
    assert b.payloads_from("a") == [big]


def test_given_no_listener_when_connecting_then_an_os_error(members: Callable[..., Member]) -> None:
    a = members("a")
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(OSError):
        a.transport.connect("nobody", "127.0.0.1", port)


def test_given_the_wrong_member_answers_when_connecting_then_refused(members: Callable[..., Member]) -> None:
    a, b = members("a"), members("b")
    with pytest.raises(handshake.HandshakeError, match="dialed member 'c' but 'b' answered"):
        a.transport.connect("c", *b.address)
    assert a.transport.refused_handshakes == 1 and a.transport.peers() == []


def test_given_a_peer_that_redials_while_its_old_connection_is_open_then_the_old_one_is_reported_lost(
    members: Callable[..., Member],
) -> None:
    """A peer that lost its end re-dials; frames written on the old connection may be gone, so the
    replacement is a loss (calls waiting on the old connection fail at once instead of timing out)."""
    a, b = members("a"), members("b")
    b.transport.connect("a", *a.address)
    wait_until(lambda: a.transport.peers() == ["b"], "a trusts b")
    old_endpoints = a.transport.connection_endpoints("b")
    b_again = members("b")  # b's process, its old end forgotten, dials again under the same name
    b_again.transport.connect("a", *a.address)
    wait_until(
        lambda: a.transport.connection_endpoints("b") not in (None, old_endpoints),
        "a took the new connection",
    )
    assert a.lost_event.wait(DEADLINE_S)
    assert a.lost == ["b"]
    a.transport.send("b", MessageType.DATA, serialization.dumps("after"))
    wait_until(lambda: b_again.payloads_from("a") == ["after"], "the new connection carries frames")


def test_given_the_rest_of_a_direct_write_when_its_connection_was_let_go_then_the_flush_drops_it(
    members: Callable[..., Member],
) -> None:
    # given a peer whose last direct write left bytes on a connection since replaced
    a, b = members("a"), members("b")
    a.transport.connect("b", *b.address)
    peer = a.transport._peers["b"]
    replaced = object()
    with peer.lock:
        peer.unsent, peer.unsent_on = b"the tail of a frame on another socket", replaced  # type: ignore[assignment]
    # when a frame is queued and the loop flushes
    with peer.lock:
        peer.outbox.append(frames.encode_frame(MessageType.DATA, serialization.dumps("after")))
        peer.flush_scheduled = True
    a.transport._require_loop().call_soon_threadsafe(a.transport._flush, peer)
    # then the frame arrives authenticated on the connection kept, and the stale tail went nowhere
    wait_until(lambda: b.messages, "the frame arrived", DEADLINE_S, b.changed)
    assert b.payloads_from("a") == ["after"]
    wait_until(lambda: peer.unsent == b"", "the flush finished", DEADLINE_S)
    assert b.transport.rejected_frames == 0 and not b.lost
