"""What a hostile or broken HTTP client can do to `memdir serve`: every answer the server
writes, uvicorn's own included, is the one JSON error shape; a request that trickles in or
stalls part way is cut off after ``--request-timeout``. Real servers on 127.0.0.1, raw
sockets (an HTTP client library would not send these requests)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from server_support import Server, running_server

TIMEOUT = 1.0  # the server's --request-timeout in these tests
WAIT = 15.0  # how long a test waits for the server to act (generous: a loaded machine)


@pytest.fixture
def quick(home: Path, repo: Path) -> Iterator[Server]:
    """`memdir serve --request-timeout 1`."""
    with running_server(home, repo, "--request-timeout", str(TIMEOUT)) as running:
        yield running


def _connect(srv: Server) -> socket.socket:
    parts = urlsplit(srv.url)
    sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), WAIT)
    sock.settimeout(WAIT)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (or WAIT passes)."""
    out = b""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            return out
        out += chunk
    raise AssertionError(f"the server kept the connection open; it sent {out!r}")


def _parse(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    return status, headers, body


def _assert_json_error(answer: bytes, status: int, code: str) -> dict[str, str]:
    got, headers, body = _parse(answer)
    assert got == status, answer
    assert headers["content-type"].startswith("application/json"), answer
    assert headers.get("x-content-type-options") == "nosniff", answer
    data = json.loads(body)
    assert set(data) == {"error"} and set(data["error"]) == {"code", "message", "hint"}, data
    assert data["error"]["code"] == code and data["error"]["hint"], data
    error: dict[str, str] = data["error"]
    return error


@pytest.mark.parametrize("request_bytes", [
    b"GARBAGE\r\n\r\n",  # no method, path, version
    b"GET / HTTP/1.1\r\nHost: x\r\nno colon in this header\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nBad Name: value\r\n\r\n",  # a space in the name
    b"GET /a b c HTTP/1.1\r\nHost: x\r\n\r\n",  # spaces in the target
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: many\r\n\r\n",
])
def test_a_request_http_cannot_parse_gets_the_json_error_shape(server: Server,
                                                               request_bytes: bytes) -> None:
    with _connect(server) as sock:
        sock.sendall(request_bytes)
        answer = _read_all(sock)
    error = _assert_json_error(answer, 400, "bad_request")
    assert "malformed HTTP request" in error["message"]


def test_a_body_that_stalls_part_way_is_cut_off_with_408(quick: Server) -> None:
    started = time.monotonic()
    with _connect(quick) as sock:
        sock.sendall(b"POST /api/memory/store HTTP/1.1\r\nHost: x\r\n"
                     b"Authorization: Bearer " + quick.token.encode() + b"\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
                     b'{"content": "half a bo')
        answer = _read_all(sock)
    assert time.monotonic() - started < WAIT
    error = _assert_json_error(answer, 408, "request_timeout")
    assert "--request-timeout" in error["hint"]
    with quick.client() as client:  # the server still serves everyone else
        assert client.get("/api/memory").status_code == 200


def test_headers_trickled_forever_are_cut_off(quick: Server) -> None:
    started = time.monotonic()
    with _connect(quick) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        closed_after = None
        # One header byte every 0.2 s: each arrives well inside any idle timeout.
        for _ in range(int(WAIT / 0.2)):
            try:
                sock.sendall(b"X")
            except (BrokenPipeError, ConnectionResetError):
                closed_after = time.monotonic() - started
                break
            time.sleep(0.2)
            sock.setblocking(False)
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                data = None
            except ConnectionResetError:
                data = b""
            finally:
                sock.setblocking(True)
            if data is not None:
                if data:
                    _assert_json_error(data, 408, "request_timeout")
                closed_after = time.monotonic() - started
                break
    assert closed_after is not None, "the server still reads headers trickled in"
    assert closed_after < TIMEOUT + 5


def test_a_connection_that_never_sends_a_byte_is_closed_silently(quick: Server) -> None:
    with _connect(quick) as sock:
        assert _read_all(sock) == b""  # closed, and no answer to a request never made


def test_the_request_timeout_must_be_positive(home: Path, repo: Path) -> None:
    with (pytest.raises(RuntimeError, match="--request-timeout must be more than 0"),
          running_server(home, repo, "--request-timeout", "0", timeout=20)):
        pass


def test_the_documented_default_timeout_is_the_one_in_force() -> None:
    from memdir.cli.serve_cli import DEFAULT_REQUEST_TIMEOUT as CLI_DEFAULT
    from memdir.team.server.protocol import DEFAULT_REQUEST_TIMEOUT, protocol_class

    assert CLI_DEFAULT == DEFAULT_REQUEST_TIMEOUT == 30.0  # docs/api.md and README say 30
    assert protocol_class(2.5).request_timeout == 2.5
