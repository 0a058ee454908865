"""The custom resources' specs as typed, validated values (pure).

The API server already checks a spec against the CRD's schema (types,
enums, bounds, CEL rules); :func:`cluster_spec` and :func:`job_spec` check
again what a schema cannot say, and fill the schema's defaults, so that the
operator is right about an object that reached it some other way (an older
CRD, a test, kmock). A spec the operator cannot act on is a
:class:`SpecError` naming the field (``spec.pipeline.module``): the handler
turns it into a permanent error, a ``Degraded`` condition and one Event.

>>> spec = job_spec({"clusterRef": "jet", "pipeline": {"module": "jobs.wc:pipeline"}}, "word-count")
>>> spec.name, spec.state, spec.restart_policy.type
('word-count', 'Running', 'Never')
>>> job_spec({"clusterRef": "jet", "pipeline": {}}, "x")
Traceback (most recent call last):
...
jetlet_operator.specs.SpecError: spec.pipeline: needs exactly one of inline, configMapRef and module
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from jetlet import config

JOB_STATES = ("Running", "Suspended", "Canceled")
UPGRADE_MODES = ("stateless", "snapshot", "last-snapshot")
RESTART_TYPES = ("Never", "OnFailure", "Always")
DISCOVERY_KINDS = ("kubernetes", "dns")
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")


class SpecError(ValueError):
    """A spec the operator cannot act on; ``field`` is its path (``spec.size``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _int(spec: Mapping[str, Any], key: str, default: int, low: int, high: int, prefix: str = "spec") -> int:
    value = spec.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise SpecError(f"{prefix}.{key}", f"must be an integer, got {value!r}")
    if not low <= value <= high:
        raise SpecError(f"{prefix}.{key}", f"must be in [{low}, {high}], got {value}")
    return value


def _choice(spec: Mapping[str, Any], key: str, choices: tuple[str, ...], prefix: str = "spec") -> str:
    value = spec.get(key, choices[0])
    if value not in choices:
        raise SpecError(f"{prefix}.{key}", f"must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _bool(spec: Mapping[str, Any], key: str, default: bool) -> bool:
    value = spec.get(key, default)
    if not isinstance(value, bool):
        raise SpecError(f"spec.{key}", f"must be true or false, got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    """A JetCluster's spec with its defaults."""

    size: int = 3
    image: str = ""
    image_pull_policy: str = "IfNotPresent"
    discovery: str = "kubernetes"
    cooperative_thread_count: int = 0
    flow_control_period_millis: int = 100
    backup_count: int = 1
    scale_up_delay_millis: int = 10000
    raw: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    """The spec as given: the pod-level fields (resources, env, scheduling) are copied from it."""


def cluster_spec(spec: Mapping[str, Any]) -> ClusterSpec:
    """The JetCluster spec ``spec``, checked; :class:`SpecError` naming the field otherwise."""
    pull = spec.get("imagePullPolicy", "IfNotPresent")
    if pull not in ("Always", "IfNotPresent", "Never"):
        raise SpecError("spec.imagePullPolicy", f"must be Always, IfNotPresent or Never, got {pull!r}")
    for name in ("nodeSelector", "affinity", "resources"):
        if name in spec and not isinstance(spec[name], Mapping):
            raise SpecError(f"spec.{name}", "must be an object")
    for name in ("env", "tolerations", "topologySpreadConstraints", "imagePullSecrets"):
        if name in spec and not isinstance(spec[name], list):
            raise SpecError(f"spec.{name}", "must be a list")
    store = spec.get("snapshotStore", {})
    if not isinstance(store, Mapping):
        raise SpecError("spec.snapshotStore", "must be an object")
    if store.get("claimName") and store.get("volumeClaimTemplate"):
        raise SpecError("spec.snapshotStore", "give claimName or volumeClaimTemplate, not both")
    return ClusterSpec(
        size=_int(spec, "size", 3, 1, 100),
        image=str(spec.get("image", "") or ""),
        image_pull_policy=str(pull),
        discovery=_choice(spec, "discovery", DISCOVERY_KINDS),
        cooperative_thread_count=_int(spec, "cooperativeThreadCount", 0, 0, 256),
        flow_control_period_millis=_int(spec, "flowControlPeriodMillis", 100, 1, 60000),
        backup_count=_int(spec, "backupCount", 1, 0, 6),
        scale_up_delay_millis=_int(spec, "scaleUpDelayMillis", 10000, 0, 3600000),
        raw=dict(spec),
    )


@dataclasses.dataclass(frozen=True)
class RestartPolicy:
    """What to do when the job fails: ``type``, ``max_retries``, ``backoff_seconds`` (doubling)."""

    type: str = "Never"
    max_retries: int = 3
    backoff_seconds: int = 10

    def backoff(self, retries_done: int) -> float:
        """Seconds to wait before retry number ``retries_done + 1``: doubling, at most 600."""
        return float(min(self.backoff_seconds * 2**retries_done, 600)) if self.backoff_seconds else 0.0


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """Where the job's code is: exactly one of ``inline``, ``config_map`` (name, key) and ``module``."""

    inline: str = ""
    config_map: tuple[str, str] | None = None
    module: str = ""
    entrypoint: str = "pipeline"
    args: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """A JetJob's spec with its defaults."""

    cluster_ref: str
    name: str
    pipeline: Pipeline
    state: str = "Running"
    restart_nonce: int = 0
    processing_guarantee: str = "NONE"
    snapshot_interval_millis: int = 10000
    auto_scaling: bool = True
    suspend_on_failure: bool = False
    split_brain_protection: bool = False
    timeout_millis: int = 0
    initial_snapshot_ref: str = ""
    upgrade_mode: str = "stateless"
    restart_policy: RestartPolicy = RestartPolicy()

    def fingerprint(self) -> str:
        """A digest of what a running job cannot change without an upgrade: code, arguments, settings.

        ``state``, ``restartNonce``, ``upgradeMode`` and ``restartPolicy`` are left out:
        they steer the operator, not the job.
        """
        return hashlib.sha256(self.upgradable_json().encode()).hexdigest()[:16]

    def upgradable_json(self) -> str:
        """The parts of the spec that make up the job, as canonical JSON."""
        parts = {
            "pipeline": {
                "inline": self.pipeline.inline,
                "configMap": list(self.pipeline.config_map or ()),
                "module": self.pipeline.module,
                "entrypoint": self.pipeline.entrypoint,
                "args": self.pipeline.args,
            },
            "processingGuarantee": self.processing_guarantee,
            "snapshotIntervalMillis": self.snapshot_interval_millis,
            "autoScaling": self.auto_scaling,
            "suspendOnFailure": self.suspend_on_failure,
            "splitBrainProtection": self.split_brain_protection,
            "timeoutMillis": self.timeout_millis,
        }
        return json.dumps(parts, sort_keys=True, separators=(",", ":"))

    def job_config(self, initial_snapshot: str | None = None) -> config.JobConfig:
        """The jetlet ``JobConfig`` of this spec (``initial_snapshot`` overrides ``initialSnapshotRef``)."""
        return config.JobConfig(
            name=self.name,
            processing_guarantee=config.ProcessingGuarantee(self.processing_guarantee),
            snapshot_interval_millis=self.snapshot_interval_millis,
            auto_scaling=self.auto_scaling,
            suspend_on_failure=self.suspend_on_failure,
            split_brain_protection=self.split_brain_protection,
            initial_snapshot_name=initial_snapshot or self.initial_snapshot_ref or None,
            timeout_millis=self.timeout_millis,
        )


def _pipeline(value: object) -> Pipeline:
    if not isinstance(value, Mapping):
        raise SpecError("spec.pipeline", "is required: an object with one of inline, configMapRef, module")
    given = [key for key in ("inline", "configMapRef", "module") if value.get(key)]
    if len(given) != 1:
        raise SpecError("spec.pipeline", "needs exactly one of inline, configMapRef and module")
    entrypoint = value.get("entrypoint", "pipeline")
    if not isinstance(entrypoint, str) or not _IDENTIFIER.match(entrypoint):
        raise SpecError("spec.pipeline.entrypoint", f"must be a Python identifier, got {entrypoint!r}")
    args = value.get("args", {})
    if not isinstance(args, Mapping):
        raise SpecError("spec.pipeline.args", "must be an object of keyword arguments")
    if given == ["module"]:
        module = value["module"]
        if not isinstance(module, str) or not _MODULE.match(module):
            raise SpecError("spec.pipeline.module", f"must be package.module:function, got {module!r}")
        return Pipeline(module=module, entrypoint=entrypoint, args=dict(args))
    if given == ["inline"]:
        if not isinstance(value["inline"], str):
            raise SpecError("spec.pipeline.inline", "must be Python source text")
        return Pipeline(inline=value["inline"], entrypoint=entrypoint, args=dict(args))
    ref = value["configMapRef"]
    if not isinstance(ref, Mapping) or not ref.get("name"):
        raise SpecError("spec.pipeline.configMapRef.name", "is required")
    return Pipeline(
        config_map=(str(ref["name"]), str(ref.get("key") or "pipeline.py")),
        entrypoint=entrypoint,
        args=dict(args),
    )


def job_spec(spec: Mapping[str, Any], default_name: str) -> JobSpec:
    """The JetJob spec ``spec`` (its job named ``default_name`` unless ``spec.name``), checked."""
    cluster_ref = spec.get("clusterRef")
    if not isinstance(cluster_ref, str) or not cluster_ref:
        raise SpecError("spec.clusterRef", "is required: the name of a JetCluster in this namespace")
    policy = spec.get("restartPolicy") or {}
    if not isinstance(policy, Mapping):
        raise SpecError("spec.restartPolicy", "must be an object")
    snapshot = spec.get("initialSnapshotRef", "") or ""
    if not isinstance(snapshot, str):
        raise SpecError("spec.initialSnapshotRef", "must be a snapshot name")
    return JobSpec(
        cluster_ref=cluster_ref,
        name=str(spec.get("name") or default_name),
        pipeline=_pipeline(spec.get("pipeline")),
        state=_choice(spec, "state", JOB_STATES),
        restart_nonce=_int(spec, "restartNonce", 0, 0, 2**62),
        processing_guarantee=_choice(spec, "processingGuarantee", ("NONE", "AT_LEAST_ONCE", "EXACTLY_ONCE")),
        snapshot_interval_millis=_int(spec, "snapshotIntervalMillis", 10000, 1, 86400000),
        auto_scaling=_bool(spec, "autoScaling", True),
        suspend_on_failure=_bool(spec, "suspendOnFailure", False),
        split_brain_protection=_bool(spec, "splitBrainProtection", False),
        timeout_millis=_int(spec, "timeoutMillis", 0, 0, 2**62),
        initial_snapshot_ref=snapshot,
        upgrade_mode=_choice(spec, "upgradeMode", UPGRADE_MODES),
        restart_policy=RestartPolicy(
            type=_choice(policy, "type", RESTART_TYPES, "spec.restartPolicy"),
            max_retries=_int(policy, "maxRetries", 3, 0, 1000, "spec.restartPolicy"),
            backoff_seconds=_int(policy, "backoffSeconds", 10, 0, 3600, "spec.restartPolicy"),
        ),
    )


@dataclasses.dataclass(frozen=True)
class SnapshotSpec:
    """A JetJobSnapshot's spec."""

    jet_job_ref: str
    name: str
    cancel_job: bool = False


def snapshot_spec(spec: Mapping[str, Any], default_name: str) -> SnapshotSpec:
    """The JetJobSnapshot spec ``spec``, checked."""
    ref = spec.get("jetJobRef")
    if not isinstance(ref, str) or not ref:
        raise SpecError("spec.jetJobRef", "is required: the name of a JetJob in this namespace")
    return SnapshotSpec(ref, str(spec.get("name") or default_name), _bool(spec, "cancelJob", False))
