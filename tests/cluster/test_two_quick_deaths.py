"""Two members killed 0.25 s apart on a 4-member cluster with one backup (issue 15, item 5).

With ``backup_count`` 1, two quick deaths may take a partition's primary and
its backup at once; the job then cannot be restored exactly. What must hold
is that it never completes wrong: it either completes with exactly the
plain-Python result, or it ends FAILED with a reason. The seed picks the
moment of the first kill (``TWO_DEATHS_SEED`` overrides it, to run the
scenario in a loop with other seeds).
"""

from __future__ import annotations

import collections
import os
import pathlib
import random
import signal
import time

import test_fault_tolerance as ft

import jetlet
from jetlet import ProcessingGuarantee
from jetlet.client import Client
from jetlet.local_cluster import local_cluster
from jetlet.testing import wait_until


def test_two_quick_member_deaths_complete_exactly_or_fail_with_a_reason(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    rng = random.Random(int(os.environ.get("TWO_DEATHS_SEED", "3")))
    victims = (2, 3)
    with local_cluster(4, ft.FAST_FAILURE) as client:
        survivor = Client(client.addresses[1], client.token)
        job = client.new_job(ft._stateful_map(str(out)), ft._config(ProcessingGuarantee.EXACTLY_ONCE))
        ft._wait_for_snapshot(client, job)
        time.sleep(rng.uniform(0.1, 1.0))  # a moment drawn by the seed, not a wait
        os.kill(client.pids[victims[0]], signal.SIGKILL)
        time.sleep(0.25)  # the scenario's gap between the two deaths
        os.kill(client.pids[victims[1]], signal.SIGKILL)
        wait_until(lambda: survivor.get_job(job.id) is not None, "the job to be known after the deaths", 30)
        handle = survivor.get_job(job.id)
        assert handle is not None
        try:
            handle.join(120)
        except jetlet.JobFailedError as exc:
            # a job that cannot be restored exactly fails, saying why
            assert handle.status is jetlet.JobStatus.FAILED
            assert str(exc).strip(), "the job failed without a reason"
            print(f"two quick deaths: FAILED with: {exc}")
            return
        assert handle.status is jetlet.JobStatus.COMPLETED
        restarts = handle.last_record.restarts
    found = ft._committed(out)
    seen = collections.Counter((key, seq) for key, seq, _ in found.elements())
    repeated = sum(n - 1 for n in seen.values())
    total = sum(found.values())
    print(f"two quick deaths: COMPLETED, {total} outputs, {repeated} repeated, restarts {restarts}")
    ft._check_stateful(found)
