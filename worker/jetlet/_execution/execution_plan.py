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
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from jetlet import config
from jetlet._execution import inbound, outbound, queues, snapshots
from jetlet._execution.processor_tasklet import ProcessorTasklet
from jetlet._execution.progress import Tasklet
from jetlet.core import dag as dag_mod
from jetlet.core import edge as edge_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import processor as proc


class RemoteEdges(Protocol):
    """The network's side of distributed edges (``jetlet._network.tasklets.RemoteLinks``)."""

    def outbound_queue(
        self, edge_id: int, dest_member: int, producer: int, consumer: int, capacity: int, name: str
    ) -> queues.SpscQueue: ...

    def inbound_queue(
        self, edge_id: int, source_member: int, producer: int, consumer: int, capacity: int, name: str
    ) -> queues.SpscQueue: ...

    def tasklets(self) -> list[Tasklet]: ...

    def sender_count(self) -> int:
        """How many network senders the queues made so far feed."""
        ...

    def bound_senders(self, max_in_flight_bytes: int) -> None:
        """Let each sender have at most this many bytes sent and not yet taken in by the receiver."""
        ...


@dataclasses.dataclass
class ExecutionPlan:
    """What runs one job on one member."""

    tasklets: list[ProcessorTasklet]
    queues: list[queues.SpscQueue]
    suppliers: list[proc.ProcessorSupplier]
    meta_suppliers: list[proc.ProcessorMetaSupplier]
    parallelism: Mapping[str, int]
    remote: RemoteEdges | None = None

    def all_tasklets(self) -> list[Tasklet]:
        """The processor tasklets and, on a cluster, the distributed edges' senders and receivers."""
        network = self.remote.tasklets() if self.remote is not None else []
        return [*self.tasklets, *network]

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


def resolve_parallelism(dag: dag_mod.DAG, instance: config.InstanceConfig) -> dict[str, int]:
    """Every vertex's local parallelism on a member with ``instance``'s settings."""
    return {v.name: _resolve_parallelism(v, instance) for v in dag.validate()}


def build(
    dag: dag_mod.DAG,
    job_id: int,
    job_name: str,
    job_config: config.JobConfig,
    instance: config.InstanceConfig,
    member_index: int = 0,
    member_count: int = 1,
    data_store: Any = None,
    remote: RemoteEdges | None = None,
    partition_owners: Sequence[int] | None = None,
    member_snapshots: snapshots.MemberSnapshots | None = None,
    restored: Mapping[str, Sequence[Sequence[tuple[Any, Any]]]] | None = None,
    execution_id: int = 0,
) -> ExecutionPlan:
    """Plan ``dag`` for the member ``member_index`` of ``member_count``.

    With more than one member, distributed edges reach the consumers of
    every member: ``remote`` makes the queues to and from the other members
    and their tasklets, and ``partition_owners[p]`` is the member that owns
    partition ``p`` (``p mod member_count`` by default).

    With ``member_snapshots`` the tasklets take part in snapshots; with
    ``restored``, ``restored[vertex][i]`` is the saved state that local
    processor ``i`` of ``vertex`` starts from.
    """
    owners = list(partition_owners) if partition_owners is not None else None
    order = dag.validate()
    parallelism = resolve_parallelism(dag, instance)
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
            execution_id=execution_id,
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
    edge_ids = {id(edge): index for index, edge in enumerate(dag.edges())}
    for vertex in order:
        for edge in dag.outbound_edges(vertex.name):
            dest: str = edge.dest_name  # type: ignore[assignment]
            producers, consumers = parallelism[vertex.name], parallelism[dest]
            edge_config = edge.config or default_edge
            capacity = edge_config.batch_queue_size if edge.carries_batches else edge_config.queue_size
            if edge.is_distributed and member_count > 1:
                if remote is None:
                    raise ValueError("a plan with distributed edges on a cluster needs its RemoteLinks")
                _connect_distributed(
                    _DistributedEdge(edge, edge_ids[id(edge)], vertex.name, producers, consumers, capacity),
                    member_index,
                    member_count,
                    remote,
                    owners or [p % member_count for p in range(instance.partition_count)],
                    collectors,
                    consumer_queues,
                    all_queues,
                )
                continue
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
                        edge.splitter,
                    )
                )
            for c in range(consumers):
                sources = [matrix[(p, c)] for p in range(producers) if (p, c) in matrix]
                consumer_queues[dest][c].append((edge, sources))

    tasklets: list[ProcessorTasklet] = []
    for vertex in order:
        for index, processor in enumerate(processors[vertex.name]):
            edges = consumer_queues[vertex.name][index]
            queue_count = sum(len(q) for _, q in edges)
            coalescer = inbound.WatermarkCoalescer(queue_count)
            last_priority = max((edge.priority_value for edge, _ in edges), default=0)
            never_block: set[int] = set()
            first = 0
            for edge, source_queues in edges:
                if edge.priority_value != last_priority:
                    never_block.update(range(first, first + len(source_queues)))
                first += len(source_queues)
            exactly_once = job_config.processing_guarantee is config.ProcessingGuarantee.EXACTLY_ONCE
            aligner = snapshots.BarrierAligner(queue_count, exactly_once, frozenset(never_block))
            streams = []
            first = 0
            for edge, source_queues in edges:
                streams.append(
                    inbound.InboundStream(
                        edge.dest_ordinal, edge.priority_value, source_queues, coalescer, first, aligner
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
                    vertex_name=vertex.name,
                    member_snapshots=member_snapshots,
                    index=len(tasklets),
                    aligner=aligner,
                    restored=restored[vertex.name][index] if restored and vertex.name in restored else None,
                )
            )
    _share_queued_bytes(instance.max_queued_bytes, all_queues, tasklets, remote)
    return ExecutionPlan(tasklets, all_queues, suppliers, metas, parallelism, remote)


