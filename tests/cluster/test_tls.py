"""TLS on both ports: members serve HTTPS and talk TLS to each other, with certificates of one CA."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

import jetlet
from jetlet.client import Client
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sinks, Sources


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    folder = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    paths = {"ca": folder / "ca.pem", "cert": folder / "member.pem", "key": folder / "member.key"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    cert.private_key_pem.write_to_path(str(paths["key"]))
    for blob in cert.cert_chain_pems:
        blob.write_to_path(str(paths["cert"]), append=True)
    yield {name: str(path) for name, path in paths.items()}


def test_a_cluster_with_tls_runs_jobs_over_https_and_tls_data_connections(tls_files: dict[str, str]) -> None:
    # given two members with TLS on both ports
    args = [
        "--tls-cert-file", tls_files["cert"],
        "--tls-key-file", tls_files["key"],
        "--tls-ca-file", tls_files["ca"],
    ]  # fmt: skip
    with local_cluster(2, args, ca_file=tls_files["ca"]) as client:
        assert client.base_url.startswith("https://")
        # when a job whose grouping crosses members runs
        p = Pipeline()
        words = ["tls", "is", "on", "tls", "on", "tls"] * 500
        p.read_from(Sources.from_iterable(words)).grouping_key(lambda w: w).aggregate(
            jetlet.AggregateOperations.counting()
        ).write_to(Sinks.map("counts"))
        job = client.new_job(p)
        job.join(60)
        # then its result is right and items crossed the (TLS) data connection
        assert client.get_map("counts") == collections.Counter(words)
        assert sum(v.get("distributedItemsIn", 0) for v in job.metrics().values()) > 0
        # and a client speaking plain HTTP, or not trusting the CA, is refused
        with pytest.raises(jetlet.JetletError, match="cannot reach"):
            Client(client.address, "any").request("GET", "/cluster")
        with pytest.raises(jetlet.JetletError, match="cannot reach"):
            Client(client.address, "any", ca_file=str(Path(tls_files["cert"]))).request("GET", "/cluster")


def test_tls_settings_must_come_together() -> None:
    from jetlet._cluster import settings

    with pytest.raises(settings.SettingsError, match="set both or neither"):
        settings.MemberSettings(tls_cert_file="x.pem")
    with pytest.raises(settings.SettingsError, match="tls_ca_file"):
        settings.MemberSettings(tls_cert_file="x.pem", tls_key_file="x.key")
