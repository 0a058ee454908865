"""Batch pipelines end to end: each operation against a plain-Python computation of the same answer.

Every test runs a real job on an embedded instance at local parallelism 1
and 4 (the ``lp`` parameter) and compares the sink's content with a
reference computed directly from the input.
"""

from __future__ import annotations

import collections
import itertools
import random
import statistics
import threading
from typing import Any

import pytest

import jetlet
from jetlet.aggregate import averaging, counting, filtering, mapping, summing, to_list, to_set
from jetlet.core import processor as processor_mod
from jetlet.pipeline import Pipeline, Sinks, Sources

LPS = [1, 4]
RNG = random.Random(20261123)
WORDS = [RNG.choice(["apple", "pear", "fig", "kiwi", "plum", "lime", "date"]) for _ in range(3000)]
NUMBERS = [RNG.randrange(-1000, 1000) for _ in range(5000)]


def run(jet: jetlet.EmbeddedInstance, pipeline: Pipeline) -> None:
    jet.new_job(pipeline).join(timeout=60)


@pytest.mark.parametrize("lp", LPS)
def test_map_filter_flat_map_equal_a_list_comprehension(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    # given numbers, a chain of stateless steps
    p = Pipeline()
    (
        p.read_from(Sources.from_iterable(NUMBERS))
        .map(lambda n: n * 3)
        .set_local_parallelism(lp)
        .filter(lambda n: n % 2 == 0)
        .flat_map(lambda n: [n, -n] if n > 0 else [n])
        .write_to(Sinks.list("out"))
    )
    # when it runs
    run(jet, p)
    # then the output is the comprehension's, as a bag
    expected = [r for n in NUMBERS if (m := n * 3) % 2 == 0 for r in ([m, -m] if m > 0 else [m])]
    assert collections.Counter(jet.get_list("out")) == collections.Counter(expected)


def test_stateless_chain_is_fused_into_one_vertex() -> None:
    # given map -> filter -> map
    p = Pipeline()
    p.read_from(Sources.items(1, 2, 3)).map(str).filter(bool).map(len).write_to(Sinks.noop())
    # when planned, then one vertex runs the chain, named as Jet names it
    dot = p.to_dot()
    assert "fused(map, filter, map)" in dot
    assert len(p.to_dag().vertices()) == 3


@pytest.mark.parametrize("lp", LPS)
def test_grouped_aggregate_counts_equal_counter(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    p = Pipeline()
    p.read_from(Sources.from_iterable(WORDS)).set_local_parallelism(lp).grouping_key(lambda w: w).aggregate(
        counting()
    ).write_to(Sinks.list("counts"))
    run(jet, p)
    assert dict(jet.get_list("counts")) == collections.Counter(WORDS)


@pytest.mark.parametrize("lp", LPS)
def test_ungrouped_aggregates(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    p = Pipeline()
    numbers = p.read_from(Sources.from_iterable(NUMBERS)).map(lambda n: n).set_local_parallelism(lp)
    numbers.aggregate(summing()).write_to(Sinks.list("sum"))
    numbers.aggregate(averaging()).write_to(Sinks.list("avg"))
    numbers.aggregate(counting()).write_to(Sinks.list("count"))
    run(jet, p)
    assert jet.get_list("sum") == [sum(NUMBERS)]
    assert jet.get_list("avg") == [pytest.approx(statistics.fmean(NUMBERS))]
    assert jet.get_list("count") == [len(NUMBERS)]


@pytest.mark.parametrize("lp", LPS)
def test_aggregate2_and_3_co_aggregate_several_stages(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    p = Pipeline()
    a = p.read_from(Sources.from_iterable(NUMBERS)).map(lambda n: n).set_local_parallelism(lp)
    b = p.read_from(Sources.from_iterable(WORDS))
    c = p.read_from(Sources.items(1.5, 2.5))
    a.aggregate2(summing(), b, counting()).write_to(Sinks.list("two"))
    a.aggregate3(counting(), b, counting(), c, summing()).write_to(Sinks.list("three"))
    run(jet, p)
    assert jet.get_list("two") == [(sum(NUMBERS), len(WORDS))]
    assert jet.get_list("three") == [(len(NUMBERS), len(WORDS), 4.0)]


@pytest.mark.parametrize("lp", LPS)
def test_keyed_co_aggregation_with_builder(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    # given words and numbers keyed by a shared key space (first letter / n mod 7)
    p = Pipeline()
    words = p.read_from(Sources.from_iterable(WORDS)).set_local_parallelism(lp).grouping_key(lambda w: len(w))
    numbers = p.read_from(Sources.from_iterable(NUMBERS)).grouping_key(lambda n: n % 5)
    builder = words.aggregate_builder(counting())
    tag_words = builder.tag0()
    tag_numbers = builder.add(numbers, summing())
    builder.build().map(lambda kv: (kv[0], kv[1][tag_words], kv[1][tag_numbers])).write_to(Sinks.list("out"))
    run(jet, p)
    word_counts = collections.Counter(len(w) for w in WORDS)
    number_sums: dict[int, int] = collections.defaultdict(int)
    for n in NUMBERS:
        number_sums[n % 5] += n
    keys = set(word_counts) | set(number_sums)
    expected = {k: (word_counts.get(k, 0), number_sums.get(k, 0)) for k in keys}
    assert {k: (w, n) for k, w, n in jet.get_list("out")} == expected


@pytest.mark.parametrize("lp", LPS)
def test_distinct(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    p = Pipeline()
    stage = p.read_from(Sources.from_iterable(WORDS)).set_local_parallelism(lp)
    stage.distinct().write_to(Sinks.list("distinct"))
    stage.grouping_key(len).distinct().map(len).write_to(Sinks.list("lengths"))
    run(jet, p)
    assert sorted(jet.get_list("distinct")) == sorted(set(WORDS))
    assert sorted(jet.get_list("lengths")) == sorted({len(w) for w in WORDS})


@pytest.mark.parametrize("lp", LPS)
def test_sort(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    p = Pipeline()
    stage = p.read_from(Sources.from_iterable(NUMBERS)).map(lambda n: n).set_local_parallelism(lp)
    stage.sort().write_to(Sinks.list("asc"))
    stage.sort(key_fn=abs, reverse=True).write_to(Sinks.list("by_abs_desc"))
    run(jet, p)
    assert jet.get_list("asc") == sorted(NUMBERS)
    assert [abs(n) for n in jet.get_list("by_abs_desc")] == sorted((abs(n) for n in NUMBERS), reverse=True)


def test_global_map_stateful_sees_every_item_once_in_one_state(jet: jetlet.EmbeddedInstance) -> None:
    # given a running maximum kept in one global state
    def running_max(state: list[int], n: int) -> int:
        state[0] = max(state[0], n)
        return state[0]

    p = Pipeline()
    p.read_from(Sources.from_iterable(NUMBERS)).map_stateful(lambda: [-(10**9)], running_max).write_to(
        Sinks.list("out")
    )
    run(jet, p)
    out = jet.get_list("out")
    # then the last output is the maximum and the outputs never decrease
    assert len(out) == len(NUMBERS)
    assert out == sorted(out)
    assert out[-1] == max(NUMBERS)


@pytest.mark.parametrize("lp", LPS)
def test_keyed_stateful_map_filter_flat_map(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    def count_seen(state: list[int], _key: str, _word: str) -> int:
        state[0] += 1
        return state[0]

    def first_time(state: set[str], _key: str, word: str) -> bool:
        new = word not in state
        state.add(word)
        return new

    p = Pipeline()
    words = p.read_from(Sources.from_iterable(WORDS)).set_local_parallelism(lp).grouping_key(lambda w: w)
    words.map_stateful(lambda: [0], count_seen).write_to(Sinks.list("seen"))
    words.filter_stateful(set, first_time).write_to(Sinks.list("first"))
    words.flat_map_stateful(lambda: [0], lambda s, k, w: [k] * 2).write_to(Sinks.list("twice"))
    run(jet, p)
    counts = collections.Counter(WORDS)
    # then per key the counters run 1..n, each key passes the filter once, flat-map doubles
    assert collections.Counter(jet.get_list("seen")) == collections.Counter(
        i for n in counts.values() for i in range(1, n + 1)
    )
    assert sorted(jet.get_list("first")) == sorted(counts)
    assert collections.Counter(jet.get_list("twice")) == collections.Counter(
        {w: 2 * n for w, n in counts.items()}
    )


@pytest.mark.parametrize("lp", LPS)
def test_rolling_aggregate_global_and_keyed(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    p = Pipeline()
    stage = p.read_from(Sources.from_iterable(WORDS)).set_local_parallelism(lp)
    stage.rolling_aggregate(counting()).write_to(Sinks.list("global"))
    stage.grouping_key(lambda w: w).rolling_aggregate(counting()).write_to(Sinks.list("keyed"))
    run(jet, p)
    assert sorted(jet.get_list("global")) == list(range(1, len(WORDS) + 1))
    keyed = jet.get_list("keyed")
    expected = collections.Counter(WORDS)
    final = {}
    for key, value in keyed:
        final[key] = max(final.get(key, 0), value)
    assert final == expected
    assert len(keyed) == len(WORDS)


@pytest.mark.parametrize("lp", LPS)
def test_using_service_map_filter_flat_map(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    # given a service (a lookup table) created per processor
    created = []

    def create_service(_context: Any) -> dict[str, int]:
        created.append(1)
        return {w: len(w) for w in set(WORDS)}

    factory = jetlet.ServiceFactories.non_shared_service(create_service)
    p = Pipeline()
    stage = p.read_from(Sources.from_iterable(WORDS)).map(lambda w: w).set_local_parallelism(lp)
    stage.map_using_service(factory, lambda table, w: table[w]).write_to(Sinks.list("lengths"))
    stage.filter_using_service(factory, lambda table, w: table[w] > 3).write_to(Sinks.list("long"))
    stage.flat_map_using_service(factory, lambda table, w: [w] * table[w]).write_to(Sinks.list("repeated"))
    stage.grouping_key(len).map_using_service(factory, lambda table, key, w: (key, table[w])).write_to(
        Sinks.list("keyed")
    )
    run(jet, p)
    assert collections.Counter(jet.get_list("lengths")) == collections.Counter(len(w) for w in WORDS)
    assert collections.Counter(jet.get_list("long")) == collections.Counter(w for w in WORDS if len(w) > 3)
    assert len(jet.get_list("repeated")) == sum(len(w) for w in WORDS)
    assert all(k == v for k, v in jet.get_list("keyed"))
    if isinstance(jet, jetlet.EmbeddedInstance):  # on a cluster the services are made in member processes
        assert len(created) >= 4


@pytest.mark.parametrize("preserve_order", [True, False])
def test_map_using_service_async_with_coroutines(jet: jetlet.EmbeddedInstance, preserve_order: bool) -> None:
    async def double(_service: object, n: int) -> int:
        return n * 2

    factory = jetlet.ServiceFactories.shared_service(lambda _context: object())
    p = Pipeline()
    p.read_from(Sources.from_iterable(NUMBERS)).map_using_service_async(
        factory, double, max_concurrent_ops=8, preserve_order=preserve_order
    ).write_to(Sinks.list("out"))
    run(jet, p)
    assert collections.Counter(jet.get_list("out")) == collections.Counter(n * 2 for n in NUMBERS)


USERS = [(uid, f"user-{uid}") for uid in range(0, 50)]
COUNTRIES = [(uid, ["pl", "de", "fr"][uid % 3]) for uid in range(0, 50, 2)]
ORDERS = [(RNG.randrange(0, 60), RNG.randrange(1, 100)) for _ in range(2000)]


@pytest.mark.parametrize("lp", LPS)
def test_hash_join_outer_and_inner(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    from jetlet.core.processors.hash_join import JoinClause

    p = Pipeline()
    users = p.read_from(Sources.from_iterable(USERS))
    orders = p.read_from(Sources.from_iterable(ORDERS)).map(lambda o: o).set_local_parallelism(lp)
    clause = JoinClause.on_keys(lambda o: o[0], lambda u: u[0]).project_right(lambda u: u[1])
    orders.hash_join(users, clause, lambda o, name: (o, name)).write_to(Sinks.list("outer"))
    orders.inner_hash_join(users, clause, lambda o, name: (o, name)).write_to(Sinks.list("inner"))
    run(jet, p)
    names = dict(USERS)
    expected_outer = [(o, names.get(o[0])) for o in ORDERS]
    assert collections.Counter(jet.get_list("outer")) == collections.Counter(expected_outer)
    assert collections.Counter(jet.get_list("inner")) == collections.Counter(
        (o, n) for o, n in expected_outer if n is not None
    )


@pytest.mark.parametrize("lp", LPS)
def test_hash_join2_and_builder(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    from jetlet.core.processors.hash_join import JoinClause

    p = Pipeline()
    users = p.read_from(Sources.from_iterable(USERS))
    countries = p.read_from(Sources.from_iterable(COUNTRIES))
    orders = p.read_from(Sources.from_iterable(ORDERS)).map(lambda o: o).set_local_parallelism(lp)
    by_user = JoinClause.on_keys(lambda o: o[0], lambda u: u[0]).project_right(lambda u: u[1])
    orders.hash_join2(
        users, by_user, countries, by_user, lambda o, name, country: (o, name, country)
    ).write_to(Sinks.list("two"))
    joins = orders.hash_join_builder()
    tag_user = joins.add(users, by_user)
    tag_country = joins.add(countries, by_user)
    joins.build(lambda o, found: (o, found[tag_user], found[tag_country])).write_to(Sinks.list("built"))
    run(jet, p)
    names, country_of = dict(USERS), dict(COUNTRIES)
    expected = collections.Counter((o, names.get(o[0]), country_of.get(o[0])) for o in ORDERS)
    assert collections.Counter(jet.get_list("two")) == expected
    assert collections.Counter(jet.get_list("built")) == expected


@pytest.mark.parametrize("lp", LPS)
def test_merge_and_rebalance(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    p = Pipeline()
    a = p.read_from(Sources.from_iterable(NUMBERS)).set_local_parallelism(lp)
    b = p.read_from(Sources.from_iterable(range(100)))
    a.merge(b).rebalance().map(lambda n: n + 1).write_to(Sinks.list("merged"))
    a.rebalance(lambda n: n % 7).map(lambda n: n).write_to(Sinks.list("keyed"))
    run(jet, p)
    assert collections.Counter(jet.get_list("merged")) == collections.Counter(
        [n + 1 for n in NUMBERS] + [n + 1 for n in range(100)]
    )
    assert collections.Counter(jet.get_list("keyed")) == collections.Counter(NUMBERS)


def test_preserve_order_keeps_the_source_order_through_stateless_stages(jet: jetlet.EmbeddedInstance) -> None:
    p = Pipeline().set_preserve_order(True)
    p.read_from(Sources.from_iterable(range(20_000))).map(lambda n: n * 2).filter(lambda n: n % 3).write_to(
        Sinks.list("ordered")
    )
    run(jet, p)
    expected = [n * 2 for n in range(20_000) if (n * 2) % 3]
    got = jet.get_list("ordered")
    if isinstance(jet, jetlet.EmbeddedInstance):
        assert got == expected
    else:  # each member's lane keeps its order; the list holds the members' lists one after another
        assert sorted(got) == expected
        assert sum(1 for a, b in itertools.pairwise(got) if b < a) < 3


def test_apply_and_custom_transform(jet: jetlet.EmbeddedInstance) -> None:
    from jetlet.core import processors

    def double_then_keep_even(stage: Any) -> Any:
        return stage.map(lambda n: n * 2).filter(lambda n: n % 4 == 0)

    p = Pipeline()
    p.read_from(Sources.from_iterable(NUMBERS)).apply(double_then_keep_even).custom_transform(
        "negate", processors.map_p(lambda n: -n)
    ).write_to(Sinks.list("out"))
    run(jet, p)
    assert collections.Counter(jet.get_list("out")) == collections.Counter(
        -n * 2 for n in NUMBERS if (n * 2) % 4 == 0
    )


class CountsPerInput(processor_mod.Processor):
    """Counts the items of each input; at the end emits ``(items of input 0, items of input 1)``."""

    def __init__(self) -> None:
        self.counts = [0, 0]

    def process(self, ordinal: int, inbox: Any) -> None:
        self.counts[ordinal] += len(inbox.take_all())

    def complete(self) -> bool:
        return self.outbox.offer(tuple(self.counts))


@pytest.mark.parametrize("lp", LPS)
def test_a_broadcast_input_of_a_custom_transform_reaches_every_processor_and_its_other_input_each_once(
    jet: jetlet.EmbeddedInstance, lp: int
) -> None:
    # given a custom processor whose input 0 is a stage and input 1 a broadcast stage of 30 tags
    p = Pipeline()
    numbers = p.read_from(Sources.from_iterable(NUMBERS))
    tags = p.read_from(Sources.from_iterable(range(30))).map(lambda n: n * 10).broadcast()
    counts = numbers.custom_transform("count-inputs", CountsPerInput, tags).set_local_parallelism(lp)
    counts.write_to(Sinks.list("counts"))
    # when it runs
    run(jet, p)
    got = jet.get_list("counts")
    # then every processor of it, on every member, got all 30 tags, and the numbers went once each
    members = 1 if isinstance(jet, jetlet.EmbeddedInstance) else 3  # the fixture's cluster
    assert len(got) == lp * members
    assert {tags_seen for _, tags_seen in got} == {30}
    assert sum(numbers_seen for numbers_seen, _ in got) == len(NUMBERS)


def test_a_broadcast_stage_is_planned_as_a_broadcast_distributed_edge_and_rebalance_undoes_it() -> None:
    # given a stage broadcast into a custom transform, and one broadcast and then rebalanced
    p = Pipeline()
    numbers = p.read_from(Sources.from_iterable(NUMBERS))
    tags = p.read_from(Sources.from_iterable(range(3))).map(lambda n: n).set_name("tags").broadcast()
    numbers.custom_transform("count-inputs", CountsPerInput, tags).write_to(Sinks.list("a"))
    p.read_from(Sources.from_iterable(range(3))).map(lambda n: n).set_name("keyed").broadcast().rebalance(
        lambda n: n
    ).map(lambda n: n).write_to(Sinks.list("b"))
    # when planned
    edges = {(e.source_name, e.dest_name): e for e in p.to_dag().edges()}
    # then the tags reach the custom vertex's input 1 on a broadcast-distributed edge, the numbers
    # its input 0 on a local one, and the rebalanced stage goes by key
    tag_edge = next(e for (source, _), e in edges.items() if source.startswith("tags"))
    assert (tag_edge.describe(), tag_edge.dest_ordinal) == ("broadcast-distributed", 1)
    number_edge = next(e for (_, dest), e in edges.items() if dest == "count-inputs" and e.dest_ordinal == 0)
    assert not number_edge.is_distributed
    keyed_edge = next(e for (source, _), e in edges.items() if source.startswith("keyed"))
    assert keyed_edge.describe() == "partitioned-distributed"


@pytest.mark.parametrize("lp", LPS)
def test_a_rebalanced_stage_still_meets_a_keyed_state_by_key(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    # given words rebalanced round-robin, then counted per word in a keyed state
    words = [f"w{i % 7}" for i in range(700)]
    p = Pipeline()
    rebalanced = p.read_from(Sources.from_iterable(words)).rebalance()
    counted = (
        rebalanced.grouping_key(lambda w: w).map_stateful(lambda: [0], count_into).set_local_parallelism(lp)
    )
    counted.write_to(Sinks.list("counts"))
    # when it runs
    run(jet, p)
    # then every word's state saw all its items: its highest count is the word's count
    highest: dict[str, int] = {}
    for word, count in jet.get_list("counts"):
        highest[word] = max(highest.get(word, 0), count)
    assert highest == collections.Counter(words)


def count_into(state: list[int], key: str, _item: str) -> tuple[str, int]:
    state[0] += 1
    return (key, state[0])


def test_broadcast_into_a_stage_that_routes_its_input_by_key_is_a_planning_error() -> None:
    p = Pipeline()
    tags = p.read_from(Sources.from_iterable(range(3))).map(lambda n: n).set_name("tags").broadcast()
    tags.grouping_key(lambda n: n).map_stateful(lambda: [0], count_into).set_name("per-tag").write_to(
        Sinks.list("x")
    )
    with pytest.raises(
        ValueError, match="stage 'tags' is broadcast into stage 'per-tag', which routes its input"
    ):
        p.to_dag()


def test_custom_transform_refuses_a_further_input_that_is_no_stage_or_of_another_pipeline() -> None:
    p, other = Pipeline(), Pipeline()
    numbers = p.read_from(Sources.from_iterable(NUMBERS))
    with pytest.raises(TypeError, match="custom_transform takes stages as further inputs, got 3"):
        numbers.custom_transform("x", CountsPerInput, 3)
    with pytest.raises(ValueError, match="cannot take a stage of another pipeline"):
        numbers.custom_transform("x", CountsPerInput, other.read_from(Sources.from_iterable([1])))


def test_two_cooperative_threads_give_the_same_answer(jet2: jetlet.EmbeddedInstance) -> None:
    p = Pipeline()
    p.read_from(Sources.from_iterable(WORDS * 5)).grouping_key(lambda w: w).aggregate(to_list()).map(
        lambda kv: (kv[0], len(kv[1]))
    ).write_to(Sinks.list("out"))
    jet2.new_job(p).join(timeout=60)
    assert dict(jet2.get_list("out")) == collections.Counter(WORDS * 5)


# -- plan-time errors ---------------------------------------------------------------


def test_a_stage_without_sink_fails_at_plan_time_naming_it() -> None:
    p = Pipeline()
    stage = p.read_from(Sources.items(1, 2)).map(str).set_name("to-text")
    stage.map(len).set_name("lengths").write_to(Sinks.noop())
    stage.filter(bool).set_name("dangling")
    with pytest.raises(ValueError, match="'dangling' leads to no sink"):
        p.to_dag()


def test_a_function_that_cannot_be_pickled_fails_at_plan_time_naming_it() -> None:
    lock = threading.Lock()

    def guarded(n: int) -> int:
        with lock:
            return n

    p = Pipeline()
    p.read_from(Sources.items(1, 2)).map(guarded).set_name("locked").write_to(Sinks.noop())
    with pytest.raises(ValueError, match=r"stage 'locked': function '.*guarded' cannot be pickled.*lock"):
        p.to_dag()


def test_joining_a_stream_as_build_side_is_refused() -> None:
    from jetlet.core.processors.hash_join import JoinClause

    p = Pipeline()
    batch = p.read_from(Sources.items(1, 2))
    stream = p.read_from(Sources.stream_from_generator(lambda _c: iter(range(3)))).without_timestamps()
    with pytest.raises(TypeError, match="build side of a hash join must be a batch stage"):
        batch.hash_join(stream, JoinClause.on_keys(lambda x: x, lambda x: x), lambda a, b: a)  # type: ignore[arg-type]


def test_bad_arguments_name_the_stage_and_argument() -> None:
    p = Pipeline()
    stage = p.read_from(Sources.items(1)).set_name("numbers")
    with pytest.raises(TypeError, match="stage 'numbers': the map function must be callable"):
        stage.map(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="local_parallelism must be -1 or >= 1"):
        stage.set_local_parallelism(0)
    with pytest.raises(ValueError, match="ttl is measured in event time"):
        stage.grouping_key(str).map_stateful(list, lambda s, k, x: x, ttl=10)
    with pytest.raises(TypeError, match="expected a ServiceFactory"):
        stage.map_using_service(object(), lambda s, x: x)  # type: ignore[arg-type]


def test_grouping_into_lists_is_single_stage_and_keeps_every_item(jet: Any) -> None:
    # given words grouped by their first letter into lists
    def first_letter(word: str) -> str:
        return word[0]

    p = Pipeline()
    words = p.read_from(Sources.from_iterable(WORDS))
    words.grouping_key(first_letter).aggregate(to_list()).write_to(Sinks.list("lists"))
    # when planned, then no accumulate stage precedes it (its lists would carry the same words)
    names = [vertex.name for vertex in p.to_dag().vertices()]
    assert "group-and-aggregate" in names and "group-and-aggregate-prepare" not in names
    # and each letter's list holds exactly its words
    run(jet, p)
    expected: dict[str, list[str]] = collections.defaultdict(list)
    for word in WORDS:
        expected[word[0]].append(word)
    assert {letter: sorted(found) for letter, found in jet.get_list("lists")} == {
        letter: sorted(found) for letter, found in expected.items()
    }


@pytest.mark.parametrize(
    "op",
    [to_set(), filtering(lambda word: len(word) > 3, to_list()), mapping(len, to_list())],
    ids=["to_set", "filtering", "mapping"],
)
def test_operations_that_shrink_their_items_keep_their_first_stage(op: Any) -> None:
    # given a grouping into a set (duplicates dropped) or into lists of filtered or mapped items
    p = Pipeline()
    p.read_from(Sources.from_iterable(WORDS)).grouping_key(lambda word: word[0]).aggregate(op).write_to(
        Sinks.list("out")
    )
    # then a first stage next to the data shrinks what crosses to the key's owner: it is planned
    names = [vertex.name for vertex in p.to_dag().vertices()]
    assert "group-and-aggregate-prepare" in names
    assert not op.collects_items and to_list().collects_items


def test_aggregation_is_single_stage_when_the_input_is_already_partitioned_by_its_key(jet: Any) -> None:
    # given words rebalanced by the very key they are then grouped by
    def first_letter(word: str) -> str:
        return word[0]

    p = Pipeline()
    words = p.read_from(Sources.from_iterable(WORDS)).rebalance(first_letter)
    words.grouping_key(first_letter).aggregate(counting()).write_to(Sinks.list("by-letter"))
    # when planned, then no accumulate stage precedes the aggregation (the input already meets its key)
    names = [vertex.name for vertex in p.to_dag().vertices()]
    assert "group-and-aggregate" in names and "group-and-aggregate-prepare" not in names
    # and it still counts like Counter
    run(jet, p)
    assert dict(jet.get_list("by-letter")) == collections.Counter(w[0] for w in WORDS)