def _share_queued_bytes(
    max_queued_bytes: int,
    all_queues: list[queues.SpscQueue],
    tasklets: list[ProcessorTasklet],
    remote: RemoteEdges | None,
) -> None:
    """Give every queue and network sender of the execution an equal share of ``max_queued_bytes``;
    a processor's outbox buckets, which fill its queues, hold at most as much."""
    senders = remote.sender_count() if remote is not None else 0
    share = max(1, max_queued_bytes // max(1, len(all_queues) + senders))
    for queue in all_queues:
        queue.max_bytes = share
    for tasklet in tasklets:
        tasklet.bucket_bytes = share
        for ordinal in range(tasklet.outbox.bucket_count()):
            tasklet.outbox.fit_bucket(ordinal, 1)  # until the first delivery shows the items' weight
    if remote is not None:
        remote.bound_senders(share)


@dataclasses.dataclass(frozen=True)
class _DistributedEdge:
    edge: edge_mod.Edge
    edge_id: int
    source: str
    producers: int
    consumers: int
    capacity: int


def _connect_distributed(
    spec: _DistributedEdge,
    member: int,
    members: int,
    remote: RemoteEdges,
    partition_owners: Sequence[int],
    collectors: dict[str, list[list[outbound.OutboundCollector]]],
    consumer_queues: dict[str, list[list[tuple[edge_mod.Edge, list[queues.SpscQueue]]]]],
    all_queues: list[queues.SpscQueue],
) -> None:
    """Queues of a distributed edge on a cluster, consumers numbered globally as ``member * n + c``.

    Every producer of this member reaches the consumers it may route to on
    every member: all of them for unicast, partitioned and broadcast, global
    consumer 0 (on the first member) for all-to-one. The consumers of this
    member get one queue per producer of every member that may reach them.
    """
    edge, n = spec.edge, spec.consumers
    dest: str = edge.dest_name  # type: ignore[assignment]
    policy = edge.routing_policy
    if policy is edge_mod.RoutingPolicy.ISOLATED:
        raise ValueError(f"edge {spec.source!r} -> {dest!r}: an isolated edge cannot be distributed")
    all_to_one = policy is edge_mod.RoutingPolicy.ALL_TO_ONE
    reachable = [0] if all_to_one else list(range(members * n))
    local: dict[tuple[int, int], queues.SpscQueue] = {}
    for p in range(spec.producers):
        targets: list[queues.SpscQueue] = []
        for g in reachable:
            m, c = divmod(g, n)
            name = f"{spec.source}#{member}.{p}->{dest}#{m}.{c}"
            if m == member:
                queue = queues.SpscQueue(spec.capacity, name)
                local[(p, c)] = queue
            else:
                queue = remote.outbound_queue(spec.edge_id, m, p, c, spec.capacity, name)
            all_queues.append(queue)
            targets.append(queue)
        table = [
            reachable.index(partition_owners[partition] * n + partition % n) if not all_to_one else 0
            for partition in range(len(partition_owners))
        ]
        collectors[spec.source][p].append(
            outbound.OutboundCollector(targets, policy, edge.key_fn, edge.partitioner, table, edge.splitter)
        )
    for c in range(n):
        if all_to_one and (member, c) != (0, 0):
            consumer_queues[dest][c].append((edge, []))
            continue
        sources: list[queues.SpscQueue] = []
        for m in range(members):
            for p in range(spec.producers):
                if m == member:
                    sources.append(local[(p, c)])
                else:
                    name = f"{spec.source}#{m}.{p}->{dest}#{member}.{c}"
                    queue = remote.inbound_queue(spec.edge_id, m, p, c, spec.capacity, name)
                    all_queues.append(queue)
                    sources.append(queue)
        consumer_queues[dest][c].append((edge, sources))


def _links(policy: edge_mod.RoutingPolicy, producers: int, consumers: int) -> list[tuple[int, int]]:
    if policy is edge_mod.RoutingPolicy.ISOLATED:
        return [(p, p % consumers) for p in range(producers)]
    if policy is edge_mod.RoutingPolicy.ALL_TO_ONE:
        return [(p, 0) for p in range(producers)]
    return [(p, c) for p in range(producers) for c in range(consumers)]


def _fields(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
