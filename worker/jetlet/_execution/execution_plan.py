"""The execution plan: a DAG turned into one member's tasklets and queues.

For every vertex the plan resolves the local parallelism (the vertex's own,
else its meta supplier's preference, else the member's cooperative thread
count), asks the meta supplier for this member's supplier, and the supplier
for that many processors. For every edge it creates one bounded queue per
(producer, consumer) pair that the routing policy can use: all pairs for
unicast, partitioned and broadcast; ``i -> i mod n`` for isolated; every
producer to consumer 0 for all-to-one. Each producer gets one outbound
collector per edge; each consumer one inbound stream per edge.

Partitioned edges route partition ``p`` to the consumer ``p mod n``: one
table, the same on every producer, so a key always meets the same processor.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from jetlet import config
from jetlet._execution import inbound, outbound, queues
from jetlet._execution.processor_tasklet import ProcessorTasklet
from jetlet.core import dag as dag_mod
from jetlet.core import edge as edge_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import processor as proc


@dataclasses.dataclass
class ExecutionPlan:
    """What runs one job on one member."""

    tasklets: list[ProcessorTasklet]
    queues: list[queues.SpscQueue]
    suppliers: list[proc.ProcessorSupplier]
    meta_suppliers: list[proc.ProcessorMetaSupplier]
    parallelism: Mapping[str, int]

    def close_suppliers(self, error: BaseException | None) -> None:
        for supplier in self.suppliers:
            supplier.close(error)
        for meta in self.meta_suppliers:
            meta.close(error)


def _resolve_parallelism(vertex: dag_mod.Vertex, instance: config.InstanceConfig) -> int:
    if vertex.local_parallelism != -1:
        return vertex.local_parallelism
    preferred = vertex.meta_supplier.preferred_local_parallelism()
    if preferred != -1:
        if preferred < 1:
            raise ValueError(f"vertex {vertex.name!r}: preferred local parallelism {preferred} is not >= 1")
        return preferred
    return instance.cooperative_thread_count


def build(
    dag: dag_mod.DAG,
    job_id: int,
    job_name: str,
    job_config: config.JobConfig,
    instance: config.InstanceConfig,
    member_index: int = 0,
    member_count: int = 1,
    data_store: Any = None,
) -> ExecutionPlan:
    """Plan ``dag`` for the member ``member_index`` of ``member_count``."""
    order = dag.validate()
    parallelism = {v.name: _resolve_parallelism(v, instance) for v in order}
    processors: dict[str, list[proc.Processor]] = {}
    contexts: dict[str, list[proc.ProcessorContext]] = {}
    suppliers: list[proc.ProcessorSupplier] = []
    metas: list[proc.ProcessorMetaSupplier] = []
    for vertex in order:
        count = parallelism[vertex.name]
        logger = logging.getLogger(f"jetlet.job.{job_name}.{vertex.name}")
        meta_context = proc.MetaSupplierContext(
            job_id=job_id,
            job_name=job_name,
            vertex_name=vertex.name,
            member_count=member_count,
            local_parallelism=count,
            total_parallelism=count * member_count,
            partition_count=instance.partition_count,
            processing_guarantee=job_config.processing_guarantee,
            job_arguments=job_config.arguments,
            logger=logger,
            data_store=data_store,
        )
        meta = vertex.meta_supplier
        meta.init(meta_context)
        metas.append(meta)
        supplier = meta.get(member_index)
        supplier_context = proc.ProcessorSupplierContext(**_fields(meta_context), member_index=member_index)
        supplier.init(supplier_context)
        suppliers.append(supplier)
        made = supplier.get(count)
        if len(made) != count:
            raise ValueError(
                f"vertex {vertex.name!r}: its supplier made {len(made)} processors, expected {count}"
            )
        for processor in made:
            if not isinstance(processor, proc.Processor):
                kind = type(processor).__qualname__
                raise TypeError(f"vertex {vertex.name!r}: its supplier made a {kind}, not a Processor")
        processors[vertex.name] = made
        contexts[vertex.name] = [
            proc.ProcessorContext(
                **_fields(supplier_context),
                global_processor_index=member_index * count + i,
                local_processor_index=i,
            )
            for i in range(count)
        ]

    default_edge = instance.default_edge_config
    all_queues: list[queues.SpscQueue] = []
    # collectors[vertex][processor][source ordinal]; streams[vertex][processor] -> list of (edge, queues)
    collectors: dict[str, list[list[outbound.OutboundCollector]]] = {
        v.name: [[] for _ in range(parallelism[v.name])] for v in order
    }
    consumer_queues: dict[str, list[list[tuple[edge_mod.Edge, list[queues.SpscQueue]]]]] = {
        v.name: [[] for _ in range(parallelism[v.name])] for v in order
    }
    for vertex in order:
        for edge in dag.outbound_edges(vertex.name):
            dest: str = edge.dest_name  # type: ignore[assignment]
            producers, consumers = parallelism[vertex.name], parallelism[dest]
            capacity = (edge.config or default_edge).queue_size
            links = _links(edge.routing_policy, producers, consumers)
            matrix: dict[tuple[int, int], queues.SpscQueue] = {}
            for p, c in links:
                queue = queues.SpscQueue(capacity, f"{vertex.name}#{p}->{dest}#{c}")
                matrix[(p, c)] = queue
                all_queues.append(queue)
            table = [partition % consumers for partition in range(instance.partition_count)]
            for p in range(producers):
                targets = [matrix[(p, c)] for c in range(consumers) if (p, c) in matrix]
                collectors[vertex.name][p].append(
                    outbound.OutboundCollector(
                        targets,
                        edge.routing_policy,
                        edge.key_fn,
                        edge.partitioner,
                        table,
                    )
                )
            for c in range(consumers):
                sources = [matrix[(p, c)] for p in range(producers) if (p, c) in matrix]
                consumer_queues[dest][c].append((edge, sources))

    tasklets: list[ProcessorTasklet] = []
    for vertex in order:
        for index, processor in enumerate(processors[vertex.name]):
            edges = consumer_queues[vertex.name][index]
            coalescer = inbound.WatermarkCoalescer(sum(len(q) for _, q in edges))
            streams = []
            first = 0
            for edge, source_queues in edges:
                streams.append(
                    inbound.InboundStream(
                        edge.dest_ordinal, edge.priority_value, source_queues, coalescer, first
                    )
                )
                first += len(source_queues)
            outs = collectors[vertex.name][index]
            tasklets.append(
                ProcessorTasklet(
                    f"{vertex.name}#{index}",
                    processor,
                    contexts[vertex.name][index],
                    outbox_mod.Outbox(len(outs)),
                    streams,
                    outs,
                )
            )
    return ExecutionPlan(tasklets, all_queues, suppliers, metas, parallelism)


def _links(policy: edge_mod.RoutingPolicy, producers: int, consumers: int) -> list[tuple[int, int]]:
    if policy is edge_mod.RoutingPolicy.ISOLATED:
        return [(p, p % consumers) for p in range(producers)]
    if policy is edge_mod.RoutingPolicy.ALL_TO_ONE:
        return [(p, 0) for p in range(producers)]
    return [(p, c) for p in range(producers) for c in range(consumers)]


def _fields(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
