"""The cluster runtime: membership, partition table, settings, job service and REST API.

A member process (``jetlet.member``) is assembled from these modules: it reads
its ``settings``, joins the other members (``membership``), derives the
``partition_table`` from the member list, and serves the ``rest`` API, which
drives jobs through a ``job_service.JobService``.
"""
