"""Each distributed edge's flow control follows its EdgeConfig, else the instance's (issue 13 item 9).

The member's flow settings give the initial window and the frame limit; the
instance's ``flow_control_period_millis`` and each edge's ``packet_size_limit``,
``receive_window_multiplier`` and ``buffer_timeout_millis`` (its own ``EdgeConfig``, else the
instance's default one) are what the senders and receivers of that edge use.
"""

from __future__ import annotations

from jetlet import config
from jetlet._cluster import execution_member
from jetlet._network import tasklets as remote
from jetlet.core import DAG, Edge, processors


def _two_edge_dag() -> DAG:
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(range(3)))
    middle = dag.new_vertex("middle", processors.map_p(str))
    sink = dag.new_vertex("sink", processors.noop_p())
    dag.edge(Edge.between(source, middle).distributed())
    tuned = config.EdgeConfig(
        queue_size=8, packet_size_limit=2, receive_window_multiplier=7, buffer_timeout_millis=0
    )
    dag.edge(Edge.between(middle, sink).distributed().set_config(tuned))
    return dag


def test_given_an_edge_config_then_that_edge_flows_by_it_and_the_others_by_the_instances() -> None:
    # given an instance with its own period and default edge, and a member's base settings
    instance = config.InstanceConfig(
        flow_control_period_millis=33,
        default_edge_config=config.EdgeConfig(packet_size_limit=5, receive_window_multiplier=4),
    )
    base = remote.FlowSettings(initial_window=99, max_frame_bytes=12345)
    # when the member works out each edge's flow settings
    flows = execution_member.edge_flow_settings(_two_edge_dag(), instance, base)
    # then the plain edge has the instance's, the tuned edge its own; the member's base stays
    assert flows == {
        0: remote.FlowSettings(33, 4, 5, initial_window=99, max_frame_bytes=12345),
        1: remote.FlowSettings(33, 7, 2, initial_window=99, max_frame_bytes=12345, buffer_timeout_millis=0),
    }


def test_given_settings_for_one_edge_then_its_sender_packs_by_them() -> None:
    # given links with a default packet limit of 100 items and 2 for edge 1
    sent: list[remote.Packet] = []
    links = remote.RemoteLinks(
        7,
        0,
        lambda _member, message: sent.append(message),  # type: ignore[arg-type]
        remote.FlowSettings(packet_size_limit=100, buffer_timeout_millis=0),
        {1: remote.FlowSettings(packet_size_limit=2, buffer_timeout_millis=0)},
    )
    assert links.settings_for(1).packet_size_limit == 2 and links.settings_for(0).packet_size_limit == 100
    # when 10 items go to member 1 over edge 0 and 10 over edge 1
    for edge_id in (0, 1):
        queue = links.outbound_queue(edge_id, 1, 0, 0, 64, f"edge {edge_id}")
        assert queue.offer_batch(list(range(10))) == 10
    for sender in links.senders.values():
        while sender.call().made_progress:
            pass
    # then edge 0 sent them in one packet, edge 1 in packets of at most 2 items
    sizes: dict[int, list[int]] = {0: [], 1: []}
    for packet in sent:
        sizes[packet.edge_id].append(sum(len(chunk[3]) for chunk in packet.chunks))
    assert sizes == {0: [10], 1: [2, 2, 2, 2, 2]}
