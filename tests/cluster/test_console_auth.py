"""The web console's login, session cookie, CSRF checks and read-only mode, over HTTP without a browser.

A REST server over the one-member service runs an endless job; requests are
made as a browser would make them (a cookie, an ``Origin``, the CSRF header)
and as an attacker's page could (the cookie alone, another ``Origin``).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

import jetlet
from jetlet import Pipeline, Sinks, Sources, client
from jetlet._cluster import console_auth, job_service, rest, settings
from jetlet.testing import wait_until

TOKEN = "console-test-token-0123456789"


class Server:
    """A REST server over an embedded job service running one endless job."""

    def __init__(self, anonymous: str = "none") -> None:
        self.service = job_service.EmbeddedJobService(jetlet.embedded())
        self.server = rest.RestServer(rest.create_app(self.service, dict, TOKEN, console_anonymous=anonymous))
        self.host, self.port = self.server.start("127.0.0.1", 0)
        self.origin = f"http://{self.host}:{self.port}"
        p = Pipeline()
        p.read_from(Sources.test_stream(100, lambda i: i)).with_ingestion_timestamps().write_to(Sinks.noop())
        self.job = client.connect(f"{self.host}:{self.port}", TOKEN).new_job(p)

    def request(
        self, method: str, path: str, body: Any = None, **headers: str
    ) -> tuple[int, dict[str, Any], http.client.HTTPResponse]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=10)
        data = None if body is None else json.dumps(body).encode()
        headers = {k.replace("_", "-"): v for k, v in headers.items()}
        connection.request(method, path, data, headers)
        response = connection.getresponse()
        raw = response.read()
        connection.close()
        is_json = response.getheader("Content-Type", "").startswith("application/json")
        return response.status, json.loads(raw) if is_json else {"text": raw.decode()}, response

    def login(self) -> tuple[str, str]:
        """Log in with the right token; the cookie header to send back, and the CSRF token."""
        status, body, response = self.request("POST", "/console/login", {"token": TOKEN}, Origin=self.origin)
        assert status == 200, body
        cookie = response.getheader("Set-Cookie", "")
        return cookie.split(";")[0], body["csrf"]

    def close(self) -> None:
        self.server.stop()
        self.service.close()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


def test_given_a_wrong_token_when_logging_in_then_refused_clearly_counted_and_no_cookie(
    server: Server,
) -> None:
    status, body, response = server.request(
        "POST", "/console/login", {"token": "guess"}, Origin=server.origin
    )
    assert status == 401 and "wrong token" in body["error"]
    assert response.getheader("Set-Cookie") is None
    assert server.request("GET", "/health")[1]["refused"]["refused_console_login"] == 1


def test_given_many_wrong_logins_then_the_address_waits_even_with_the_right_token(server: Server) -> None:
    burst = server.server.app[console_auth.AUTH_KEY].limiter.burst
    for _ in range(burst):
        assert server.request("POST", "/console/login", {"token": "guess"}, Origin=server.origin)[0] == 401
    status, body, response = server.request("POST", "/console/login", {"token": TOKEN}, Origin=server.origin)
    assert status == 429 and "too many failed logins" in body["error"]
    assert int(response.getheader("Retry-After", "0")) >= 1 and response.getheader("Set-Cookie") is None
    assert server.request("GET", "/jobs", Authorization=f"Bearer {TOKEN}")[0] == 429  # one limiter for both


def test_given_the_right_token_then_an_httponly_strict_cookie_and_a_session(server: Server) -> None:
    status, body, response = server.request("POST", "/console/login", {"token": TOKEN}, Origin=server.origin)
    cookie = response.getheader("Set-Cookie", "")
    assert status == 200 and body["logged_in"]
    assert cookie.startswith(f"{console_auth.COOKIE}=")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert TOKEN not in cookie
    session = server.request("GET", "/console/session", Cookie=cookie.split(";")[0])[1]
    assert session == {"logged_in": True, "csrf": body["csrf"], "anonymous": "none"}
    assert server.request("GET", "/console/session")[1] == {"logged_in": False, "anonymous": "none"}


def test_given_a_login_from_another_site_then_refused(server: Server) -> None:
    status, body, _ = server.request("POST", "/console/login", {"token": TOKEN}, Origin="http://evil.example")
    assert status == 403 and "cross-origin" in body["error"]


def test_given_a_session_then_reads_pass_and_an_action_needs_its_csrf_token_and_this_origin(
    server: Server,
) -> None:
    cookie, csrf = server.login()
    assert server.request("GET", "/jobs", Cookie=cookie)[0] == 200
    suspend = f"/jobs/{server.job.id}/suspend"
    # the cookie alone (what another site's form would send) does nothing
    status, body, _ = server.request("POST", suspend, {}, Cookie=cookie)
    assert status == 403 and "CSRF" in body["error"]
    assert server.request("POST", suspend, {}, Cookie=cookie, X_CSRF_Token="forged")[0] == 403
    status, body, _ = server.request(
        "POST", suspend, {}, Cookie=cookie, X_CSRF_Token=csrf, Origin="http://evil.example"
    )
    assert status == 403 and "Origin" in body["error"]
    assert (
        server.request("POST", suspend, {}, Cookie=cookie, X_CSRF_Token=csrf, Sec_Fetch_Site="cross-site")[0]
        == 403
    )
    assert server.job.status is not jetlet.JobStatus.SUSPENDED
    # with its CSRF token, from this origin, it acts
    status, body, _ = server.request(
        "POST", suspend, {}, Cookie=cookie, X_CSRF_Token=csrf, Origin=server.origin
    )
    assert status == 200, body
    wait_until(lambda: server.job.status is jetlet.JobStatus.SUSPENDED, "the job suspended")


def test_given_a_logout_then_the_cookie_no_longer_reads_or_acts(server: Server) -> None:
    cookie, csrf = server.login()
    assert server.request("POST", "/console/logout", {}, Cookie=cookie)[0] == 403  # needs its CSRF token
    status, _, response = server.request("POST", "/console/logout", {}, Cookie=cookie, X_CSRF_Token=csrf)
    assert status == 200 and f"{console_auth.COOKIE}=;" in response.getheader("Set-Cookie", "").replace(
        '""', ""
    )
    assert server.request("GET", "/jobs", Cookie=cookie)[0] == 401
    status, body, _ = server.request(
        "POST", f"/jobs/{server.job.id}/cancel", {}, Cookie=cookie, X_CSRF_Token=csrf
    )
    assert status == 401 and "session is over" in body["error"]
    assert server.job.status is jetlet.JobStatus.RUNNING


def test_given_the_default_then_nothing_is_shown_without_a_login(server: Server) -> None:
    for path in ("/jobs", "/cluster", "/events", f"/jobs/{server.job.id}/dag"):
        assert server.request("GET", path)[0] == 401, path


def test_given_read_only_mode_then_anonymous_reads_pass_and_actions_and_data_do_not() -> None:
    server = Server(anonymous="read-only")
    try:
        for path in ("/jobs", "/cluster", f"/jobs/{server.job.id}", f"/jobs/{server.job.id}/dag"):
            assert server.request("GET", path)[0] == 200, path
        assert server.request("GET", "/lists/secret")[0] == 401
        assert server.request("GET", "/snapshots")[0] == 401
        assert server.request("POST", f"/jobs/{server.job.id}/cancel", {}, Origin=server.origin)[0] == 401
        assert server.job.status is jetlet.JobStatus.RUNNING
        assert server.request("GET", "/console/session")[1] == {"logged_in": False, "anonymous": "read-only"}
    finally:
        server.close()


def test_given_the_console_assets_then_served_from_the_package_with_a_strict_policy(server: Server) -> None:
    status, body, response = server.request("GET", "/console/")
    assert status == 200 and 'src="console.js"' in body["text"]
    policy = response.getheader("Content-Security-Policy", "")
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
    for asset, kind in (
        ("console.js", "text/javascript"),
        ("console.css", "text/css"),
        ("logo.svg", "image/svg"),
    ):
        status, _, response = server.request("GET", f"/console/{asset}")
        assert status == 200 and response.getheader("Content-Type", "").startswith(kind), asset
    assert server.request("GET", "/console/..%2Fconsole.py")[0] == 404
    assert server.request("GET", "/console/nothing.js")[0] == 404
    status, _, response = server.request("GET", "/")
    assert status == 302 and response.getheader("Location") == "/console/"


def test_given_sessions_then_they_expire_and_the_oldest_goes_past_the_limit() -> None:
    now = [0.0]
    sessions = console_auth.Sessions(clock=lambda: now[0], ttl_s=10.0)
    first = sessions.create()
    assert sessions.find(first.id) == first and sessions.find("unknown") is None
    now[0] = 10.0
    assert sessions.find(first.id) is None and len(sessions) == 0
    made = [sessions.create() for _ in range(console_auth.MAX_SESSIONS + 1)]
    assert len(sessions) == console_auth.MAX_SESSIONS
    assert sessions.find(made[0].id) is None and sessions.find(made[-1].id) == made[-1]
    assert len({s.id for s in made}) == len(made) and all(s.csrf != s.id for s in made)


def test_given_the_member_setting_then_read_only_is_accepted_and_anything_else_refused() -> None:
    assert settings.load(environ={"JETLET_CONSOLE_ANONYMOUS": "read-only"}).console_anonymous == "read-only"
    assert settings.load().console_anonymous == "none"
    with pytest.raises(settings.SettingsError, match="console_anonymous"):
        settings.load({"console_anonymous": "everything"})
