"""A local cluster's members do not outlive the program that started them, even when it is killed."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys

from jetlet.testing import wait_until

PROGRAM = """
import json, sys, time
from jetlet.local_cluster import local_cluster
with local_cluster(2) as client:
    with open(sys.argv[1] + ".tmp", "w") as f:
        json.dump(client.pids, f)
    import os
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_given_a_local_cluster_when_its_program_is_killed_then_its_members_stop(
    tmp_path: pathlib.Path,
) -> None:
    pids_file = tmp_path / "pids.json"
    program = subprocess.Popen([sys.executable, "-c", PROGRAM, str(pids_file)])
    try:
        wait_until(pids_file.exists, "the local cluster to start", timeout=60)
        members = json.loads(pids_file.read_text())
        assert len(members) == 2 and all(_alive(pid) for pid in members)

        program.send_signal(signal.SIGKILL)
        program.wait(timeout=10)

        wait_until(lambda: not any(_alive(pid) for pid in members), "the members to stop", timeout=20)
    finally:
        program.kill()
        program.wait(timeout=10)
        if pids_file.exists():
            for pid in json.loads(pids_file.read_text()):
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
