"""TLS on both ports: members serve HTTPS and talk TLS to each other, with certificates of one CA."""

from __future__ import annotations

import collections
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from member_processes import MemberProcesses

import jetlet
from jetlet._cluster import tls
from jetlet._network import frames, handshake
from jetlet.client import Client
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sinks, Sources

SECRET = "the-cluster-secret-for-tls-tests"


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


@pytest.fixture
def member_processes(tmp_path: Path) -> Iterator[MemberProcesses]:
    processes = MemberProcesses(tmp_path)
    yield processes
    processes.stop_all()


def _try_handshake(sock: socket.socket | ssl.SSLSocket, peer: str) -> bool:
    """Whether a handshake as "outsider" with ``SECRET`` completes over ``sock`` (False: refused)."""
    shake = handshake.Handshake(handshake.Role.INITIATOR, "outsider", SECRET.encode(), expected_peer=peer)
    decoder = frames.FrameDecoder()
    outgoing = shake.start()
    try:
        while not shake.is_done:
            sock.sendall(b"".join(frames.encode_frame(t, p) for t, p in outgoing))
            outgoing = []
            chunk = sock.recv(65536)
            if not chunk:
                return False
            for frame in decoder.feed(chunk):
                outgoing += shake.receive(frame.msg_type, frame.payload)
    except (frames.ProtocolError, OSError):
        return False
    return True


def test_with_tls_flags_the_data_port_refuses_a_plain_tcp_peer_that_holds_the_secret(
    tls_files: dict[str, str], member_processes: MemberProcesses
) -> None:
    # given a member started with the TLS flags
    flags = ["--tls-cert-file", tls_files["cert"], "--tls-key-file", tls_files["key"]]
    member = member_processes.start("a", SECRET, *flags, "--tls-ca-file", tls_files["ca"])
    # when a plain TCP peer that holds the cluster secret dials its data port
    with socket.create_connection(member.data_address, timeout=30) as sock:
        # then it cannot complete the handshake
        assert not _try_handshake(sock, "a")
    # while a TLS peer with a certificate of the cluster's CA and the secret can (so the refusal is TLS)
    context = tls.client_context(tls_files["ca"], tls_files["cert"], tls_files["key"])
    with (
        socket.create_connection(member.data_address, timeout=30) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as sock,
    ):
        assert _try_handshake(sock, "a")
    # and a TLS peer without a certificate is refused too (the data port's TLS is mutual)
    anonymous = tls.client_context(tls_files["ca"])
    with (
        socket.create_connection(member.data_address, timeout=30) as raw,
        anonymous.wrap_socket(raw, server_hostname="127.0.0.1") as sock,
    ):
        assert not _try_handshake(sock, "a")


@pytest.mark.parametrize("broken", ["cert", "key", "ca", "cert-not-pem"])
def test_a_member_with_a_missing_or_bad_tls_file_exits_with_one_line_naming_the_flag(
    tls_files: dict[str, str], tmp_path: Path, broken: str
) -> None:
    files = dict(tls_files)
    if broken == "cert-not-pem":
        (tmp_path / "not.pem").write_text("not a certificate\n")
        files["cert"] = str(tmp_path / "not.pem")
    else:
        files[broken] = str(tmp_path / "missing.pem")
    (tmp_path / "token").write_text("a-token-0123456789")
    (tmp_path / "secret").write_text(SECRET)
    command = [
        sys.executable, "-m", "jetlet.member", "--rest-port", "0", "--data-port", "0",
        "--token-file", str(tmp_path / "token"), "--secret-file", str(tmp_path / "secret"),
        "--tls-cert-file", files["cert"], "--tls-key-file", files["key"], "--tls-ca-file", files["ca"],
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    flag = {"cert": "--tls-cert-file", "key": "--tls-key-file", "ca": "--tls-ca-file"}.get(
        broken, "--tls-cert-file"
    )
    assert flag in lines[0] and ("No such file" in lines[0] or "not a PEM" in lines[0])
