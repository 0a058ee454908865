"""A JetCluster's status from what was observed: its pods and its coordinator (pure).

:func:`members` turns the member pods into ``(pod, address, ready)``: a pod
being deleted or without an IP is left out; ``address`` is the pod IP and
its container port named ``rest``. :func:`cluster_status` computes the
status: ``phase`` is ``Running`` when ``size`` members are ready,
``Degraded`` when fewer are after the cluster once ran (a member was lost),
else ``Pending``; the conditions ``Ready``, ``Progressing`` and ``Degraded``
say the same for ``kubectl wait``. :func:`transition_events` names the
Events a change of status deserves (``ClusterReady``, ``MemberNotReady``,
``MemberReady``), each posted once per transition; the cluster's own view
(``MemberLost``, ``MemberJoined``, ``CoordinatorChanged``) comes from its event feed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from jetlet_operator import builders, conditions, specs


@dataclasses.dataclass(frozen=True)
class Member:
    """One member pod as observed."""

    pod: str
    address: str
    ready: bool

    def to_dict(self) -> dict[str, Any]:
        return {"pod": self.pod, "address": self.address, "ready": self.ready}


def _rest_port(pod: Mapping[str, Any], default: int) -> int:
    for container in pod.get("spec", {}).get("containers", []):
        for port in container.get("ports", []):
            if port.get("name") == "rest":
                return int(port["containerPort"])
    return default


def _ready(pod: Mapping[str, Any]) -> bool:
    found = conditions.get_condition(pod.get("status", {}).get("conditions"), "Ready")
    return found is not None and found.get("status") == "True"


def members(
    pods: Sequence[Mapping[str, Any]], cluster: str, rest_port: int = builders.REST_PORT
) -> list[Member]:
    """The member pods of ``cluster`` among ``pods``, by name; those being deleted or without an IP left out.

    The labels are checked here too: kmock and some list paths do not filter by selector.
    """
    wanted = builders.selector_labels(cluster)
    found = []
    for pod in pods:
        metadata = pod.get("metadata", {})
        pod_labels = metadata.get("labels") or {}
        if any(pod_labels.get(k) != v for k, v in wanted.items()):
            continue
        if metadata.get("deletionTimestamp"):
            continue
        status = pod.get("status", {})
        ip = status.get("podIP")
        if not ip or status.get("phase") in ("Succeeded", "Failed"):
            continue
        found.append(Member(metadata["name"], f"{ip}:{_rest_port(pod, rest_port)}", _ready(pod)))
    return sorted(found, key=lambda m: m.pod)


def cluster_status(
    spec: specs.ClusterSpec,
    observed: Sequence[Member],
    coordinator: str,
    generation: int,
    old: Mapping[str, Any],
    cluster: str,
    secret_name: str,
) -> dict[str, Any]:
    """The new ``status`` of a JetCluster whose members were observed as ``observed``."""
    ready = sum(1 for m in observed if m.ready)
    was_running = old.get("phase") in ("Running", "Degraded")
    if ready >= spec.size:
        phase, reason, message = "Running", "MembersReady", f"{ready} of {spec.size} members ready"
    elif was_running:
        phase, reason = "Degraded", "MembersMissing"
        message = f"{ready} of {spec.size} members ready; the StatefulSet replaces the missing ones"
    else:
        phase, reason, message = "Pending", "MembersStarting", f"{ready} of {spec.size} members ready"
    found = old.get("conditions") or []
    found = conditions.set_condition(found, "Ready", phase == "Running", reason, message, generation)
    found = conditions.set_condition(found, "Progressing", phase != "Running", reason, message, generation)
    found = conditions.set_condition(found, "Degraded", phase == "Degraded", reason, message, generation)
    return {
        "phase": phase,
        "size": len(observed),
        "readyMembers": ready,
        "members": [m.to_dict() for m in observed],
        "coordinator": coordinator,
        "selector": builders.selector(cluster),
        "secretName": secret_name,
        "observedGeneration": generation,
        "conditions": found,
    }


def transition_events(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The Events (type, reason, message) that the change from ``old`` to ``new`` status deserves."""
    found: list[tuple[str, str, str]] = []
    old_pods = {m["pod"] for m in old.get("members") or [] if m.get("ready")}
    new_pods = {m["pod"] for m in new.get("members") or [] if m.get("ready")}
    if old.get("phase") in ("Running", "Degraded"):
        for pod in sorted(old_pods - new_pods):
            found.append(("Warning", "MemberNotReady", f"member pod {pod} is no longer ready"))
        for pod in sorted(new_pods - old_pods):
            found.append(("Normal", "MemberReady", f"member pod {pod} is ready"))
    if new.get("phase") == "Running" and old.get("phase") != "Running":
        found.append(("Normal", "ClusterReady", f"{new.get('readyMembers')} members ready"))
    return found
