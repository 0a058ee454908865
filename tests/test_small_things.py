"""Notebooks and small things (issue 16 item 11), each as a user meets it.

``local_cluster`` as a start/stop object; one semantics for ``get_list``
(a copy) and a way to delete a list or map; ``python -m jetlet``; every doc
listed in docs/README.md; ``import jetlet`` light (no member, no aiohttp,
no engine); REST errors in JSON, a pipeline without a sink a 400.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import cloudpickle
import psutil

import jetlet
from jetlet import Pipeline, Sinks, Sources, cli
from jetlet.local_cluster import LocalCluster, local_cluster

ROOT = Path(__file__).resolve().parent.parent


def test_local_cluster_starts_and_stops_without_a_with_block() -> None:
    # given a local cluster started as a notebook cell would
    cluster = local_cluster(1)
    assert isinstance(cluster, LocalCluster)
    client = cluster.start()
    try:
        pids = client.pids
        assert len(client.cluster().members) == 1
        assert cluster.log_paths[0].exists()
    finally:
        # when a later cell stops it, then no member is left
        cluster.stop()
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    # and it can start again
    with cluster as again:
        assert len(again.cluster().members) == 1


def test_embedded_get_list_is_a_copy_and_lists_and_maps_can_be_destroyed() -> None:
    p = Pipeline()
    p.read_from(Sources.items(1, 2, 3)).write_to(Sinks.list("out"))
    q = Pipeline()
    q.read_from(Sources.items(("a", 1))).write_to(Sinks.map("m", lambda e: e[0], lambda e: e[1]))
    with jetlet.embedded() as jet:
        jet.new_job(p).join()
        jet.new_job(q).join()
        # a copy, as a cluster client's: changing it changes nothing in the instance
        got = jet.get_list("out")
        got.append(99)
        assert sorted(jet.get_list("out")) == [1, 2, 3]
        jet.get_map("m")["b"] = 2
        assert jet.get_map("m") == {"a": 1}
        # destroyed: a later read is empty, and a job writes afresh
        jet.destroy_list("out")
        jet.destroy_map("m")
        assert jet.get_list("out") == [] and jet.get_map("m") == {}
        jet.new_job(p).join()
        assert sorted(jet.get_list("out")) == [1, 2, 3]


def test_python_dash_m_jetlet_is_the_command_line() -> None:
    done = subprocess.run([sys.executable, "-m", "jetlet", "--version"], capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, f"jetlet {jetlet.__version__}")


def test_import_jetlet_and_the_command_line_load_neither_the_member_nor_aiohttp_nor_the_engine() -> None:
    probe = (
        "import sys, jetlet, jetlet.cli\n"
        "heavy = [m for m in ('aiohttp', 'jetlet.member', 'jetlet._cluster.rest', 'jetlet._execution', "
        "'jetlet.pipeline', 'jetlet._embedded') if m in sys.modules]\n"
        "print(heavy)\n"
        "from jetlet import Pipeline, local_cluster, AggregateOperations\n"
        "print(Pipeline.__name__, callable(local_cluster), AggregateOperations.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["[]", "Pipeline True jetlet.aggregate"]
    # and every public name is there, and listed
    assert set(jetlet.__all__) <= set(dir(jetlet))
    assert all(getattr(jetlet, name) is not None for name in jetlet.__all__)


def test_the_demo_defaults_of_the_command_line_are_the_demos() -> None:
    from jetlet import demo

    assert {
        name: getattr(demo.DemoSettings(), name) for name in demo.DemoSettings.__dataclass_fields__
    } == cli.DEMO_DEFAULTS


def test_docs_readme_lists_every_doc() -> None:
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([\w.-]+\.md)\)", index))
    assert linked == {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}


def test_no_doc_block_needs_the_test_tools() -> None:
    # `make run` installs jetlet alone: a doc block must not import pytest
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for block in re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
            assert not re.search(r"^\s*(import|from) pytest", block, re.M), path


def _call(address: str, token: str, method: str, path: str, body: Any = None) -> tuple[int, str, Any]:
    request = urllib.request.Request(
        f"http://{address}{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers["Content-Type"], json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], json.loads(error.read())


def test_rest_answers_json_to_unknown_paths_and_400_to_a_pipeline_without_a_sink() -> None:
    with local_cluster(1) as client:
        address, token = client.addresses[0], client.token
        # an unknown path, and a method a path does not take: JSON errors
        status, kind, body = _call(address, token, "GET", "/no/such/path")
        assert (status, kind.split(";")[0]) == (404, "application/json")
        assert "GET /no/such/path" in body["error"]
        status, kind, body = _call(address, token, "DELETE", "/jobs")
        assert (status, kind.split(";")[0]) == (405, "application/json")
        # a pipeline with a stage that leads to no sink: bad input, 400, not a conflict
        p = Pipeline()
        p.read_from(Sources.items(1, 2)).map(str)
        definition = base64.b64encode(cloudpickle.dumps(p)).decode("ascii")
        status, _, body = _call(address, token, "POST", "/jobs", {"definition": definition})
        assert status == 400, body
        assert "leads to no sink" in body["error"]
