"""The jetlet Kubernetes operator (not yet built).

This package will hold a kopf operator that reconciles three custom resources:
``JetCluster`` (a set of jetlet worker pods forming one cluster), ``JetJob`` (a
pipeline submitted to a cluster, driven to completion or kept running) and
``JetJobSnapshot`` (an exported snapshot of a job's state, used to restart or
upgrade it). It talks to clusters only through the public jetlet client API and
never imports the worker's engine. Install it with the ``operator`` extra.
"""

__all__: list[str] = []
