"""TLS for both ports: contexts built from the member's certificate, key and the cluster's CA.

With ``tls_cert_file`` and ``tls_key_file`` set, a member serves its REST API
over HTTPS and its data port over TLS, and dials other members over TLS,
checking their certificates against ``tls_ca_file`` (the data connections
are mutual: each side shows its certificate). TLS comes on top of, not
instead of, the secret handshake and the bearer token. Clients pass the CA
file to :func:`jetlet.client.connect` (``ca_file=``) to reach an HTTPS
member.

:func:`check_files` builds every context once, before the member starts, and
turns a missing or unreadable file, or one that is not PEM of the right kind,
into a :class:`TlsFileError` whose one line names the flag and the file.
"""

from __future__ import annotations

import ssl


class TlsFileError(ValueError):
    """A TLS file is missing, unreadable or not what its setting needs; the message names the flag."""


def check_files(cert_file: str, key_file: str, ca_file: str) -> None:
    """Raise :class:`TlsFileError` unless the member's TLS contexts can be built from these files.

    >>> check_files("", "", "")  # TLS off: nothing to check
    >>> check_files("/no/such/cert.pem", "/no/such/key.pem", "/no/such/ca.pem")
    Traceback (most recent call last):
    ...
    jetlet._cluster.tls.TlsFileError: --tls-cert-file /no/such/cert.pem: No such file or directory
    """
    if not cert_file:
        return
    for flag, path in (
        ("--tls-cert-file", cert_file),
        ("--tls-key-file", key_file),
        ("--tls-ca-file", ca_file),
    ):
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise TlsFileError(f"{flag} {path}: {exc.strerror or exc}") from None
    try:
        mutual_server_context(cert_file, key_file, ca_file)
        client_context(ca_file, cert_file, key_file)
    except (ssl.SSLError, OSError, ValueError) as exc:
        files = f"--tls-cert-file {cert_file}, --tls-key-file {key_file}, --tls-ca-file {ca_file}"
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
        raise TlsFileError(f"{files}: not a PEM certificate with its key and a PEM CA ({reason})") from None


def server_context(cert_file: str, key_file: str, ca_file: str) -> ssl.SSLContext:
    """For accepted connections: our certificate; peers' certificates checked against the CA if given."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    if ca_file:
        context.load_verify_locations(ca_file)
    return context


def mutual_server_context(cert_file: str, key_file: str, ca_file: str) -> ssl.SSLContext:
    """For the data port: like :func:`server_context`, and the peer must show a certificate of the CA."""
    context = server_context(cert_file, key_file, ca_file)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def client_context(ca_file: str, cert_file: str = "", key_file: str = "") -> ssl.SSLContext:
    """For dialed connections: the server's certificate checked against the CA; ours shown if given."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file or None)
    if cert_file:
        context.load_cert_chain(cert_file, key_file)
    return context
