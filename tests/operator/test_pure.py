"""Given specs and observations, then the builders, the status logic and the reconcile decisions are right.

No cluster and no API here: pure functions, as crate-operator tests its ``get_*`` builders.
"""

from __future__ import annotations

import pytest
from operator_fakes import FakeKube, jet_cluster, member_pod

from jetlet_operator import builders, cluster_status, conditions, reconcile, settings, specs
from jetlet_operator import job_decisions as jd

OWNER = {"kind": "JetCluster", **jet_cluster(size=3)}


def test_settings_come_from_one_prefix_and_bad_ones_are_named() -> None:
    found = settings.from_environ(
        {"JETLET_OPERATOR_LOG_LEVEL": "debug", "JETLET_OPERATOR_NAMESPACES": "a,b", "HOME": "/"}
    )
    assert (found.log_level, found.namespaces) == ("DEBUG", ("a", "b"))
    with pytest.raises(settings.SettingsError, match="JETLET_OPERATOR_COLOUR"):
        settings.from_environ({"JETLET_OPERATOR_COLOUR": "red"})
    with pytest.raises(settings.SettingsError, match="METRICS_PORT"):
        settings.from_environ({"JETLET_OPERATOR_METRICS_PORT": "70000"})


def test_the_statefulset_has_stable_identities_parallel_start_probes_and_the_member_command() -> None:
    spec = specs.cluster_spec({"size": 3, "cooperativeThreadCount": 2})
    sts = builders.get_stateful_set(OWNER, spec, "jetlet:dev")
    assert sts["spec"]["replicas"] == 3 and sts["spec"]["podManagementPolicy"] == "Parallel"
    assert sts["spec"]["serviceName"] == "jet-members"
    assert sts["metadata"]["ownerReferences"][0] == {
        "apiVersion": "jetlet.io/v1alpha1",
        "kind": "JetCluster",
        "name": "jet",
        "uid": "uid-jet",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[:5] == ["member", "--name", "$(POD_NAME)", "--host", "$(POD_IP)"]
    assert args[args.index("--discovery") + 1] == "kubernetes"
    assert args[args.index("--kubernetes-label-selector") + 1] == builders.selector("jet")
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "rest"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": "rest"}
    assert (
        sts["spec"]["selector"]["matchLabels"].items()
        <= sts["spec"]["template"]["metadata"]["labels"].items()
    )
    dns = builders.member_args("jet", specs.cluster_spec({"discovery": "dns"}), "ns")
    assert dns[dns.index("--members") + 1] == "dns:jet-members.ns.svc:8701"


def test_a_snapshot_store_is_a_volume_per_member_or_one_shared_claim() -> None:
    template = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    per_member = builders.get_stateful_set(
        OWNER, specs.cluster_spec({"snapshotStore": {"volumeClaimTemplate": template}}), "img"
    )
    shared = builders.get_stateful_set(
        OWNER, specs.cluster_spec({"snapshotStore": {"claimName": "jet-snapshots"}}), "img"
    )
    none = builders.get_stateful_set(OWNER, specs.cluster_spec({}), "img")
    for sts in (per_member, shared):
        (container,) = sts["spec"]["template"]["spec"]["containers"]
        assert container["args"][container["args"].index("--snapshot-directory") + 1] == builders.SNAPSHOT_DIR
        assert {"name": "snapshots", "mountPath": builders.SNAPSHOT_DIR} in container["volumeMounts"]
    assert per_member["spec"]["volumeClaimTemplates"] == [
        {"metadata": {"name": "snapshots"}, "spec": template}
    ]
    assert {"name": "snapshots", "persistentVolumeClaim": {"claimName": "jet-snapshots"}} in shared["spec"][
        "template"
    ]["spec"]["volumes"]
    assert "volumeClaimTemplates" not in shared["spec"]
    (plain,) = none["spec"]["template"]["spec"]["containers"]
    assert "--snapshot-directory" not in plain["args"] and "volumeClaimTemplates" not in none["spec"]


def test_a_settings_change_rolls_the_pods_and_the_other_objects_are_right() -> None:
    one = builders.get_stateful_set(OWNER, specs.cluster_spec({"backupCount": 1}), "img")
    two = builders.get_stateful_set(OWNER, specs.cluster_spec({"backupCount": 2}), "img")
    annotation = "jetlet.io/config-hash"
    assert (
        one["spec"]["template"]["metadata"]["annotations"][annotation]
        != two["spec"]["template"]["metadata"]["annotations"][annotation]
    )
    headless = builders.get_headless_service(OWNER)
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is True
    assert builders.get_role(OWNER)["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ]
    assert builders.get_pod_disruption_budget(OWNER)["spec"]["maxUnavailable"] == 1
    kinds = [o["kind"] for o in builders.get_cluster_objects(OWNER, specs.cluster_spec({}), "img")]
    assert kinds == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Service",
        "Service",
        "PodDisruptionBudget",
        "StatefulSet",
    ]


def test_cluster_status_phases_conditions_and_events() -> None:
    spec = specs.cluster_spec({"size": 2})
    pods = [
        member_pod("jet", 0, "10.0.0.1:8701"),
        member_pod("jet", 1, "10.0.0.2:8701", ready=False),
        member_pod("other", 0, "10.0.0.9:8701"),
    ]
    observed = cluster_status.members(pods, "jet")
    assert [(m.pod, m.address, m.ready) for m in observed] == [
        ("jet-0", "10.0.0.1:8701", True),
        ("jet-1", "10.0.0.2:8701", False),
    ]
    pending = cluster_status.cluster_status(spec, observed, "", 1, {}, "jet", "jet-secret")
    assert pending["phase"] == "Pending" and not conditions.is_true(pending["conditions"], "Ready")
    ready = [cluster_status.Member("jet-0", "a", True), cluster_status.Member("jet-1", "b", True)]
    running = cluster_status.cluster_status(spec, ready, "jet-0", 1, pending, "jet", "jet-secret")
    assert running["phase"] == "Running" and conditions.is_true(running["conditions"], "Ready")
    assert running["selector"] == builders.selector("jet")
    assert [r for _, r, _ in cluster_status.transition_events(pending, running)] == ["ClusterReady"]
    degraded = cluster_status.cluster_status(spec, ready[:1], "jet-0", 1, running, "jet", "jet-secret")
    assert degraded["phase"] == "Degraded" and conditions.is_true(degraded["conditions"], "Degraded")
    assert [r for _, r, _ in cluster_status.transition_events(running, degraded)] == ["MemberNotReady"]
    assert cluster_status.transition_events(degraded, degraded) == []  # no Event on a retry


def test_a_condition_keeps_its_transition_time_while_its_status_stays() -> None:
    first = conditions.set_condition([], "Ready", False, "A", "a", 1, now="t1")
    same = conditions.set_condition(first, "Ready", False, "B", "b", 2, now="t2")
    flipped = conditions.set_condition(same, "Ready", True, "C", "c", 2, now="t3")
    assert [c["lastTransitionTime"] for c in (first[0], same[0], flipped[0])] == ["t1", "t1", "t3"]


SPEC = specs.job_spec({"clusterRef": "jet", "pipeline": {"module": "a.b:c"}}, "job")
READY = jd.ClusterState(True)


def _running(status: str = "RUNNING", **more: object) -> jd.JobObservation:
    return jd.JobObservation.from_record({"id": "1", "status": status, **more})


def _spec(**changes: object) -> specs.JobSpec:
    raw = {"clusterRef": "jet", "pipeline": {"module": "a.b:c"}, **changes}
    return specs.job_spec(raw, "job")


@pytest.mark.parametrize(
    ("spec", "status", "cluster", "job", "action"),
    [
        (SPEC, {}, jd.ClusterState(False, "no member"), None, jd.Action.WAIT_CLUSTER),
        (SPEC, {}, READY, None, jd.Action.SUBMIT),
        (_spec(state="Suspended"), {}, READY, None, jd.Action.NOTHING),
        (SPEC, jd.reconciled(SPEC), READY, _running(), jd.Action.NOTHING),
        (_spec(state="Suspended"), jd.reconciled(SPEC), READY, _running(), jd.Action.SUSPEND),
        (
            SPEC,
            {**jd.reconciled(SPEC), "suspendedByOperator": True},
            READY,
            _running("SUSPENDED"),
            jd.Action.RESUME,
        ),
        (
            SPEC,
            jd.reconciled(SPEC),
            READY,
            _running("SUSPENDED"),
            jd.Action.NOTHING,
        ),  # suspended by a failure
        (_spec(restartNonce=3), jd.reconciled(SPEC), READY, _running(), jd.Action.RESTART),
        (_spec(pipeline={"module": "a.b:d"}), jd.reconciled(SPEC), READY, _running(), jd.Action.UPGRADE),
        (_spec(state="Canceled"), jd.reconciled(SPEC), jd.ClusterState(False), _running(), jd.Action.CANCEL),
        (
            _spec(pipeline={"module": "a.b:d"}),
            jd.reconciled(SPEC),
            READY,
            _running("FAILED"),
            jd.Action.SUBMIT,
        ),
        (SPEC, jd.reconciled(SPEC), READY, _running("COMPLETED"), jd.Action.NOTHING),
        (
            _spec(restartPolicy={"type": "Always"}),
            jd.reconciled(SPEC),
            READY,
            _running("COMPLETED"),
            jd.Action.WAIT_RETRY,
        ),
        (SPEC, jd.reconciled(SPEC), READY, _running("FAILED", failure="boom"), jd.Action.GIVE_UP),
        (SPEC, jd.reconciled(SPEC), READY, _running("FAILED", cancelled=True), jd.Action.NOTHING),
        # a job that ended and that the cluster no longer reports is not run again ...
        (SPEC, {**jd.reconciled(SPEC), "id": "0a", "phase": "COMPLETED"}, READY, None, jd.Action.NOTHING),
        (SPEC, {**jd.reconciled(SPEC), "id": "0a", "phase": "FAILED"}, READY, None, jd.Action.NOTHING),
        # ... unless the spec or the restart nonce changed; a running one that vanished is resubmitted
        (
            _spec(pipeline={"module": "a.b:d"}),
            {**jd.reconciled(SPEC), "id": "0a", "phase": "COMPLETED"},
            READY,
            None,
            jd.Action.SUBMIT,
        ),
        (
            _spec(restartNonce=3),
            {**jd.reconciled(SPEC), "id": "0a", "phase": "COMPLETED"},
            READY,
            None,
            jd.Action.SUBMIT,
        ),
        (SPEC, {**jd.reconciled(SPEC), "id": "0a", "phase": "RUNNING"}, READY, None, jd.Action.SUBMIT),
    ],
)
def test_decisions(
    spec: specs.JobSpec,
    status: dict[str, object],
    cluster: jd.ClusterState,
    job: jd.JobObservation | None,
    action: jd.Action,
) -> None:
    assert jd.decide(spec, status, cluster, job, now=1000.0).action is action


def test_the_restart_policy_backs_off_doubling_then_gives_up() -> None:
    spec = _spec(restartPolicy={"type": "OnFailure", "maxRetries": 2, "backoffSeconds": 10})
    failed = _running("FAILED", failure="boom")
    status = jd.reconciled(spec)
    first = jd.decide(spec, status, READY, failed, now=1000.0)
    assert (first.action, first.delay) == (jd.Action.WAIT_RETRY, 10.0)
    assert (
        jd.decide(spec, {**status, "nextRetryAt": 1010.0}, READY, failed, now=1005.0).action
        is jd.Action.WAIT_RETRY
    )
    assert (
        jd.decide(spec, {**status, "nextRetryAt": 1010.0}, READY, failed, now=1010.0).action
        is jd.Action.RETRY
    )
    assert spec.restart_policy.backoff(1) == 20.0 and spec.restart_policy.backoff(10) == 600.0
    gave_up = jd.decide(spec, {**status, "retries": 2}, READY, failed, now=2000.0)
    assert (gave_up.action, gave_up.reason) == (jd.Action.GIVE_UP, "RetriesExhausted")


def test_the_fingerprint_ignores_what_steers_the_operator() -> None:
    assert (
        _spec(state="Suspended", restartNonce=4, upgradeMode="snapshot").fingerprint() == SPEC.fingerprint()
    )
    assert _spec(processingGuarantee="EXACTLY_ONCE").fingerprint() != SPEC.fingerprint()


@pytest.mark.asyncio
async def test_reconcile_cluster_applies_the_objects_once_with_a_generated_secret_and_reports_pending() -> (
    None
):
    kube = FakeKube()
    config = settings.OperatorSettings()
    outcome = await reconcile.reconcile_cluster(jet_cluster(size=2), kube, config)
    secret = kube.objects[("Secret", "default", "jet-secret")]
    assert set(secret["data"]) == {"secret", "token"}
    await reconcile.reconcile_cluster(jet_cluster(size=2), kube, config)
    assert kube.objects[("Secret", "default", "jet-secret")] == secret  # never regenerated
    assert ("StatefulSet", "default", "jet") in kube.objects
    assert outcome.status["phase"] == "Pending" and outcome.retry_after is not None
    bad = await reconcile.reconcile_cluster({**jet_cluster(), "spec": {"size": 0}}, kube, config)
    assert bad.invalid.startswith("spec.size") and [r for _, r, _ in bad.events] == ["InvalidSpec"]
    again = reconcile.invalid_outcome(
        specs.SpecError("spec.size", "must be in [1, 100], got 0"), bad.status, 1
    )
    assert again.events == []  # the same invalid spec is not reported twice


def test_a_job_that_ended_keeps_its_phase_when_the_cluster_no_longer_reports_it() -> None:
    # given a JetJob whose job completed, then a cluster that does not report it (replaced, or a
    # member that had not learned of it yet)
    status = {**jd.reconciled(SPEC), "id": "0a", "phase": "COMPLETED"}
    decision = jd.decide(SPEC, status, READY, None, now=1000.0)
    new = jd.job_status(SPEC, None, status, 1)  # (a NOTHING decision waits for nothing)
    # then the phase stays COMPLETED (the next reconciliation decides the same), and the message
    # says why nothing is submitted
    assert new["phase"] == "COMPLETED"
    progressing = conditions.get_condition(new["conditions"], "Progressing")
    assert progressing is not None and progressing["status"] == "False" and progressing["reason"] == "Ended"
    assert "no longer reports it" in progressing["message"]
    assert jd.decide(SPEC, {**status, **new}, READY, None, now=1001.0).action is jd.Action.NOTHING
    assert "no longer reports it" in decision.message and "restartNonce" in decision.message
    # while a job that never ended, unseen, reads Pending as before
    assert jd.job_status(SPEC, None, {**status, "phase": "RUNNING"}, 1)["phase"] == "Pending"
