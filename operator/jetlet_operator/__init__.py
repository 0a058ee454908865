"""The jetlet Kubernetes operator: JetCluster, JetJob and JetJobSnapshot, reconciled by kopf.

Run it with ``python -m jetlet_operator`` (settings from ``JETLET_OPERATOR_*``,
see :mod:`jetlet_operator.settings`); the CRDs are in ``crds/``, its RBAC rules in
``operator/deploy/rbac.yaml`` and a walk-through in ``docs/kubernetes.md``.

Layers, from pure to I/O:

* :mod:`~jetlet_operator.specs`: the specs, validated, with their defaults;
* :mod:`~jetlet_operator.builders`: the Kubernetes objects of a JetCluster (pure ``get_*``);
* :mod:`~jetlet_operator.conditions`, :mod:`~jetlet_operator.cluster_status`,
  :mod:`~jetlet_operator.job_decisions`, :mod:`~jetlet_operator.feed`: status, conditions,
  Events and the JetJob reconcile decisions (pure);
* :mod:`~jetlet_operator.jobs`: steps on a cluster through ``jetlet.client`` (blocking);
* :mod:`~jetlet_operator.kube`: the Kubernetes API (``kubernetes_asyncio``);
* :mod:`~jetlet_operator.reconcile`: observe, validate, act, report (async);
* :mod:`~jetlet_operator.handlers`: the thin kopf handlers.

The operator reaches clusters only through ``jetlet.client`` (an import-linter
contract), never the engine or the member process.
"""

__all__: list[str] = []
