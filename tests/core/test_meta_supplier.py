"""Meta supplier -> supplier -> processors: who is asked when, and what every context says.

The per-member protocol is driven through the execution plan (``member_index`` of
``member_count``), which is what each member runs; an embedded job shows the
contexts reaching real processors.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

import jetlet
from jetlet import config
from jetlet._execution import execution_plan
from jetlet.core import (
    DAG,
    Edge,
    Inbox,
    MetaSupplierContext,
    Processor,
    ProcessorContext,
    ProcessorMetaSupplier,
    ProcessorSupplier,
    ProcessorSupplierContext,
    processors,
)


class _RecordingSupplier(ProcessorSupplier):
    def __init__(self, member: int, log: list[tuple[Any, ...]]) -> None:
        self.member = member
        self.log = log

    def init(self, context: ProcessorSupplierContext) -> None:
        self.log.append(("supplier.init", self.member, context.member_index, context.local_parallelism))

    def get(self, count: int) -> list[Processor]:
        self.log.append(("supplier.get", self.member, count))
        return [Processor() for _ in range(count)]

    def close(self, error: BaseException | None) -> None:
        self.log.append(("supplier.close", self.member, error))


class _RecordingMeta(ProcessorMetaSupplier):
    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.contexts: list[MetaSupplierContext] = []

    def init(self, context: MetaSupplierContext) -> None:
        self.contexts.append(context)

    def get(self, member_index: int) -> ProcessorSupplier:
        self.log.append(("meta.get", member_index))
        return _RecordingSupplier(member_index, self.log)


def _plan(dag: DAG, member: int, members: int) -> execution_plan.ExecutionPlan:
    return execution_plan.build(
        dag,
        job_id=11,
        job_name="meta-test",
        job_config=config.JobConfig(processing_guarantee=config.ProcessingGuarantee.EXACTLY_ONCE),
        instance=config.InstanceConfig(),
        member_index=member,
        member_count=members,
    )


def test_given_three_members_when_planned_then_meta_asked_once_per_member_for_local_parallelism() -> None:
    # given a vertex with local parallelism 4 on a cluster of 3
    meta = _RecordingMeta()
    dag = DAG()
    dag.new_vertex("v", meta, local_parallelism=4)
    # when each member plans the job
    plans = [_plan(dag, member, 3) for member in range(3)]
    # then
    assert meta.log == [
        entry
        for member in range(3)
        for entry in (("meta.get", member), ("supplier.init", member, member, 4), ("supplier.get", member, 4))
    ]
    assert all(
        c.total_parallelism == 12 and c.member_count == 3 and c.vertex_name == "v" for c in meta.contexts
    )
    assert all(c.job_id == 11 and c.job_name == "meta-test" for c in meta.contexts)
    assert meta.contexts[0].processing_guarantee is config.ProcessingGuarantee.EXACTLY_ONCE
    assert meta.contexts[0].partition_count == 271
    # and each processor's context places it in the cluster
    indices = []
    for member, plan in enumerate(plans):
        for local, tasklet in enumerate(plan.tasklets):
            ctx = tasklet.context
            assert (ctx.member_index, ctx.local_processor_index) == (member, local)
            assert ctx.global_processor_index == member * 4 + local
            assert ctx.total_parallelism == 12 and ctx.local_parallelism == 4
            assert ctx.snapshots_enabled
            assert isinstance(ctx.logger, logging.Logger)
            indices.append(ctx.global_processor_index)
    assert sorted(indices) == list(range(12))
    # and closing the plan closes the suppliers with the error
    boom = RuntimeError("x")
    plans[1].close_suppliers(boom)
    assert ("supplier.close", 1, boom) in meta.log


def test_given_no_vertex_parallelism_when_planned_then_meta_preference_applies() -> None:
    dag = DAG()
    dag.new_vertex("src", processors.source_from_iterable([1]))
    dag.new_vertex("pref", ProcessorMetaSupplier.of(Processor, preferred_local_parallelism=3))
    dag.new_vertex("plain", Processor)
    plan = _plan(dag, 0, 1)
    assert plan.parallelism == {"src": 1, "pref": 3, "plain": 1}


def test_given_force_total_parallelism_one_when_planned_on_three_members_then_only_member_0_has_it() -> None:
    made: list[int] = []

    class _Real(Processor):
        def __init__(self) -> None:
            made.append(1)

    meta = ProcessorMetaSupplier.force_total_parallelism_one(_Real)
    assert meta.preferred_local_parallelism() == 1
    dag = DAG()
    dag.new_vertex("single", meta)
    plans = [_plan(dag, member, 3) for member in range(3)]
    kinds = [type(plan.tasklets[0].processor) for plan in plans]
    assert kinds == [_Real, Processor, Processor]
    assert made == [1]


def test_given_supplier_making_wrong_count_when_planned_then_error_names_vertex() -> None:
    class _Short(ProcessorSupplier):
        def get(self, count: int) -> list[Processor]:
            return [Processor()]

    dag = DAG()
    dag.new_vertex("short", _Short(), local_parallelism=2)
    with pytest.raises(ValueError, match="vertex 'short': its supplier made 1 processors, expected 2"):
        _plan(dag, 0, 1)


def test_given_supplier_making_non_processor_when_planned_then_type_error_names_vertex() -> None:
    dag = DAG()
    dag.new_vertex("odd", lambda: "not a processor")
    with pytest.raises(TypeError, match="vertex 'odd': its supplier made a str"):
        _plan(dag, 0, 1)


def test_given_of_factory_when_get_then_new_processor_each_time() -> None:
    supplier = ProcessorSupplier.of(Processor)
    made = supplier.get(3)
    assert len({id(p) for p in made}) == 3
    meta = ProcessorMetaSupplier.of(supplier)
    assert meta.get(0) is supplier and meta.get(5) is supplier
    assert meta.preferred_local_parallelism() == -1


class _ContextSink(Processor):
    seen: list[ProcessorContext] = []

    def init(self, outbox: Any, context: ProcessorContext) -> None:
        super().init(outbox, context)
        _ContextSink.seen.append(context)

    def process(self, ordinal: int, inbox: Inbox) -> None:
        inbox.clear()


def test_given_embedded_job_when_run_then_each_processor_gets_its_own_context() -> None:
    _ContextSink.seen = []
    dag = DAG()
    src = dag.new_vertex("src", processors.source_from_iterable(range(10)))
    sink = dag.new_vertex("sink", _ContextSink, local_parallelism=3)
    dag.edge(Edge.between(src, sink))
    with jetlet.embedded() as jet:
        jet.new_job(dag).join(10)
    seen = sorted(_ContextSink.seen, key=lambda c: c.global_processor_index)
    assert [(c.global_processor_index, c.local_processor_index) for c in seen] == [(0, 0), (1, 1), (2, 2)]
    assert all(c.vertex_name == "sink" and c.total_parallelism == 3 and c.member_index == 0 for c in seen)
    assert all(c.logger.name.endswith(".sink") for c in seen)
    assert all(c.data_store is not None for c in seen)
