"""Two small clients of the Kubernetes REST API: a blocking one for tests, an asyncio one for the kubelet.

Both speak JSON to the API server over HTTPS with a bearer token and the harness's CA. They are
deliberately thin (a path, a method, a body): what a test asserts is the API server's answer, so a
:class:`ApiError` carries the HTTP status and the server's ``Status`` object.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp

JSON = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


class ApiError(Exception):
    """The API server answered with an error status."""

    def __init__(self, status: int, body: Any, method: str, path: str) -> None:
        self.status = status
        self.body = body
        message = body.get("message", body) if isinstance(body, dict) else body
        super().__init__(f"{method} {path}: HTTP {status}: {message}")

    @property
    def reason(self) -> str:
        return str(self.body.get("reason", "")) if isinstance(self.body, dict) else ""


def ssl_context(ca_file: str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca_file)


class KubeApi:
    """A blocking client: ``api.get("/api/v1/pods")``, ``api.create(...)``, ``api.wait_for(...)``."""

    def __init__(self, server: str, token: str, ca_file: str, timeout: float = 30.0) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self._ssl = ssl_context(ca_file)
        self.timeout = timeout

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self._ssl, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                parsed: Any = json.loads(raw)
            except ValueError:
                parsed = raw.decode(errors="replace")
            raise ApiError(err.code, parsed, method, path) from None
        return json.loads(raw) if raw else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def create(self, path: str, body: JSON) -> Any:
        return self.request("POST", path, body)

    def patch(self, path: str, body: JSON, content_type: str = MERGE_PATCH) -> Any:
        return self.request("PATCH", path, body, content_type)

    def delete(self, path: str, body: JSON | None = None) -> Any:
        return self.request("DELETE", path, body)

    def get_or_none(self, path: str) -> Any:
        try:
            return self.get(path)
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def wait_for(
        self,
        path: str,
        condition: Callable[[Any], bool],
        timeout: float = 60.0,
        interval: float = 0.2,
        what: str = "",
    ) -> Any:
        """Poll ``GET path`` until ``condition(object)`` holds (``None`` for 404); that object."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            last = self.get_or_none(path)
            if condition(last):
                return last
            if time.monotonic() >= deadline:
                summary = json.dumps(last, indent=1)[:3000] if last is not None else "404"
                raise TimeoutError(f"{what or path}: condition not met in {timeout}s; last seen:\n{summary}")
            time.sleep(interval)


class AsyncKubeApi:
    """The asyncio twin of :class:`KubeApi`, with a watch (``async for event in api.watch(path, rv)``)."""

    def __init__(self, server: str, token: str, ca_file: str) -> None:
        self.server = server.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._ssl = ssl_context(ca_file)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> AsyncKubeApi:
        self._session = aiohttp.ClientSession(
            headers=self._headers, connector=aiohttp.TCPConnector(ssl=self._ssl, limit=20)
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "use AsyncKubeApi as an async context manager"
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> Any:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type} if data is not None else {}
        async with self.session.request(
            method,
            self.server + path,
            data=data,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as resp:
            raw = await resp.read()
            if resp.status >= 400:
                try:
                    parsed: Any = json.loads(raw)
                except ValueError:
                    parsed = raw.decode(errors="replace")
                raise ApiError(resp.status, parsed, method, path)
            return json.loads(raw) if raw else None

    async def get(self, path: str) -> Any:
        return await self.request("GET", path)

    async def create(self, path: str, body: JSON) -> Any:
        return await self.request("POST", path, body)

    async def patch(self, path: str, body: JSON, content_type: str = MERGE_PATCH) -> Any:
        return await self.request("PATCH", path, body, content_type)

    async def delete(self, path: str, body: JSON | None = None) -> Any:
        return await self.request("DELETE", path, body)

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 60) -> AsyncIterator[JSON]:
        """The watch events of a collection from ``resource_version`` until the server ends the watch."""
        sep = "&" if "?" in path else "?"
        url = (
            f"{self.server}{path}{sep}watch=1&resourceVersion={resource_version}"
            f"&allowWatchBookmarks=true&timeoutSeconds={timeout_seconds}"
        )
        async with self.session.get(
            url, timeout=aiohttp.ClientTimeout(total=None, sock_read=timeout_seconds + 30)
        ) as resp:
            if resp.status >= 400:
                raise ApiError(resp.status, (await resp.read()).decode(errors="replace"), "WATCH", path)
            buffer = b""
            async for chunk in resp.content.iter_any():
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
