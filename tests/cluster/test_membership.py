"""Membership (sans-IO): joining, one coordinator, failure detection, quorum."""

from __future__ import annotations

from jetlet._cluster import membership
from jetlet._cluster.membership import MemberInfo, Membership

HEARTBEAT, TIMEOUT = 100, 500


class Network:
    """Delivers every outgoing message at once to live members (by name or data address)."""

    def __init__(self) -> None:
        self.members: dict[str, Membership] = {}
        self.dead: set[str] = set()
        self.now = 0

    def add(self, name: str, start_time: int, seeds: tuple[str, ...] = ()) -> Membership:
        info = MemberInfo(name, f"{name}:5701", f"{name}:8701", start_time)
        self.members[name] = Membership(info, seeds, HEARTBEAT, TIMEOUT, self.now)
        return self.members[name]

    def _deliver(self, queue: list[membership.Outgoing]) -> None:
        while queue:
            out = queue.pop(0)
            target = out.name or out.address.split(":")[0]
            if target in self.members and target not in self.dead:
                queue += self.members[target].receive(out.message, self.now)

    def run(self, millis: int) -> None:
        for _ in range(millis // 10):
            self.now += 10
            for name, member in list(self.members.items()):
                if name not in self.dead:
                    self._deliver(member.tick(self.now))

    def views(self) -> set[tuple[int, tuple[str, ...]]]:
        return {
            (m.member_list.version, m.member_list.names)
            for n, m in self.members.items()
            if n not in self.dead
        }


def test_given_members_with_a_seed_when_they_join_then_all_agree_on_one_list_and_coordinator() -> None:
    net = Network()
    net.add("m1", 1)
    net.add("m2", 2, ("m1:5701",))
    net.add("m3", 3, ("m1:5701",))
    net.run(300)
    assert net.views() == {(3, ("m1", "m2", "m3"))}
    assert [n for n, m in net.members.items() if m.is_coordinator] == ["m1"]
    assert net.members["m2"].describe()["coordinator"] == "m1"


def test_given_everyone_lists_everyone_when_started_together_then_one_cluster_forms() -> None:
    net = Network()
    seeds = ("m1:5701", "m2:5701", "m3:5701")
    for i, name in enumerate(["m3", "m1", "m2"]):
        net.add(name, 10 + i, seeds)
    net.run(500)
    views = net.views()
    assert len(views) == 1
    (_, names) = views.pop()
    assert sorted(names) == ["m1", "m2", "m3"]
    assert sum(m.is_coordinator for m in net.members.values()) == 1


def test_given_a_cluster_when_a_member_stops_answering_then_it_is_removed_everywhere() -> None:
    net = Network()
    net.add("m1", 1)
    net.add("m2", 2, ("m1:5701",))
    net.add("m3", 3, ("m1:5701",))
    net.run(300)
    net.dead.add("m3")
    net.run(TIMEOUT - 100)
    assert net.views() == {(3, ("m1", "m2", "m3"))}
    net.run(300)
    assert net.views() == {(4, ("m1", "m2"))}


def test_given_a_cluster_when_the_coordinator_dies_then_the_next_oldest_takes_over() -> None:
    net = Network()
    net.add("m1", 1)
    net.add("m2", 2, ("m1:5701",))
    net.add("m3", 3, ("m1:5701",))
    net.run(300)
    net.dead.add("m1")
    net.run(TIMEOUT + 200)
    assert net.views() == {(4, ("m2", "m3"))}
    assert net.members["m2"].is_coordinator and not net.members["m3"].is_coordinator


def test_given_sizes_then_quorum_is_a_strict_majority_of_the_last_known_size() -> None:
    assert [membership.has_quorum(n, 4) for n in range(5)] == [False, False, False, True, True]
    assert [membership.has_quorum(n, 3) for n in range(4)] == [False, False, True, True]


def test_given_a_member_info_and_list_then_they_round_trip_through_dicts() -> None:
    info = MemberInfo("m1", "h:1", "h:2", 5)
    listed = membership.MemberList(7, (info,))
    assert membership.MemberList.from_dict(listed.to_dict()) == listed
    assert listed.coordinator == info


def test_a_paused_member_removed_meanwhile_learns_it_and_rejoins_as_a_new_member() -> None:
    # given three members, one of which is then paused (SIGSTOP) past the failure timeout
    net = Network()
    net.add("m1", 1)
    net.add("m2", 2, ("m1:5701",))
    net.add("m3", 3, ("m1:5701",))
    net.run(300)
    paused = net.members["m3"]
    old_uuid = paused.local.uuid
    net.dead.add("m3")
    net.run(TIMEOUT + 300)
    assert net.views() == {(4, ("m1", "m2"))}
    # when it runs again, it does not conclude that the others died: it noticed its own pause,
    # knows it was removed, and starts over with a new identity
    net.dead.discard("m3")
    out = paused.tick(net.now + 10)
    assert paused.take_pause() >= TIMEOUT and paused.take_pause() == 0
    assert paused.suspect and paused.member_list.names == ("m1", "m2", "m3")
    # and the coordinator, hearing from a member it removed, tells it so; it takes a new identity
    net._deliver(out)
    assert paused.take_removed() and not paused.take_removed() and not paused.take_confirmed()
    assert paused.local.uuid != old_uuid and not paused.suspect
    # then it joins again, the youngest, and everyone agrees on one list
    net.run(300)
    assert len(net.views()) == 1
    (version, names) = net.views().pop()
    assert names == ("m1", "m2", "m3") and version > 4


def test_a_member_stalled_but_not_removed_hears_that_it_still_belongs() -> None:
    net = Network()
    net.add("m1", 1)
    net.add("m2", 2, ("m1:5701",))
    net.run(300)
    # given m2's own ticks stalled past the timeout, but the others did not remove it meanwhile
    m2 = net.members["m2"]
    net.now += TIMEOUT + 100
    m2.tick(net.now)
    assert m2.take_pause() and m2.suspect
    # a heartbeat that was on its way during the pause proves nothing
    m2.receive({"kind": "heartbeat", "name": "m1", "uuid": net.members["m1"].local.uuid}, net.now)
    assert m2.suspect and not m2.take_confirmed()
    # when it asks (its heartbeats do while it is suspect), a member that still lists it says so
    net.now += HEARTBEAT
    net._deliver(m2.tick(net.now))
    assert m2.take_confirmed() and not m2.suspect and not m2.take_removed()
    assert m2.member_list.names == ("m1", "m2")


def test_a_member_cut_off_is_told_by_the_coordinator_that_it_was_removed() -> None:
    net = Network()
    net.add("m1", 1)
    net.add("m2", 2, ("m1:5701",))
    net.add("m3", 3, ("m1:5701",))
    net.run(300)
    # given the coordinator removed m3 (say its heartbeats were blocked), which never paused
    m1 = net.members["m1"]
    m1.member_list = m1.member_list.without({"m3"})
    # when m3's next heartbeat reaches the coordinator, it is told, and starts over
    net._deliver(net.members["m3"].tick(net.now + HEARTBEAT))
    assert net.members["m3"].take_removed() and net.members["m3"].is_alone


def test_a_removed_notice_from_a_stranger_is_ignored() -> None:
    net = Network()
    m1 = net.add("m1", 1)
    assert m1.receive({"kind": "removed", "by": "mallory"}, 0) == []
    assert not m1.take_removed()
