"""A real `memdir serve` for tests: a uvicorn subprocess on 127.0.0.1 and a free port. No mocks.

- :func:`running_server` (context manager): start ``python -m memdir serve --port <free>
  --project <project> *extra_args`` with ``MEMDIR_HOME=<home>`` (plus ``env``), wait until
  ``/healthz`` answers, yield a :class:`Server` (base URL, token, home, stderr), then stop it
  (SIGTERM, then SIGKILL after a grace period). Extra arguments pass through as given, e.g.
  ``"--database", dsn`` for the PostgreSQL store or ``"--host", "0.0.0.0"``.
- ``server`` (fixture): :func:`running_server` for the test's ``home`` and ``repo``.
- :func:`assert_error` (the one error shape, with a status and code), :func:`raw_request`
  (a path sent exactly as written, e.g. ``..%2F``), :func:`store_memory`.

The server's stderr goes to a file (never a pipe that could fill and block it); read it with
:meth:`Server.stderr`.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

__all__ = ["Server", "assert_error", "free_port", "raw_request", "running_server", "server",
           "store_memory"]

START_TIMEOUT = 30.0


def free_port() -> int:
    """A port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    """A running `memdir serve`: where it is, its token, and what it printed."""

    url: str  # e.g. http://127.0.0.1:43123 (no trailing slash)
    token: str  # "" when started with --no-token
    home: Path
    process: subprocess.Popen[bytes]
    stderr_path: Path
    args: list[str] = field(default_factory=list)

    @property
    def headers(self) -> dict[str, str]:
        """The Authorization header every /api request needs."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def client(self, *, auth: bool = True, timeout: float = 30.0) -> httpx.Client:
        """An httpx client for this server (with the token unless ``auth=False``)."""
        return httpx.Client(base_url=self.url, headers=self.headers if auth else {},
                            timeout=timeout)

    def request(self, method: str, path: str, *, auth: bool = True,
                **kwargs: Any) -> httpx.Response:
        """One request with a fresh client (with the token unless ``auth=False``)."""
        with self.client(auth=auth) as client:
            return client.request(method, path, **kwargs)

    def stderr(self) -> str:
        """Everything the server printed on stderr so far."""
        return self.stderr_path.read_text(errors="replace")


def _connect_host(args: tuple[str, ...]) -> str:
    host = "127.0.0.1"
    for n, arg in enumerate(args):
        if arg == "--host" and n + 1 < len(args):
            host = args[n + 1]
        elif arg.startswith("--host="):
            host = arg.split("=", 1)[1]
    if host in ("0.0.0.0", "", "::"):  # bound everywhere: reach it on loopback
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def stop(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=grace)


def wait_healthy(url: str, process: subprocess.Popen[bytes], stderr_path: Path,
                  timeout: float) -> None:
    """Until ``url``'s /healthz answers 200; a clear error (with the server's stderr) when the
    process exits or ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"memdir serve exited with {process.returncode}:\n"
                               f"{stderr_path.read_text(errors='replace')}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/healthz", timeout=2.0).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"memdir serve did not answer /healthz within {timeout:.0f}s:\n"
                       f"{stderr_path.read_text(errors='replace')}")


@contextlib.contextmanager
def running_server(home: Path, project: Path, *extra_args: str,
                   env: Mapping[str, str] | None = None,
                   timeout: float = START_TIMEOUT) -> Iterator[Server]:
    """Run `memdir serve` for ``home`` and ``project`` until the block ends."""
    port = free_port()
    args = [sys.executable, "-m", "memdir", "serve", "--port", str(port),
            "--project", str(project), *extra_args]
    full_env = {**os.environ, "MEMDIR_HOME": str(home), **(env or {})}
    fd, name = tempfile.mkstemp(prefix="memdir-serve-", suffix=".stderr")
    stderr_path = Path(name)
    try:
        with os.fdopen(fd, "wb") as err:
            process = subprocess.Popen(args, cwd=project, env=full_env, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=err)
        try:
            url = f"http://{_connect_host(extra_args)}:{port}"
            wait_healthy(url, process, stderr_path, timeout)
            token_home = Path(full_env["MEMDIR_HOME"])
            token_file = token_home / "server.token"
            token = "" if "--no-token" in extra_args else token_file.read_text().strip()
            yield Server(url=url, token=token, home=token_home, process=process,
                         stderr_path=stderr_path, args=args)
        finally:
            stop(process)
    finally:
        stderr_path.unlink(missing_ok=True)


@pytest.fixture
def server(home: Path, repo: Path) -> Iterator[Server]:
    """`memdir serve` over the test's home and repository (SQLite store)."""
    with running_server(home, repo) as running:
        yield running


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The one error shape, with this status and code; returns the error object."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert set(error) == {"code", "message", "hint"}, error
    assert error["code"] == code, error
    assert error["message"] and error["hint"], error
    assert "Traceback" not in response.text
    return error


def raw_request(srv: Server, method: str, path: str, *, auth: bool = True) -> httpx.Response:
    """A request whose path goes on the wire exactly as given (no client normalisation of
    '..' or re-encoding), answered as an httpx.Response for the same assertions."""
    parts = urlsplit(srv.url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        conn.request(method, path, headers=srv.headers if auth else {})
        answer = conn.getresponse()
        return httpx.Response(answer.status, headers=answer.getheaders(), content=answer.read())
    finally:
        conn.close()


def store_memory(client: httpx.Client, content: str, type: str = "preference",
                 **fields: Any) -> Any:
    """POST /api/memory/store, which must answer 201; the stored memory's dict."""
    response = client.post("/api/memory/store",
                           json={"content": content, "type": type, **fields})
    assert response.status_code == 201, response.text
    return response.json()["memory"]
